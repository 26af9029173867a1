// What ptxas reports for each kernel it assembles (NVRTC option -Xptxas=-v): registers, stack
// frame, spill stores and loads, static shared memory, barriers. The compile path always asks for
// the report and keeps it beside the binary (Note [ptxas report]).
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

// The most shared memory one block may use on `arch` (static plus dynamic, with the opt-in
// attribute): 48 KiB static only on any arch; see the .cc for the per-arch figures.
int64_t max_shared_bytes_per_block(const std::string& arch);
// The most static (__shared__) memory a kernel may declare: 48 KiB on every arch.
constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;

}  // namespace dg
