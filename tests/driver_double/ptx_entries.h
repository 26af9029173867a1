// What the driver double reads from a PTX image: each .entry's parameters (size and alignment,
// as the driver lays out kernelParams), the .target, and the source file the PTX names.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace dg::driver_double {

struct PtxParam {
  size_t size = 0;
  size_t align = 1;
};

struct PtxEntry {
  std::string name;
  std::vector<PtxParam> params;
};

struct PtxImage {
  std::string target;  // ".target sm_90a" -> "sm_90a"
  std::vector<PtxEntry> entries;
  std::vector<std::string> files;  // the .file names (with -lineinfo: the program name)
};

// Parses the declarations; false with `error` set when an .entry cannot be read.
bool parse_ptx(std::string_view ptx, PtxImage* out, std::string* error);

}  // namespace dg::driver_double
