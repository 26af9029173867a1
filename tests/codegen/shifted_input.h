// Test helper: running an executable with one input, or its output, at an address 2 bytes past a
// 16-byte boundary, as a torch view with a storage offset gives it (Note [Unaligned operands],
// Note [Tensor maps], Note [Paired stores]).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/executable.h"
#include "runtime/host_run.h"

namespace dg {

// Runs `exe` with input `shifted` (none: -1) copied to an address 2 bytes past a 16-byte
// boundary, and its output written there too when `shift_output`; returns the output's bytes.
inline std::vector<uint8_t> run_shifted(const Executable& exe,
                                        const std::vector<HostTensor>& inputs, int shifted,
                                        bool shift_output) {
  using Storage = std::unique_ptr<uint8_t, decltype(&std::free)>;
  auto off_boundary = [](size_t bytes) {
    return Storage(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 2 + 63) / 64 * 64)),
                   &std::free);
  };
  std::vector<dg_tensor> in(inputs.size());
  Storage moved(nullptr, &std::free);
  if (shifted >= 0) {
    moved = off_boundary(inputs[shifted].bytes.size());
    std::memcpy(moved.get() + 2, inputs[shifted].bytes.data(), inputs[shifted].bytes.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    in[i].data = i == static_cast<size_t>(shifted) ? moved.get() + 2
                                                   : const_cast<uint8_t*>(inputs[i].bytes.data());
    in[i].rank = inputs[i].rank();
    in[i].dtype = static_cast<int32_t>(inputs[i].dtype);
    for (int d = 0; d < inputs[i].rank(); ++d) in[i].shape[d] = inputs[i].shape[d];
  }
  dg_tensor out{};
  size_t workspace_bytes = 0;
  EXPECT_TRUE(exe.prepare(in.data(), static_cast<int>(in.size()), &out, 1, &workspace_bytes).ok());
  HostTensor y = make_tensor(static_cast<DType>(out.dtype),
                             std::vector<int64_t>(out.shape, out.shape + out.rank));
  Storage out_storage = off_boundary(y.bytes.size());
  out.data = shift_output ? out_storage.get() + 2 : y.bytes.data();
  std::unique_ptr<void, decltype(&std::free)> workspace(
      workspace_bytes ? std::aligned_alloc(256, (workspace_bytes + 255) / 256 * 256) : nullptr,
      &std::free);
  Status s = exe.launch(in.data(), static_cast<int>(in.size()), &out, 1, workspace.get(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  if (shift_output) std::memcpy(y.bytes.data(), out_storage.get() + 2, y.bytes.size());
  return y.bytes;
}

inline std::vector<uint8_t> run_with_shifted_input(const Executable& exe,
                                                   const std::vector<HostTensor>& inputs,
                                                   int shifted) {
  return run_shifted(exe, inputs, shifted, false);
}

}  // namespace dg
