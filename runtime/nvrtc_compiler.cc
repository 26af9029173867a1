#include "runtime/nvrtc_compiler.h"

#include <nvrtc.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>

#include "ir/sha256.h"

namespace dg {
namespace {

struct ArchSpec {
  bool ptx = false;    // "compute_" rather than "sm_"
  int number = 0;      // 90 for sm_90a
  std::string suffix;  // "", "a" or "f"
};

bool parse_arch(std::string_view arch, ArchSpec* out) {
  std::string_view rest;
  if (arch.substr(0, 3) == "sm_") {
    rest = arch.substr(3);
  } else if (arch.substr(0, 8) == "compute_") {
    out->ptx = true;
    rest = arch.substr(8);
  } else {
    return false;
  }
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0 || digits > 4) return false;
  out->number = std::stoi(std::string(rest.substr(0, digits)));
  out->suffix = std::string(rest.substr(digits));
  return out->suffix.empty() || out->suffix == "a" || out->suffix == "f";
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

// Note [PTX fallback]
// A cubin is made for any SM this NVRTC lists in nvrtcGetSupportedArchs. An SM newer than the
// newest one listed (the GPU is newer than the toolkit) gets PTX for the newest listed virtual
// architecture instead, without an "a"/"f" suffix: plain PTX is forward compatible and the driver
// JIT-compiles it for the GPU, while arch-specific PTX is not. An SM older than the oldest listed
// is an error. "compute_XX" asks for PTX explicitly. The resolved target is part of the options,
// so it is part of the cache key (Note [What the key covers]).
Result<std::string> resolve_target(const std::string& arch) {
  ArchSpec spec;
  if (!parse_arch(arch, &spec)) {
    return Status::error("invalid arch '" + arch + "' (expected sm_XY[a|f] or compute_XY[a|f])");
  }
  std::vector<int> supported = nvrtc_supported_archs();
  if (supported.empty()) return Status::error("NVRTC reports no supported architectures");
  const int newest = supported.back();
  if (spec.number > newest) return "compute_" + std::to_string(newest);
  if (std::find(supported.begin(), supported.end(), spec.number) == supported.end()) {
    return Status::error("arch '" + arch + "' is not supported by " + nvrtc_version() +
                         " (supported: " + join_ints(supported) + ")");
  }
  return (spec.ptx ? "compute_" : "sm_") + std::to_string(spec.number) + spec.suffix;
}

std::string nvrtc_error(const char* what, nvrtcResult r) {
  return std::string(what) + " failed: " + nvrtcGetErrorString(r);
}

// Owns an nvrtcProgram so every exit path destroys it.
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program != nullptr) nvrtcDestroyProgram(&program);
  }
};

void hash_field(Sha256& h, std::string_view field) {
  const uint64_t n = field.size();
  h.update(&n, sizeof n);
  h.update(field);
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "nvrtc-unknown";
  return "nvrtc-" + std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> nvrtc_supported_archs() {
  static const std::vector<int> archs = [] {
    std::vector<int> v;
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return v;
    v.resize(n);
    if (nvrtcGetSupportedArchs(v.data()) != NVRTC_SUCCESS) v.clear();
    std::sort(v.begin(), v.end());
    return v;
  }();
  return archs;
}

Result<std::vector<std::string>> nvrtc_options(const CompileOptions& options) {
  try {
    Result<std::string> target = resolve_target(options.arch);
    if (!target.ok()) return target.status();
    // --split-compile=0: ptxas optimizes kernels on every core (tile variants doubled the
    // tensor-core kernels; the seed forward's cold compile went from 5.4 to 3.8-4.0 s on 2 cores).
    std::vector<std::string> opts = {"-arch=" + target.value(), "--std=c++17", "-default-device",
                                     "--split-compile=0"};
    if (options.fast_math) opts.push_back("--use_fast_math");
    if (options.line_info) opts.push_back("-lineinfo");
    if (options.ptxas_verbose) opts.push_back("-Xptxas=-v");
    opts.insert(opts.end(), options.extra_options.begin(), options.extra_options.end());
    return opts;
  } catch (const std::exception& e) {
    return Status::error(std::string("nvrtc_options: ") + e.what());
  }
}

Result<CompiledKernel> nvrtc_compile(std::string_view source,
                                     const std::vector<CudaHeader>& headers,
                                     const CompileOptions& options, std::string_view program_name) {
  try {
    Result<std::vector<std::string>> opts = nvrtc_options(options);
    if (!opts.ok()) return opts.status();
    CompiledKernel out;
    out.target = opts.value()[0].substr(std::strlen("-arch="));
    out.kind = out.target.rfind("compute_", 0) == 0 ? BinaryKind::kPtx : BinaryKind::kCubin;

    const std::string src(source), name(program_name);
    std::vector<const char*> header_sources, header_names, option_ptrs;
    for (const CudaHeader& h : headers) {
      header_sources.push_back(h.content.c_str());
      header_names.push_back(h.name.c_str());
    }
    for (const std::string& o : opts.value()) option_ptrs.push_back(o.c_str());

    ProgramGuard guard;
    nvrtcResult r = nvrtcCreateProgram(&guard.program, src.c_str(), name.c_str(),
                                       static_cast<int>(headers.size()), header_sources.data(),
                                       header_names.data());
    if (r != NVRTC_SUCCESS) return Status::error(nvrtc_error("nvrtcCreateProgram", r));

    const nvrtcResult compiled = nvrtcCompileProgram(
        guard.program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
    size_t log_size = 0;
    if (nvrtcGetProgramLogSize(guard.program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      out.log.resize(log_size);
      if (nvrtcGetProgramLog(guard.program, out.log.data()) != NVRTC_SUCCESS) out.log.clear();
      while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
    }
    if (compiled != NVRTC_SUCCESS) {
      return Status::error("NVRTC compilation of " + name + " for " + out.target + " failed (" +
                           nvrtcGetErrorString(compiled) + "):\n" + out.log);
    }

    size_t size = 0;
    if (out.kind == BinaryKind::kCubin) {
      if ((r = nvrtcGetCUBINSize(guard.program, &size)) != NVRTC_SUCCESS)
        return Status::error(nvrtc_error("nvrtcGetCUBINSize", r));
      if (size == 0) return Status::error("NVRTC produced an empty cubin for " + out.target);
      out.binary.resize(size);
      if ((r = nvrtcGetCUBIN(guard.program, out.binary.data())) != NVRTC_SUCCESS)
        return Status::error(nvrtc_error("nvrtcGetCUBIN", r));
    } else {
      if ((r = nvrtcGetPTXSize(guard.program, &size)) != NVRTC_SUCCESS)
        return Status::error(nvrtc_error("nvrtcGetPTXSize", r));
      out.binary.resize(size);  // size includes the terminating NUL, which we keep
      if ((r = nvrtcGetPTX(guard.program, out.binary.data())) != NVRTC_SUCCESS)
        return Status::error(nvrtc_error("nvrtcGetPTX", r));
    }
    return out;
  } catch (const std::exception& e) {
    return Status::error(std::string("nvrtc_compile: ") + e.what());
  }
}

// Note [What the key covers]
// The key is what determines the binary (style point 8): the source, every header (name and
// content), the resolved NVRTC options (which include the -arch actually used), the requested
// arch (so a PTX fallback for sm_121 and one for sm_130 stay apart if NVRTC later learns one of
// them) and the NVRTC version. Each field is length-prefixed so no two inputs serialize alike.
// An arch we cannot resolve still gets a key; nvrtc_compile reports the error.
std::string compile_cache_key(std::string_view source, const std::vector<CudaHeader>& headers,
                              const CompileOptions& options) {
  try {
    Sha256 h;
    hash_field(h, "dyngen-kernel-key-v1");
    hash_field(h, nvrtc_version());
    hash_field(h, options.arch);
    Result<std::vector<std::string>> opts = nvrtc_options(options);
    if (opts.ok()) {
      for (const std::string& o : opts.value()) hash_field(h, o);
    } else {
      hash_field(h, "unresolved");
      hash_field(h, options.fast_math ? "fast_math" : "");
      hash_field(h, options.line_info ? "line_info" : "");
      hash_field(h, options.ptxas_verbose ? "ptxas_verbose" : "");
      for (const std::string& o : options.extra_options) hash_field(h, o);
    }
    hash_field(h, "headers");
    for (const CudaHeader& hd : headers) {
      hash_field(h, hd.name);
      hash_field(h, hd.content);
    }
    hash_field(h, "source");
    hash_field(h, source);
    std::array<uint8_t, 32> digest = h.finish();
    return to_hex(digest.data(), digest.size());
  } catch (const std::exception&) {
    return std::string();  // only on allocation failure; callers treat "" as "do not cache"
  }
}

BinaryKind detect_binary_kind(std::string_view binary) {
  return binary.substr(0, 4) == std::string_view(
                                    "\x7f"
                                    "ELF",
                                    4)
             ? BinaryKind::kCubin
             : BinaryKind::kPtx;
}

}  // namespace dg
