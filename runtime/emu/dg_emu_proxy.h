// The async proxy under host emulation: the view of dynamic shared memory that wgmma operand reads
// and TMA copies see, apart from the one ordinary loads and stores see.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "dg_emu_engine.h"

namespace dg::emu {

// Note [Async proxy]
// (PTX ISA, "Proxies" in the memory consistency model, and fence.proxy.async.) Shared memory is
// reached through two proxies: the generic one (ordinary loads and stores, cp.async) and the async
// one (wgmma operand reads, cp.async.bulk and TMA copies). A write through one proxy is ordered
// before an access through the other only by a fence.proxy.async between them, so wgmma operands
// written by ordinary stores need the fence after the stores and before the wgmma; without it the
// async proxy may see the old bytes. The emulation keeps a second copy of the block's dynamic
// shared memory, the async view:
// - it starts as the block finds shared memory (poisoned, Note [Poisoned shared memory]), made on
//   first use, so a kernel that never uses the async proxy pays nothing;
// - fence.proxy.async copies the generic bytes into it: every ordinary write before the fence
//   becomes visible to the async proxy. (A fence of any thread publishes all threads' writes, so a
//   fence missing from only some of the writing threads goes unseen; one missing from all shows.)
// - a TMA copy writes both copies (it is the async proxy's own write);
// - a wgmma operand read compares the two: a byte that differs was written by ordinary stores and
//   never fenced, and the launch fails naming it.
// Static shared memory holds no async operands (the wgmma and TMA twins refuse it), so only the
// dynamic bytes have a view.

inline unsigned char* async_view(Block& b) {
  if (!b.async_view_live) {
    b.async_view.assign(b.dyn_smem_bytes, 0xff);
    b.async_view_live = true;
  }
  return b.async_view.data();
}

// fence.proxy.async.shared::cta by the current thread.
inline void fence_proxy_async() {
  Block& b = *t_emu.block;
  std::memcpy(async_view(b), b.dyn_smem, b.dyn_smem_bytes);
}

// The async proxy writes `n` bytes at dynamic offset `offset`: `src`, or zeros if null.
inline void async_proxy_write(Block& b, size_t offset, const void* src, size_t n) {
  unsigned char* view = async_view(b);
  if (src != nullptr) {
    std::memcpy(b.dyn_smem + offset, src, n);
    std::memcpy(view + offset, src, n);
  } else {
    std::memset(b.dyn_smem + offset, 0, n);
    std::memset(view + offset, 0, n);
  }
}

// The async proxy reads `n` bytes at dynamic offset `offset` for `what` (e.g. "a wgmma operand").
inline void async_proxy_read(Block& b, size_t offset, void* dst, size_t n, const char* what) {
  const unsigned char* view = async_view(b);
  if (std::memcmp(view + offset, b.dyn_smem + offset, n) != 0) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  ": %s reads dynamic shared memory at offset %zu (shared address %zu), which "
                  "ordinary stores wrote with no fence.proxy.async between them and the read: the "
                  "async proxy may not see those writes (Note [Async proxy])",
                  what, offset, offset + b.dyn_window);
    fail(where() + buf);
  }
  std::memcpy(dst, b.dyn_smem + offset, n);
}

}  // namespace dg::emu
