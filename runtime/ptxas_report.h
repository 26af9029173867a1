// What ptxas reports for each kernel it assembles (NVRTC option -Xptxas=-v): registers, stack
// frame, spill stores and loads, static shared memory, barriers. The compile path always asks for
// the report and keeps it beside the binary (Note [ptxas report]).
// It lives in runtime/, not runtime/model: the compile path (dg_runtime_core) parses it and packs
// it into the cache entry, and the compile path must not depend on the performance model; the
// model (runtime/model/perf_model.h) only reads the records.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dg {

struct KernelResources {
  std::string name;  // the entry function
  std::string arch;  // "sm_90a"
  int registers = 0;
  int barriers = 0;
  int64_t stack_frame_bytes = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t shared_bytes = 0;    // static shared memory
  int64_t constant_bytes = 0;  // cmem[0]: parameters and driver constants
};

// Parses NVRTC's log of a compile with -Xptxas=-v; one record per entry function, in the order
// ptxas reports them. Lines it does not know are ignored.
std::vector<KernelResources> parse_ptxas_log(std::string_view log);

// The records as text, one line per kernel (the form kept in the cache), and back. parse returns
// false on anything malformed.
std::string serialize_resources(const std::vector<KernelResources>& r);
bool deserialize_resources(std::string_view text, std::vector<KernelResources>* out);

// Note [Device cache payload]
// A device binary is cached together with its ptxas report, in one entry: a header line
// "dyngen-device-payload-v1 <report bytes>\n", the serialized report, then the cubin or PTX.
// One entry per binary keeps the cache's invariants (one entry per graph and target), and a
// binary found in the cache still comes with its registers, spills and shared memory.
std::string pack_device_payload(const std::string& binary,
                                const std::vector<KernelResources>& report);
// False for anything that is not such a payload (the caller treats the entry as corrupt).
bool unpack_device_payload(const std::string& payload, std::string* binary,
                           std::vector<KernelResources>* report);

// The most shared memory one block may use on `arch` (static plus dynamic, with the opt-in
// attribute): 48 KiB static only on any arch; see the .cc for the per-arch figures.
int64_t max_shared_bytes_per_block(const std::string& arch);
// The most static (__shared__) memory a kernel may declare: 48 KiB on every arch.
constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;

}  // namespace dg
