#include "runtime/kernel_module.h"

#include "runtime/cuda_driver.h"
#include "runtime/emu/emu_module.h"

namespace dg {

namespace {

class HostModule : public KernelModule {
 public:
  explicit HostModule(emu::EmuModule m) : module_(std::move(m)) {}
  Status resolve(const std::vector<std::string>& names) override {
    entries_.clear();
    for (const std::string& n : names) {
      DgEmuEntryFn fn = module_.find(n);
      if (!fn) return Status::error("host module has no kernel " + n);
      entries_.push_back(fn);
    }
    return {};
  }
  Status launch(size_t kernel, const std::array<uint32_t, 3>& grid, const std::array<int, 3>& block,
                int shared_bytes, void** args, void*) const override {
    DgEmuLaunch cfg{grid[0],
                    grid[1],
                    grid[2],
                    static_cast<unsigned>(block[0]),
                    static_cast<unsigned>(block[1]),
                    static_cast<unsigned>(block[2]),
                    static_cast<unsigned>(shared_bytes)};
    char err[512] = {0};
    if (entries_.at(kernel)(&cfg, args, err, sizeof(err)) != 0)
      return Status::error(std::string("kernel failed under host emulation: ") + err);
    return {};
  }
  bool on_gpu() const override { return false; }

 private:
  emu::EmuModule module_;
  std::vector<DgEmuEntryFn> entries_;
};

class GpuModule : public KernelModule {
 public:
  explicit GpuModule(CudaModule m) : module_(std::move(m)) {}
  Status resolve(const std::vector<std::string>& names) override {
    functions_.clear();
    for (const std::string& n : names) {
      auto f = module_.function(n);
      if (!f.ok()) return f.status();
      functions_.push_back(f.value());
    }
    return {};
  }
  Status launch(size_t kernel, const std::array<uint32_t, 3>& grid, const std::array<int, 3>& block,
                int shared_bytes, void** args, void* stream) const override {
    LaunchDims g{grid[0], grid[1], grid[2]};
    LaunchDims b{static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
                 static_cast<unsigned>(block[2])};
    return module_.launch(functions_.at(kernel), g, b, static_cast<unsigned>(shared_bytes), stream,
                          args);
  }
  bool on_gpu() const override { return true; }

 private:
  CudaModule module_;
  std::vector<cu::Function> functions_;
};

}  // namespace

Result<std::unique_ptr<KernelModule>> load_host_module(const std::string& so_bytes) {
  auto m = emu::EmuModule::load(so_bytes);
  if (!m.ok()) return m.status();
  return std::unique_ptr<KernelModule>(new HostModule(std::move(m).value()));
}

Result<std::unique_ptr<KernelModule>> load_cuda_module(const std::string& image) {
  auto m = CudaModule::load(image);
  if (!m.ok()) return m.status();
  return std::unique_ptr<KernelModule>(new GpuModule(std::move(m).value()));
}

}  // namespace dg
