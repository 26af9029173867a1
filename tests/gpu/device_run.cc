#include "tests/gpu/device_run.h"

#include <dlfcn.h>

#include <cstdlib>

#include "runtime/cuda_driver.h"

namespace dg {

namespace {

using DevPtr = unsigned long long;

// The few memory entry points the test needs (cuda.h's _v2 names: Note [Driver symbol names]).
struct MemoryApi {
  int (*alloc)(DevPtr*, size_t) = nullptr;
  int (*free)(DevPtr) = nullptr;
  int (*to_device)(DevPtr, const void*, size_t) = nullptr;
  int (*to_host)(void*, DevPtr, size_t) = nullptr;
  int (*sync)() = nullptr;
  bool ok() const { return alloc && free && to_device && to_host && sync; }
};

const MemoryApi& memory_api() {
  static const MemoryApi api = [] {
    MemoryApi a;
    const char* path = std::getenv("DYNGEN_CUDA_DRIVER");
    void* h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return a;
    a.alloc = reinterpret_cast<int (*)(DevPtr*, size_t)>(dlsym(h, "cuMemAlloc_v2"));
    a.free = reinterpret_cast<int (*)(DevPtr)>(dlsym(h, "cuMemFree_v2"));
    a.to_device =
        reinterpret_cast<int (*)(DevPtr, const void*, size_t)>(dlsym(h, "cuMemcpyHtoD_v2"));
    a.to_host = reinterpret_cast<int (*)(void*, DevPtr, size_t)>(dlsym(h, "cuMemcpyDtoH_v2"));
    a.sync = reinterpret_cast<int (*)()>(dlsym(h, "cuCtxSynchronize"));
    return a;
  }();
  return api;
}

// Device memory freed on scope exit.
struct DeviceBuffers {
  std::vector<DevPtr> ptrs;
  ~DeviceBuffers() {
    for (DevPtr p : ptrs) memory_api().free(p);
  }
  Result<DevPtr> alloc(size_t bytes) {
    DevPtr p = 0;
    if (int r = memory_api().alloc(&p, bytes ? bytes : 1))
      return Status::error("cuMemAlloc failed: " + std::to_string(r));
    ptrs.push_back(p);
    return p;
  }
};

}  // namespace

DeviceArena::~DeviceArena() {
  for (unsigned long long p : ptrs_) memory_api().free(p);
}

Result<unsigned long long> DeviceArena::alloc(size_t bytes) {
  Result<cu::Context> ctx = CudaDriver::instance().ensure_context(0);
  if (!ctx.ok()) return ctx.status();
  DevPtr p = 0;
  if (int r = memory_api().alloc(&p, bytes ? bytes : 1))
    return Status::error("cuMemAlloc failed: " + std::to_string(r));
  ptrs_.push_back(p);
  return p;
}

Result<unsigned long long> DeviceArena::upload(const void* data, size_t bytes) {
  Result<unsigned long long> p = alloc(bytes);
  if (!p.ok()) return p;
  if (int r = memory_api().to_device(p.value(), data, bytes))
    return Status::error("cuMemcpyHtoD failed: " + std::to_string(r));
  return p;
}

Status DeviceArena::download(void* dst, unsigned long long src, size_t bytes) const {
  if (int r = memory_api().sync()) return Status::error("cuCtxSynchronize: " + std::to_string(r));
  if (int r = memory_api().to_host(dst, src, bytes))
    return Status::error("cuMemcpyDtoH failed: " + std::to_string(r));
  return {};
}

bool gpu_usable(std::string* reason) {
  const CudaDriver& d = CudaDriver::instance();
  if (!d.available()) {
    *reason = d.unavailable_reason();
    return false;
  }
  if (!memory_api().ok()) {
    *reason = "the driver lacks the memory entry points";
    return false;
  }
  return true;
}

Result<std::vector<HostTensor>> run_on_device(const Executable& exe,
                                              const std::vector<HostTensor>& inputs) {
  const CudaDriver& driver = CudaDriver::instance();
  Result<cu::Context> ctx = driver.ensure_context(0);
  if (!ctx.ok()) return ctx.status();
  const MemoryApi& mem = memory_api();
  const Graph& g = exe.graph();
  DeviceBuffers buffers;
  std::vector<dg_tensor> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const HostTensor& t = inputs[i];
    dg_tensor& a = in[i];
    if (g.value(g.inputs[i]).kind == ValueKind::kSymInt) {
      a.rank = -1;
      a.shape[0] = t.get_int(0);
      continue;
    }
    auto p = buffers.alloc(t.bytes.size());
    if (!p.ok()) return p.status();
    if (int r = mem.to_device(p.value(), t.bytes.data(), t.bytes.size()))
      return Status::error("cuMemcpyHtoD failed: " + std::to_string(r));
    a.data = reinterpret_cast<void*>(p.value());
    a.rank = t.rank();
    a.dtype = static_cast<int32_t>(t.dtype);
    a.device_type = DG_DEVICE_CUDA;
    for (int d = 0; d < t.rank(); ++d) a.shape[d] = t.shape[d];
  }
  std::vector<dg_tensor> out(g.outputs.size());
  size_t ws_bytes = 0;
  Status s = exe.prepare(in.data(), static_cast<int>(in.size()), out.data(),
                         static_cast<int>(out.size()), &ws_bytes);
  if (!s.ok()) return s;
  std::vector<HostTensor> results;
  for (dg_tensor& o : out) {
    results.push_back(
        make_tensor(static_cast<DType>(o.dtype), std::vector<int64_t>(o.shape, o.shape + o.rank)));
    auto p = buffers.alloc(results.back().bytes.size());
    if (!p.ok()) return p.status();
    o.data = reinterpret_cast<void*>(p.value());
  }
  auto ws = buffers.alloc(ws_bytes);
  if (!ws.ok()) return ws.status();
  s = exe.launch(in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()),
                 reinterpret_cast<void*>(ws.value()), nullptr);
  if (!s.ok()) return s;
  if (int r = mem.sync()) return Status::error("cuCtxSynchronize failed: " + std::to_string(r));
  for (size_t j = 0; j < results.size(); ++j)
    if (int r = mem.to_host(results[j].bytes.data(), reinterpret_cast<DevPtr>(out[j].data),
                            results[j].bytes.size()))
      return Status::error("cuMemcpyDtoH failed: " + std::to_string(r));
  return results;
}

}  // namespace dg
