// The host emulation's options: read from the environment at every launch, so that a test or
// `dyngen run` can change them between launches of one loaded module.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace dg::emu {

enum class SchedMode : uint8_t { kFifo, kRandom };
enum class AsyncMode : uint8_t { kWait, kIssue, kRandom };

// Note [Adversarial emulation] in dg_emu_sched.h says what the modes do.
struct Options {
  unsigned threads = 1;                // DYNGEN_EMU_THREADS: OS threads per launch (default: cores)
  size_t stack_bytes = 64 << 10;       // DYNGEN_EMU_STACK_KB: stack per emulated CUDA thread
  SchedMode sched = SchedMode::kFifo;  // DYNGEN_EMU_SCHED=fifo|random
  AsyncMode async = AsyncMode::kWait;  // DYNGEN_EMU_ASYNC=wait|issue|random
  uint64_t seed = 0;                   // DYNGEN_EMU_SEED: seeds the random modes
  bool racecheck = false;              // DYNGEN_EMU_RACECHECK=1: shared-memory race detector
  uint32_t smem_offset = 0;  // DYNGEN_EMU_SMEM_OFFSET: dynamic shared memory's window address
  std::string error;         // an invalid variable: every launch fails with this

  // How to reproduce a launch, e.g. "DYNGEN_EMU_SCHED=random DYNGEN_EMU_ASYNC=wait ...".
  std::string describe() const {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "DYNGEN_EMU_SCHED=%s DYNGEN_EMU_ASYNC=%s DYNGEN_EMU_SEED=%llu "
                  "DYNGEN_EMU_RACECHECK=%d",
                  sched == SchedMode::kFifo ? "fifo" : "random",
                  async == AsyncMode::kWait    ? "wait"
                  : async == AsyncMode::kIssue ? "issue"
                                               : "random",
                  static_cast<unsigned long long>(seed), racecheck ? 1 : 0);
    std::string text = buf;
    if (smem_offset != 0) text += " DYNGEN_EMU_SMEM_OFFSET=" + std::to_string(smem_offset);
    return text;
  }
};

// The value of `name`, or nullptr when it is unset or empty.
inline const char* env_value(const char* name) {
  const char* s = std::getenv(name);
  return s != nullptr && *s != '\0' ? s : nullptr;
}

inline Options read_options() {
  Options o;
  unsigned hw = std::thread::hardware_concurrency();
  o.threads = hw == 0 ? 1 : hw;
  if (const char* s = env_value("DYNGEN_EMU_THREADS"); s != nullptr && std::atoi(s) > 0)
    o.threads = static_cast<unsigned>(std::atoi(s));
  if (const char* s = env_value("DYNGEN_EMU_STACK_KB"); s != nullptr && std::atoi(s) >= 16) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    o.stack_bytes = ((static_cast<size_t>(std::atoi(s)) << 10) + page - 1) / page * page;
  }
  auto bad = [&o](const char* name, const char* value, const char* expected) {
    if (o.error.empty())
      o.error = std::string(name) + "='" + value + "' is invalid: expected " + expected;
  };
  if (const char* s = env_value("DYNGEN_EMU_SCHED")) {
    if (std::strcmp(s, "fifo") == 0)
      o.sched = SchedMode::kFifo;
    else if (std::strcmp(s, "random") == 0)
      o.sched = SchedMode::kRandom;
    else
      bad("DYNGEN_EMU_SCHED", s, "fifo or random");
  }
  if (const char* s = env_value("DYNGEN_EMU_ASYNC")) {
    if (std::strcmp(s, "wait") == 0)
      o.async = AsyncMode::kWait;
    else if (std::strcmp(s, "issue") == 0)
      o.async = AsyncMode::kIssue;
    else if (std::strcmp(s, "random") == 0)
      o.async = AsyncMode::kRandom;
    else
      bad("DYNGEN_EMU_ASYNC", s, "wait, issue or random");
  }
  if (const char* s = env_value("DYNGEN_EMU_SEED")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (*s == '-' || end == s || *end != '\0')
      bad("DYNGEN_EMU_SEED", s, "a decimal integer >= 0");
    else
      o.seed = v;
  }
  if (const char* s = env_value("DYNGEN_EMU_RACECHECK")) {
    if (std::strcmp(s, "1") == 0)
      o.racecheck = true;
    else if (std::strcmp(s, "0") == 0)
      o.racecheck = false;
    else
      bad("DYNGEN_EMU_RACECHECK", s, "0 or 1");
  }
  // Note [Emulated shared window] in dg_emu_smem.h: a multiple of 16 (as on a GPU), below 2^17
  // so that every byte stays within the 18 bits a wgmma descriptor addresses.
  if (const char* s = env_value("DYNGEN_EMU_SMEM_OFFSET")) {
    char* end = nullptr;
    unsigned long v = std::strtoul(s, &end, 10);
    if (*s == '-' || end == s || *end != '\0' || v % 16 != 0 || v >= (1ul << 17))
      bad("DYNGEN_EMU_SMEM_OFFSET", s, "a multiple of 16 below 131072");
    else
      o.smem_offset = static_cast<uint32_t>(v);
  }
  return o;
}

}  // namespace dg::emu
