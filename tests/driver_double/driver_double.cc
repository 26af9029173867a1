// A CUDA driver test double: the entry points runtime/cuda_driver.cc binds, checked the way the
// driver checks them, recorded, and executed by the host emulation of the same kernels (device
// memory is host memory). Loaded in place of libcuda.so.1 through $DYNGEN_CUDA_DRIVER.
//
// Note [How the double runs a kernel]
// It accepts PTX only (cuDriverGetVersion reports a driver older than NVRTC, so the runtime sends
// PTX: Note [PTX when the driver is older]). From the PTX it reads each .entry's parameters and
// the .file the runtime named after the source's sha256 (dyngen_<sha>.cu, -lineinfo). A launch
// copies each parameter out of kernelParams by the PTX's size into an aligned buffer, as the
// driver does, and calls `<kernel>__emu` of the loaded host module whose dg_emu_source_sha256 is
// that sha: the same generated source, compiled for the host. A test compiles the graph for the
// host first (any process: the .so comes from the disk cache), so that module is loaded.
#include "tests/driver_double/driver_double.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/device/dg_tma_sm90.cuh"
#include "runtime/emu/dg_emu_abi.h"
#include "tests/driver_double/ptx_entries.h"

namespace {

using dg::driver_double::PtxEntry;
using dg::driver_double::PtxImage;

// CUresult values (cuda.h) the double returns.
constexpr int kOk = 0, kInvalidValue = 1, kNotInitialized = 3, kNoDevice = 100,
              kInvalidDevice = 101, kInvalidImage = 200, kInvalidContext = 201,
              kNoBinaryForGpu = 209, kInvalidHandle = 400, kNotFound = 500, kIllegalAddress = 700,
              kLaunchFailed = 719, kNotSupported = 801;
constexpr size_t kMaxParamBytes = 32764;  // Volta and newer, CUDA 12.1+

struct Context {
  int device;
  bool sticky_fault = false;
  bool fault_next_launch = false;
  bool fault_at_sync = false;
  bool fault_pending_sync = false;
};

struct Function;
struct Module {
  Context* context;
  PtxImage ptx;
  std::string source_sha;
  std::vector<std::unique_ptr<Function>> functions;
};

struct Function {
  Module* module;
  const PtxEntry* entry;
  int max_dynamic_shared = 48 * 1024;
  DgEmuEntryFn emu = nullptr;
};

struct State {
  std::mutex mu;
  bool initialized = false;
  int devices = 1, cc = 90, driver_version = 12080, shared_optin = 232448;
  bool execute = true;
  std::vector<std::unique_ptr<Context>> contexts;  // the primary contexts, one per device
  std::vector<std::unique_ptr<Module>> modules;
  std::string calls, calls_copy;
};

State& state() {
  static State* s = new State();
  return *s;
}

thread_local Context* t_current = nullptr;
thread_local std::string t_reason;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

void record(const std::string& line) {
  state().calls += line;
  state().calls += '\n';
}

// Fails a call with `code`, keeping why for cuGetErrorString.
int refuse(int code, const std::string& why) {
  t_reason = why;
  record("  refused: " + why);
  return code;
}

std::string ctx_name(const Context* c) { return c ? "ctx" + std::to_string(c->device) : "none"; }

// " stream=0x..." for a stream other than the default one, which records nothing.
std::string stream_name(const void* stream) {
  if (!stream) return "";
  char text[40];
  std::snprintf(text, sizeof(text), " stream=%p", stream);
  return text;
}

// Finds `<kernel>__emu` in the loaded host module whose dg_emu_source_sha256 is `sha`.
struct EmuSearch {
  const std::string* sha;
  void* handle = nullptr;
};

int find_module(struct dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<EmuSearch*>(data);
  if (!info->dlpi_name || !*info->dlpi_name) return 0;
  void* h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0;
  auto* tag = static_cast<const char*>(dlsym(h, "dg_emu_source_sha256"));
  if (tag && *search->sha == tag) {
    search->handle = h;
    return 1;
  }
  dlclose(h);
  return 0;
}

DgEmuEntryFn find_emulation(const std::string& sha, const std::string& kernel) {
  EmuSearch search{&sha};
  dl_iterate_phdr(find_module, &search);
  if (!search.handle) return nullptr;
  auto fn = reinterpret_cast<DgEmuEntryFn>(dlsym(search.handle, (kernel + "__emu").c_str()));
  dlclose(search.handle);  // the module's owner (EmuModule) keeps it loaded
  return fn;
}

// The context a call runs in: the current one, or a refusal.
int need_context(const char* what, Context** out) {
  if (!state().initialized) return refuse(kNotInitialized, std::string(what) + " before cuInit");
  if (!t_current) return refuse(kInvalidContext, std::string(what) + " with no current context");
  if (t_current->sticky_fault)
    return refuse(kIllegalAddress,
                  std::string(what) + " after a sticky fault in " + ctx_name(t_current));
  *out = t_current;
  return kOk;
}

// PTX for .target sm_XY is JIT-compiled for any capability >= XY; sm_XYa only for XY itself.
bool ptx_runs_on(const std::string& target, int cc) {
  if (target.rfind("sm_", 0) != 0) return false;
  int number = std::atoi(target.c_str() + 3);
  return target.back() == 'a' ? number == cc : number <= cc;
}

}  // namespace

extern "C" {

int cuInit(unsigned flags) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  record("cuInit flags=" + std::to_string(flags));
  if (flags != 0) return refuse(kInvalidValue, "cuInit flags must be 0");
  if (!s.initialized) {
    s.devices = env_int("DG_DOUBLE_DEVICES", 1);
    s.cc = env_int("DG_DOUBLE_CC", 90);
    s.driver_version = env_int("DG_DOUBLE_DRIVER_VERSION", 12080);
    s.shared_optin = env_int("DG_DOUBLE_SHARED_OPTIN", 232448);
    for (int d = 0; d < s.devices; ++d) s.contexts.push_back(std::make_unique<Context>(Context{d}));
    s.initialized = true;
  }
  return kOk;
}

int cuDriverGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = state().driver_version;
  return kOk;
}

int cuDeviceGetCount(int* count) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (!state().initialized) return refuse(kNotInitialized, "cuDeviceGetCount before cuInit");
  if (!count) return kInvalidValue;
  *count = state().devices;
  return state().devices > 0 ? kOk : kNoDevice;
}

int cuDeviceGet(int* device, int ordinal) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (!state().initialized) return refuse(kNotInitialized, "cuDeviceGet before cuInit");
  if (!device || ordinal < 0 || ordinal >= state().devices)
    return refuse(kInvalidDevice, "no device " + std::to_string(ordinal));
  *device = ordinal;
  return kOk;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) return refuse(kNotInitialized, "cuDeviceGetAttribute before cuInit");
  if (!value || device < 0 || device >= s.devices) return kInvalidDevice;
  switch (attribute) {
    case 1:
      *value = 1024;
      return kOk;  // MAX_THREADS_PER_BLOCK
    case 5:
      *value = 0x7fffffff;
      return kOk;  // MAX_GRID_DIM_X
    case 6:
    case 7:
      *value = 65535;
      return kOk;  // MAX_GRID_DIM_Y, _Z
    case 75:
      *value = s.cc / 10;
      return kOk;  // COMPUTE_CAPABILITY_MAJOR
    case 76:
      *value = s.cc % 10;
      return kOk;  // COMPUTE_CAPABILITY_MINOR
    case 97:
      *value = s.shared_optin;
      return kOk;  // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
  }
  return refuse(kInvalidValue, "attribute " + std::to_string(attribute) + " is not simulated");
}

int cuDevicePrimaryCtxRetain(void** context, int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  record("cuDevicePrimaryCtxRetain dev=" + std::to_string(device));
  if (!s.initialized) return refuse(kNotInitialized, "cuDevicePrimaryCtxRetain before cuInit");
  if (!context || device < 0 || device >= s.devices) return refuse(kInvalidDevice, "bad device");
  *context = s.contexts[device].get();
  return kOk;
}

int cuCtxGetCurrent(void** context) {
  if (!context) return kInvalidValue;
  *context = t_current;
  return kOk;
}

int cuCtxSetCurrent(void* context) {
  std::lock_guard<std::mutex> lock(state().mu);
  for (auto& c : state().contexts)
    if (c.get() == context || context == nullptr) {
      if (t_current != context)
        record("cuCtxSetCurrent " + ctx_name(static_cast<Context*>(context)));
      t_current = static_cast<Context*>(context);
      return kOk;
    }
  return refuse(kInvalidContext, "cuCtxSetCurrent with a context the double never made");
}

int cuModuleLoadDataEx(void** module, const void* image, unsigned num_options, int* options,
                       void** values) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  record("cuModuleLoadDataEx options=" + std::to_string(num_options) + " " + ctx_name(t_current));
  Context* ctx = nullptr;
  if (int r = need_context("cuModuleLoadDataEx", &ctx)) return r;
  if (!module || !image) return refuse(kInvalidValue, "null module or image");
  const char* bytes = static_cast<const char*>(image);
  if (std::memcmp(bytes,
                  "\x7f"
                  "ELF",
                  4) == 0)
    return refuse(kInvalidImage, "the driver double runs PTX only, not cubins");
  auto m = std::make_unique<Module>();
  m->context = ctx;
  std::string error;
  if (!dg::driver_double::parse_ptx(bytes, &m->ptx, &error)) return refuse(kInvalidImage, error);
  if (!ptx_runs_on(m->ptx.target, s.cc))
    return refuse(kNoBinaryForGpu,
                  "PTX .target " + m->ptx.target + " cannot run on cc " + std::to_string(s.cc));
  for (const std::string& path : m->ptx.files) {  // NVRTC prefixes the working directory
    std::string f = path.substr(path.find_last_of('/') + 1);
    if (f.rfind("dyngen_", 0) == 0 && f.size() > 10) m->source_sha = f.substr(7, f.size() - 10);
  }
  // The JIT's info log (CU_JIT_INFO_LOG_BUFFER), as the driver fills it.
  for (unsigned i = 0; options && values && i + 1 < num_options; ++i)
    if (options[i] == 3 && options[i + 1] == 4) {
      std::string log = "driver double: " + std::to_string(m->ptx.entries.size()) + " entries";
      size_t cap = reinterpret_cast<size_t>(values[i + 1]);
      if (cap) std::strncpy(static_cast<char*>(values[i]), log.c_str(), cap - 1);
    }
  *module = m.get();
  s.modules.push_back(std::move(m));
  return kOk;
}

int cuModuleGetFunction(void** function, void* module, const char* name) {
  std::lock_guard<std::mutex> lock(state().mu);
  auto* m = static_cast<Module*>(module);
  record(std::string("cuModuleGetFunction ") + (name ? name : "(null)"));
  if (!function || !m || !name) return refuse(kInvalidValue, "null argument");
  for (const PtxEntry& e : m->ptx.entries)
    if (e.name == name) {
      auto f = std::make_unique<Function>(Function{m, &e});
      if (!m->source_sha.empty()) f->emu = find_emulation(m->source_sha, e.name);
      *function = f.get();
      m->functions.push_back(std::move(f));
      return kOk;
    }
  return refuse(kNotFound, std::string("no .entry ") + name + " in the module");
}

int cuModuleUnload(void* module) {
  std::lock_guard<std::mutex> lock(state().mu);
  record("cuModuleUnload " + ctx_name(t_current));
  auto& mods = state().modules;
  for (size_t i = 0; i < mods.size(); ++i)
    if (mods[i].get() == module) {
      if (mods[i]->context != t_current)
        return refuse(kInvalidContext, "cuModuleUnload outside the module's context");
      mods.erase(mods.begin() + static_cast<long>(i));
      return kOk;
    }
  return refuse(kInvalidHandle, "cuModuleUnload of an unknown module");
}

int cuFuncSetAttribute(void* function, int attribute, int value) {
  std::lock_guard<std::mutex> lock(state().mu);
  auto* f = static_cast<Function*>(function);
  record("cuFuncSetAttribute " + std::string(f ? f->entry->name : "(null)") +
         " attr=" + std::to_string(attribute) + " value=" + std::to_string(value));
  if (!f || attribute != 8) return refuse(kInvalidValue, "only MAX_DYNAMIC_SHARED_SIZE_BYTES");
  if (value < 0 || value > state().shared_optin)
    return refuse(kInvalidValue, "dynamic shared memory " + std::to_string(value) +
                                     " above the device's " + std::to_string(state().shared_optin));
  f->max_dynamic_shared = value;
  return kOk;
}

int cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  DgEmuEntryFn emu = nullptr;
  DgEmuLaunch cfg{gx, gy, gz, bx, by, bz, shared};
  std::vector<std::unique_ptr<uint64_t[]>> storage;
  std::vector<void*> args;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto* f = static_cast<Function*>(function);
    const PtxEntry* e = f ? f->entry : nullptr;
    record("cuLaunchKernel " + std::string(e ? e->name : "(null)") + " grid=" + std::to_string(gx) +
           "," + std::to_string(gy) + "," + std::to_string(gz) + " block=" + std::to_string(bx) +
           "," + std::to_string(by) + "," + std::to_string(bz) + " smem=" + std::to_string(shared) +
           " params=" + std::to_string(e ? e->params.size() : 0) + " " + ctx_name(t_current) +
           stream_name(stream));
    Context* ctx = nullptr;
    if (int r = need_context("cuLaunchKernel", &ctx)) return r;
    if (!f) return refuse(kInvalidHandle, "null function");
    if (f->module->context != ctx)
      return refuse(kInvalidHandle, "function of " + ctx_name(f->module->context) +
                                        " launched in " + ctx_name(ctx));
    if (extra) return refuse(kInvalidValue, "extra is not supported by the double");
    if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535)
      return refuse(kInvalidValue, "grid " + std::to_string(gx) + "," + std::to_string(gy) + "," +
                                       std::to_string(gz) + " outside the device's limits");
    if (bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 ||
        uint64_t{bx} * by * bz > 1024)
      return refuse(kInvalidValue, "block outside the device's limits");
    if (static_cast<int>(shared) > f->max_dynamic_shared)
      return refuse(kInvalidValue, "dynamic shared memory " + std::to_string(shared) +
                                       " above the function's limit " +
                                       std::to_string(f->max_dynamic_shared));
    size_t offset = 0;
    for (size_t i = 0; i < e->params.size(); ++i) {
      const auto& p = e->params[i];
      if (!params || !params[i])
        return refuse(kInvalidValue, e->name + ": kernelParams[" + std::to_string(i) + "] is null");
      offset = (offset + p.align - 1) / p.align * p.align + p.size;
      storage.emplace_back(new uint64_t[(p.size + 7) / 8]);
      std::memcpy(storage.back().get(), params[i], p.size);  // aligned copy, as the driver makes
      args.push_back(storage.back().get());
    }
    if (offset > kMaxParamBytes) return refuse(kInvalidValue, e->name + ": parameters too large");
    if (ctx->fault_next_launch) {
      ctx->fault_next_launch = false;
      if (!ctx->fault_at_sync) {
        ctx->sticky_fault = true;
        return refuse(kIllegalAddress, e->name + ": injected illegal address");
      }
      ctx->fault_pending_sync = true;
      return kOk;
    }
    if (!s.execute) return kOk;
    emu = f->emu;
    if (!emu)
      return refuse(kLaunchFailed, e->name + ": no loaded host module has the source " +
                                       (f->module->source_sha.empty() ? std::string("(unnamed)")
                                                                      : f->module->source_sha) +
                                       " (compile the graph for the host first)");
  }
  char err[512] = {0};
  if (emu(&cfg, args.data(), err, sizeof(err)) != 0)
    return refuse(kLaunchFailed, std::string("emulated kernel failed: ") + err);
  return kOk;
}

int cuStreamSynchronize(void* stream) {
  std::lock_guard<std::mutex> lock(state().mu);
  record("cuStreamSynchronize " + ctx_name(t_current) + stream_name(stream));
  Context* ctx = nullptr;
  if (int r = need_context("cuStreamSynchronize", &ctx)) return r;
  if (ctx->fault_pending_sync) {
    ctx->fault_pending_sync = false;
    ctx->sticky_fault = true;
    return refuse(kIllegalAddress, "injected illegal address, seen at synchronization");
  }
  return kOk;
}

int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t bytes, void* stream) {
  std::lock_guard<std::mutex> lock(state().mu);
  (void)stream;
  record("cuMemcpyHtoDAsync bytes=" + std::to_string(bytes) + " " + ctx_name(t_current));
  Context* ctx = nullptr;
  if (int r = need_context("cuMemcpyHtoDAsync", &ctx)) return r;
  if (!dst || !src) return refuse(kInvalidValue, "null pointer");
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);  // device memory is host memory
  return kOk;
}

// cuTensorMapEncodeTiled: the argument rules the CUDA driver API documents (dg_tensor_map_check,
// Note [TMA box copies] in codegen/device/dg_tma_sm90.cuh), then the emulation's own map, which the
// kernels the double runs read. What the emulation lacks (interleave, rank other than 2, NaN fill,
// the 128-byte-atom swizzles) is refused as not supported rather than encoded wrongly.
int cuTensorMapEncodeTiled(void* tensor_map, int data_type, unsigned rank, void* address,
                           const unsigned long long* dims, const unsigned long long* strides,
                           const unsigned* box, const unsigned* element_strides, int interleave,
                           int swizzle, int l2_promotion, int oob_fill) {
  std::lock_guard<std::mutex> lock(state().mu);
  record("cuTensorMapEncodeTiled rank=" + std::to_string(rank) +
         " swizzle=" + std::to_string(swizzle));
  // CU_TENSOR_MAP_DATA_TYPE_UINT8 .. _TFLOAT32_FTZ (0..12): bytes per element.
  constexpr int kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (!tensor_map || reinterpret_cast<uintptr_t>(tensor_map) % 64 != 0)
    return refuse(kInvalidValue, "tensorMap must be 64-byte aligned");
  if (!dims || !box || !element_strides || (rank > 1 && !strides))
    return refuse(kInvalidValue, "null argument");
  if (data_type < 0 || data_type > 12) return refuse(kInvalidValue, "unknown tensorDataType");
  if (l2_promotion < 0 || l2_promotion > 3) return refuse(kInvalidValue, "unknown l2Promotion");
  if (swizzle < 0 || swizzle > 3) return refuse(kNotSupported, "swizzle mode not emulated");
  if (interleave != 0) return refuse(kNotSupported, "interleaved layouts are not emulated");
  if (oob_fill != 0) return refuse(kNotSupported, "NaN out-of-bounds fill is not emulated");
  if (rank != 2) return refuse(kNotSupported, "emulated tensor maps are 2-D");
  // CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B, _128B -> the wgmma descriptor's codes.
  constexpr int kSwizzle[] = {kDgSwizzleNone, kDgSwizzle32B, kDgSwizzle64B, kDgSwizzle128B};
  const dg_u64 d[2] = {dims[0], dims[1]};
  const dg_u32 b[2] = {box[0], box[1]};
  const char* error = dg_tensor_map_check(2, kBytes[data_type], address, d, strides, b,
                                          element_strides, kSwizzle[swizzle]);
  if (error) return refuse(kInvalidValue, error);
  dg_tensor_map_encode(static_cast<DgTensorMap*>(tensor_map), kBytes[data_type], address, d,
                       strides[0], b, kSwizzle[swizzle]);
  return kOk;
}

int cuGetErrorString(int error, const char** text) {
  if (!text) return kInvalidValue;
  *text = error == kOk ? "no error" : t_reason.c_str();
  return kOk;
}

int cuGetErrorName(int error, const char** text) {
  if (!text) return kInvalidValue;
  switch (error) {
    case kOk:
      *text = "CUDA_SUCCESS";
      break;
    case kInvalidValue:
      *text = "CUDA_ERROR_INVALID_VALUE";
      break;
    case kInvalidImage:
      *text = "CUDA_ERROR_INVALID_IMAGE";
      break;
    case kInvalidContext:
      *text = "CUDA_ERROR_INVALID_CONTEXT";
      break;
    case kNoBinaryForGpu:
      *text = "CUDA_ERROR_NO_BINARY_FOR_GPU";
      break;
    case kInvalidHandle:
      *text = "CUDA_ERROR_INVALID_HANDLE";
      break;
    case kNotFound:
      *text = "CUDA_ERROR_NOT_FOUND";
      break;
    case kIllegalAddress:
      *text = "CUDA_ERROR_ILLEGAL_ADDRESS";
      break;
    case kLaunchFailed:
      *text = "CUDA_ERROR_LAUNCH_FAILED";
      break;
    default:
      *text = "CUDA_ERROR_UNKNOWN";
  }
  return kOk;
}

const char* dgdbl_calls(void) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().calls_copy = state().calls;
  return state().calls_copy.c_str();
}

void dgdbl_clear_calls(void) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().calls.clear();
}

void dgdbl_set_execute(int on) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().execute = on != 0;
}

void dgdbl_inject_fault(int device, int at_sync) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (device < 0 || device >= static_cast<int>(state().contexts.size())) return;
  state().contexts[device]->fault_next_launch = true;
  state().contexts[device]->fault_at_sync = at_sync != 0;
}

void dgdbl_clear_faults(void) {
  std::lock_guard<std::mutex> lock(state().mu);
  for (auto& c : state().contexts) *c = Context{c->device};
}

}  // extern "C"
