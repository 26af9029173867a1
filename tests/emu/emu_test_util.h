// Helpers for the emulation tests: modules compiled once per source (and cached on disk across
// the test processes that gtest_discover_tests starts), and launch shorthands.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "codegen/device/dg_types.cuh"
#include "ir/sha256.h"
#include "runtime/emu/device_headers.h"
#include "runtime/emu/emu_module.h"

namespace dg::emu::testing {

// Warnings in the prelude or the device layer fail the tests.
inline const std::vector<std::string> kStrictFlags = {"-Wall", "-Wextra", "-Werror"};

// The module for `source`, compiled on first use. Cached in memory and in DG_EMU_TEST_CACHE_DIR
// under a key covering the source, the embedded headers, the flags and the compiler, so that each
// test process does not pay a host compile (which also exercises EmuModule::load).
inline const EmuModule& test_module(const std::string& source,
                                    const std::vector<std::string>& flags = kStrictFlags) {
  // Several OS threads even on a small machine, so cross-block isolation is really tested.
  setenv("DYNGEN_EMU_THREADS", "3", /*overwrite=*/0);
  static std::map<std::string, std::unique_ptr<EmuModule>> modules;
  EmuCompileOptions options;
  options.extra_flags = flags;
  std::string key_text = source + EmuModule::compiler_identity(options);
  for (const auto* files : {&device_headers(), &emu_headers()})
    for (const EmbeddedFile& f : *files) key_text += std::string(f.name) + std::string(f.content);
  const std::string key = sha256_hex(key_text);
  auto it = modules.find(key);
  if (it != modules.end()) return *it->second;

  namespace fs = std::filesystem;
  const fs::path dir = DG_EMU_TEST_CACHE_DIR;
  const fs::path path = dir / (key + ".so");
  std::string bytes;
  if (std::ifstream in(path, std::ios::binary); in) {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (bytes.empty()) {
    Result<std::string> so = EmuModule::compile_to_shared_object(source, options);
    if (!so.ok()) ADD_FAILURE() << so.message();
    if (so.ok()) bytes = so.value();
    std::error_code ec;
    fs::create_directories(dir, ec);
    const fs::path tmp = path.string() + ".tmp" + std::to_string(getpid());
    if (!bytes.empty()) {
      std::ofstream(tmp, std::ios::binary) << bytes;
      fs::rename(tmp, path, ec);  // atomic publish; concurrent writers leave one valid file
    }
  }
  Result<EmuModule> module = EmuModule::load(bytes);
  if (!module.ok()) {
    ADD_FAILURE() << module.message();
    std::abort();
  }
  auto owned = std::make_unique<EmuModule>(std::move(module).value());
  return *modules.emplace(key, std::move(owned)).first->second;
}

// n bf16 values uniform in [-1, 1], reproducibly from `seed`.
inline std::vector<dg_bf16> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<dg_bf16> v(n);
  for (dg_bf16& x : v) x = dg_float_to_bf16(dist(rng));
  return v;
}

inline DgEmuLaunch grid1d(unsigned blocks, unsigned threads, unsigned smem = 0) {
  return DgEmuLaunch{blocks, 1, 1, threads, 1, 1, smem};
}

// Launches with each argument passed by address, as cuLaunchKernel takes them.
template <typename... A>
std::string launch(const EmuModule& m, const std::string& kernel, const DgEmuLaunch& cfg,
                   A&... args) {
  void* ptrs[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
  return m.launch(kernel, cfg, ptrs);
}

// Sets environment variables (the DYNGEN_EMU_* modes, read at every launch) for a scope and
// restores their previous values, or their absence, when destroyed.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.push_back({name, old != nullptr, old != nullptr ? old : ""});
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const Saved& s : saved_) {
      if (s.was_set)
        setenv(s.name.c_str(), s.value.c_str(), 1);
      else
        unsetenv(s.name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  struct Saved {
    std::string name;
    bool was_set;
    std::string value;
  };
  std::vector<Saved> saved_;
};

}  // namespace dg::emu::testing
