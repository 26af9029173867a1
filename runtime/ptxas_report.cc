#include "runtime/ptxas_report.h"

#include <cstdlib>
#include <regex>
#include <sstream>

namespace dg {

namespace {

int64_t number_before(const std::string& line, const std::string& what) {
  std::smatch m;
  if (std::regex_search(line, m, std::regex("(\\d+) " + what))) return std::stoll(m[1].str());
  return 0;
}

KernelResources* find(std::vector<KernelResources>& v, const std::string& name) {
  for (KernelResources& r : v)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

std::vector<KernelResources> parse_ptxas_log(std::string_view log) {
  static const std::regex entry("Compiling entry function '([^']+)' for '([^']+)'");
  static const std::regex properties("Function properties for (\\S+)");
  std::vector<KernelResources> out;
  std::string current, props_of;
  std::istringstream in{std::string(log)};
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      current = m[1].str();
      if (!find(out, current)) out.push_back({current, m[2].str()});
      props_of.clear();
    } else if (std::regex_search(line, m, properties)) {
      props_of = m[1].str();
    } else if (line.find("bytes stack frame") != std::string::npos) {
      // Belongs to the function named on the "Function properties" line just before.
      if (KernelResources* r = find(out, props_of)) {
        r->stack_frame_bytes = number_before(line, "bytes stack frame");
        r->spill_store_bytes = number_before(line, "bytes spill stores");
        r->spill_load_bytes = number_before(line, "bytes spill loads");
      }
    } else if (line.find("Used ") != std::string::npos && line.find("registers") != std::string::npos) {
      if (KernelResources* r = find(out, current)) {
        r->registers = static_cast<int>(number_before(line, "registers"));
        r->barriers = static_cast<int>(number_before(line, "barriers"));
        r->shared_bytes = number_before(line, "bytes smem");
        r->constant_bytes = number_before(line, "bytes cmem\\[0\\]");
      }
    }
  }
  return out;
}

std::string serialize_resources(const std::vector<KernelResources>& v) {
  std::string s;
  for (const KernelResources& r : v)
    s += r.name + " " + r.arch + " " + std::to_string(r.registers) + " " +
         std::to_string(r.barriers) + " " + std::to_string(r.stack_frame_bytes) + " " +
         std::to_string(r.spill_store_bytes) + " " + std::to_string(r.spill_load_bytes) + " " +
         std::to_string(r.shared_bytes) + " " + std::to_string(r.constant_bytes) + "\n";
  return s;
}

bool deserialize_resources(std::string_view text, std::vector<KernelResources>* out) {
  out->clear();
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    KernelResources r;
    if (!(f >> r.name >> r.arch >> r.registers >> r.barriers >> r.stack_frame_bytes >>
          r.spill_store_bytes >> r.spill_load_bytes >> r.shared_bytes >> r.constant_bytes))
      return false;
    std::string extra;
    if (f >> extra) return false;
    out->push_back(r);
  }
  return true;
}

int64_t max_shared_bytes_per_block(const std::string& arch) {
  // CUDA C++ Programming Guide, compute capabilities table: maximum shared memory per block
  // with the opt-in attribute.
  int sm = std::atoi(arch.c_str() + (arch.rfind("sm_", 0) == 0 ? 3 : 0));
  switch (sm) {
    case 80: return 163 * 1024;
    case 86: case 89: return 99 * 1024;
    case 87: return 163 * 1024;
    case 90: case 100: case 103: return 227 * 1024;
    default: return kMaxStaticSharedBytes;
  }
}

}  // namespace dg
