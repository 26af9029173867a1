// The launch entry of generated kernels under host emulation: DG_EMU_ENTRY(k) exports
// `int k__emu(const DgEmuLaunch*, void** args, char* err, int err_len)`, which unpacks the
// cuLaunchKernel-style argument array and runs the grid.
#pragma once
#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>

#include "dg_emu_abi.h"
#include "dg_emu_sched.h"

namespace dg::emu {

template <typename... P, size_t... I>
void call_kernel(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
  // Each emulated thread gets its own copy of the parameters, as on a GPU.
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
}

// Runs `kernel` over the grid in `cfg`; args[i] points at the i-th parameter. "" or an error.
template <typename... P>
std::string launch_kernel(const DgEmuLaunch& cfg, void** args, void (*kernel)(P...)) {
  struct Closure {
    void (*kernel)(P...);
    void** args;
  } closure{kernel, args};
  auto body = [](void* p) {
    Closure* c = static_cast<Closure*>(p);
    call_kernel(c->kernel, c->args, std::index_sequence_for<P...>{});
  };
  return run_grid(cfg, body, &closure);
}

// The C side of an entry: runs the launch, converts any error or exception into err.
template <typename... P>
int launch_entry(const char* name, const DgEmuLaunch* cfg, void** args, void (*kernel)(P...),
                 char* err, int err_len) {
  std::string message;
  try {
    message = cfg == nullptr ? std::string("null launch configuration")
                             : launch_kernel(*cfg, args, kernel);
  } catch (const std::exception& e) {
    message = std::string("emulation failure: ") + e.what();
  }
  if (message.empty()) return 0;
  if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s: %s", name, message.c_str());
  return 1;
}

}  // namespace dg::emu

// Emitted by the code generator after each kernel; expands to nothing outside host emulation
// (see dg_config.cuh).
#define DG_EMU_ENTRY(name)                                                 \
  extern "C" __attribute__((visibility("default"))) int name##__emu(       \
      const DgEmuLaunch* cfg, void** args, char* err, int err_len) {       \
    return ::dg::emu::launch_entry(#name, cfg, args, &name, err, err_len); \
  }
