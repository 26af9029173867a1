// Host twin of cp.async.bulk.tensor (dg_tma_sm90.cuh): a box copy queued and landed into dynamic
// shared memory in the map's swizzle (Note [TMA box copies]). dg_tma_sm90.cuh includes this file
// under DG_HOST_EMULATION only, after the tensor map's definition; it uses the wgmma and mbarrier
// twins, and the engine's types from the force-included prelude, runtime/emu/dg_emu.h.
#pragma once
#if !defined(DG_HOST_EMULATION)
#error "dg_tma_sm90_emu.h is host emulation only: include dg_tma_sm90.cuh"
#endif

namespace dg::emu {

// One box copy as issued (Note [TMA box copies]).
struct TmaBox {
  unsigned char* dst;
  DgTensorMap map;
  int x, y;
  dg_u64* bar;
};

inline void tma_land(const TmaBox& c) {
  const dg_u64* w = c.map.words;
  const auto* src = reinterpret_cast<const unsigned char*>(w[1]);
  const int elem = static_cast<int>(w[2] & 0xff), swizzle = static_cast<int>((w[2] >> 8) & 3);
  const long long dim0 = static_cast<long long>(w[3]), dim1 = static_cast<long long>(w[4]);
  const long long box0 = static_cast<long long>(w[6] & 0xffffffffu),
                  box1 = static_cast<long long>(w[6] >> 32);
  const dg_u32 base = wgmma_smem_address(c.dst);
  Block& b = *t_emu.block;
  for (long long j = 0; j < box1; ++j)
    for (long long i = 0; i < box0; ++i) {
      const dg_u32 at =
          dg_swizzle_address(base + static_cast<dg_u32>((j * box0 + i) * elem), swizzle);
      const size_t offset = dynamic_smem_offset(b, at, static_cast<dg_u32>(elem), "a TMA box");
      const long long gx = c.x + i, gy = c.y + j;
      // The async proxy's own write (Note [Async proxy]).
      const bool inside = gx >= 0 && gx < dim0 && gy >= 0 && gy < dim1;
      async_proxy_write(b, offset,
                        inside ? src + gy * static_cast<long long>(w[5]) + gx * elem : nullptr,
                        static_cast<size_t>(elem));
    }
  mbarrier_apply(c.bar, 0, -box0 * box1 * elem);
}

// Lands every box copy whose barrier is `bar`, oldest first (Block::land_bulk).
inline void tma_land_for(const void* bar) {
  std::vector<std::shared_ptr<void>>& pending = t_emu.block->bulk_pending;
  std::vector<std::shared_ptr<void>> due;
  for (size_t i = 0; i < pending.size();) {
    if (static_cast<const TmaBox*>(pending[i].get())->bar == bar) {
      due.push_back(std::move(pending[i]));
      pending.erase(pending.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  for (const std::shared_ptr<void>& c : due) tma_land(*static_cast<const TmaBox*>(c.get()));
}

inline void tma_issue(void* dst, const DgTensorMap* map, int x, int y, dg_u64* bar) {
  if (map->words[0] != kDgTensorMapMagic)
    fail(where() + ": the tensor map was not encoded for the emulation (dg_tensor_map_encode)");
  const int swizzle = static_cast<int>((map->words[2] >> 8) & 3);
  const dg_u32 align = swizzle == kDgSwizzle128B ? 1024u : 128u;
  if (wgmma_smem_address(dst) % align != 0)
    fail(where() + ": a TMA destination must be 128-byte aligned (1024 with a 128-byte swizzle)");
  mbarrier_load(bar);  // a valid, initialized barrier
  auto box = std::make_shared<TmaBox>(TmaBox{static_cast<unsigned char*>(dst), *map, x, y, bar});
  Block& b = *t_emu.block;
  const AsyncMode mode = b.opts->async;
  if (mode == AsyncMode::kIssue || (mode == AsyncMode::kRandom && (next_random(b) & 1))) {
    tma_land(*box);
  } else {
    b.bulk_pending.push_back(std::move(box));
    b.land_bulk = &tma_land_for;
  }
  maybe_yield();
}

}  // namespace dg::emu
