// Host twin of wgmma (dg_wgmma_sm90.cuh): operands read through the descriptors and the layout
// functions that dg_wgmma_sm90.cuh defines before including this file (Note [wgmma layouts]), the
// warp's m64nNk16 share computed when its group retires (Note [Deferred wgmma]). Included under
// DG_HOST_EMULATION only; the engine's types come from the force-included prelude,
// runtime/emu/dg_emu.h.
//
// Note [Deferred wgmma]
// On a GPU the accumulator registers are undefined from the wgmma's issue
// until a wgmma.wait_group retires its group, and the operands may be read from shared memory at
// any time in between. The emulation makes both visible. At issue it records the operation,
// saves the accumulators' values and fills the registers with NaN, so code that reads them early
// gets NaN; wgmmas issued back to back on the same registers chain (the hardware orders
// accumulator accesses between wgmmas of one shape). The operands are read at retirement
// (DYNGEN_EMU_ASYNC=wait, the default: a stage overwritten before its wgmma retires shows),
// at issue (=issue: operands written after the issue show), or either at random (=random).
// wgmma.commit_group closes a group, wgmma.wait_group N retires all but the newest N groups, in
// order. A thread that exits with a wgmma in flight, a wgmma with no wgmma.fence before the
// warp's first one, operands outside dynamic shared memory, a nonzero base offset and a
// block that is not whole warpgroups are errors. Each warp computes its own 16 rows, so the four
// warps of a warpgroup are not checked against each other.
#pragma once
#if !defined(DG_HOST_EMULATION)
#error "dg_wgmma_sm90_emu.h is host emulation only: include dg_wgmma_sm90.cuh"
#endif

namespace dg::emu {

// The emulated shared-window address of a dynamic shared-memory byte (Note [Emulated shared
// window] in runtime/emu/dg_emu_smem.h: dynamic shared memory starts at window address 0 unless
// DYNGEN_EMU_SMEM_OFFSET places it elsewhere).
inline dg_u32 wgmma_smem_address(const void* p) {
  const Block& b = *t_emu.block;
  const auto* q = static_cast<const unsigned char*>(p);
  if (q < b.dyn_smem || q >= b.dyn_smem + b.dyn_smem_bytes)
    fail(where() + ": a wgmma operand must be in dynamic shared memory");
  return b.dyn_window + static_cast<dg_u32>(q - b.dyn_smem);
}

// The offset in dynamic shared memory of `bytes` bytes at window address `at`, for `what`.
inline size_t dynamic_smem_offset(const Block& b, dg_u32 at, dg_u32 bytes, const char* what) {
  if (at < b.dyn_window || at - b.dyn_window + bytes > b.dyn_smem_bytes)
    fail(where() + ": " + what + " addresses bytes outside dynamic shared memory");
  return at - b.dyn_window;
}

// Element (r, k) of an operand, r along M or N; `mn_major`: the instruction's imm-trans is 1.
// Read through the async proxy (Note [Async proxy] in runtime/emu/dg_emu_proxy.h).
inline float wgmma_operand(Block& b, dg_u64 desc, int r, int k, bool mn_major) {
  const dg_u32 at = mn_major
                        ? dg_wgmma_mn_element_address(desc, r, k)
                        : dg_wgmma_chunk_address(desc, r, k / 8) + 2u * static_cast<dg_u32>(k % 8);
  const size_t offset = dynamic_smem_offset(b, at, 2, "a wgmma descriptor");
  dg_u16 bits;
  async_proxy_read(b, offset, &bits, 2, "a wgmma operand");
  return dg_bf16_to_float(dg_bf16_from_bits(bits));
}

inline void wgmma_read_operands(Block& b, AsyncMma& op) {
  op.a.resize(16 * 16);
  op.b.resize(static_cast<size_t>(op.n) * 16);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k)
      op.a[r * 16 + k] = wgmma_operand(b, op.desc_a, 16 * op.warp_in_group + r, k, op.a_mn_major);
  for (int r = 0; r < op.n; ++r)
    for (int k = 0; k < 16; ++k)
      op.b[r * 16 + k] = wgmma_operand(b, op.desc_b, r, k, op.b_mn_major);
}

// d = a b (+ the accumulators' values), each element summed in k order in f32.
inline void wgmma_retire(Block& b, AsyncMma& op) {
  if (op.a.empty()) wgmma_read_operands(b, op);
  for (int lane = 0; lane < 32; ++lane) {
    const int T = 32 * op.warp_in_group + lane;
    for (int i = 0; i < op.n / 2; ++i) {
      const int row = dg_wgmma_acc_row(T, i) - 16 * op.warp_in_group, col = dg_wgmma_acc_col(T, i);
      float acc = !op.accumulate ? 0.0f
                  : op.c.empty() ? op.d[lane][i]
                                 : op.c[lane * (op.n / 2) + i];
      for (int k = 0; k < 16; ++k) acc += op.a[row * 16 + k] * op.b[col * 16 + k];
      op.d[lane][i] = acc;
    }
  }
}

inline Warp& my_warp() { return t_emu.block->warps[t_emu.thread->linear >> 5]; }

inline void wgmma_fence_op(LaneSlot*, uint32_t) { my_warp().mma_fenced = true; }

inline void wgmma_commit_op(LaneSlot*, uint32_t) {
  Warp& w = my_warp();
  w.mma_group_ends.push_back(w.mma_pending.size());
}

inline void wgmma_wait_op(LaneSlot* lanes, uint32_t) {
  Warp& w = my_warp();
  const size_t keep = static_cast<size_t>(lanes[0].in[0]);
  if (w.mma_group_ends.size() <= keep) return;
  const size_t retired = w.mma_group_ends[w.mma_group_ends.size() - keep - 1];
  for (size_t i = 0; i < retired; ++i) wgmma_retire(*t_emu.block, w.mma_pending[i]);
  w.mma_pending.erase(w.mma_pending.begin(), w.mma_pending.begin() + static_cast<long>(retired));
  w.mma_group_ends.erase(w.mma_group_ends.begin(),
                         w.mma_group_ends.end() - static_cast<long>(keep));
  for (size_t& end : w.mma_group_ends) end -= retired;
}

// in[0], in[1]: descriptors of A and B; in[2]: scale-d; in[3]: N; in[4]: imm-trans-a (bit 0)
// and imm-trans-b (bit 1); ptr: the lane's accumulators.
inline void wgmma_issue_op(LaneSlot* lanes, uint32_t) {
  Block& b = *t_emu.block;
  Warp& w = my_warp();
  for (int lane = 1; lane < 32; ++lane)
    for (int i = 0; i < 5; ++i)
      if (lanes[lane].in[i] != lanes[0].in[i])
        fail(where() + ": lanes of a warp issue one wgmma.mma_async with different operands");
  if (!w.mma_fenced)
    fail(where() + ": wgmma.mma_async without a wgmma.fence before the warp's first one");
  AsyncMma op;
  op.desc_a = lanes[0].in[0];
  op.desc_b = lanes[0].in[1];
  op.accumulate = lanes[0].in[2] != 0;
  op.n = static_cast<int>(lanes[0].in[3]);
  op.a_mn_major = (lanes[0].in[4] & 1u) != 0;
  op.b_mn_major = (lanes[0].in[4] & 2u) != 0;
  op.warp_in_group = static_cast<int>((t_emu.thread->linear >> 5) % 4);
  for (dg_u64 desc : {op.desc_a, op.desc_b})
    if (dg_wgmma_desc_fields(desc).base_offset != 0)
      fail(where() + ": wgmma descriptor with a nonzero base offset (not emulated)");
  for (int lane = 0; lane < 32; ++lane)
    op.d[lane] = static_cast<float*>(const_cast<void*>(lanes[lane].ptr));
  bool chained = false;
  for (const AsyncMma& p : w.mma_pending) chained = chained || p.d[0] == op.d[0];
  if (!chained) {
    op.c.resize(static_cast<size_t>(32 * (op.n / 2)));
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < op.n / 2; ++i) {
        op.c[lane * (op.n / 2) + i] = op.d[lane][i];
        op.d[lane][i] = dg_bits_as_float(0x7fc00000u);  // undefined until retired
      }
  }
  const AsyncMode mode = b.opts->async;
  if (mode == AsyncMode::kIssue || (mode == AsyncMode::kRandom && (next_random(b) & 1)))
    wgmma_read_operands(b, op);
  w.mma_pending.push_back(std::move(op));
}

inline void require_warpgroups(const char* what) {
  require_full_warp(what);
  if (t_emu.block->n_threads % 128 != 0)
    fail(where() + ": " + what + " needs a block of whole warpgroups (a multiple of 128 threads)");
}

// setmaxnreg's warp collective (Note [Warpgroup register counts] in dg_wgmma_sm90.cuh): in[0] is
// count << 1 | inc, the same in every lane; records it as the warp's latest.
inline void setmaxnreg_op(LaneSlot* lanes, uint32_t) {
  Warp& w = my_warp();
  const uint32_t code = static_cast<uint32_t>(lanes[0].in[0]);
  for (int lane = 1; lane < 32; ++lane)
    if (lanes[lane].in[0] != code)
      fail(where() + ": lanes of a warp execute different setmaxnreg instructions");
  if (w.maxnreg_done > 0) {
    const uint32_t before = w.maxnreg_last[(w.maxnreg_done - 1) & 1] >> 1, now = code >> 1;
    if ((code & 1) ? now < before : now > before)
      fail(where() + ((code & 1) ? ": setmaxnreg.inc below" : ": setmaxnreg.dec above") +
           " the warp's current register limit");
  }
  w.maxnreg_last[w.maxnreg_done & 1] = code;
  ++w.maxnreg_done;
}

// setmaxnreg.inc (inc) or .dec to `regs`: the checks and the warpgroup rendezvous of Note
// [Warpgroup register counts]; no register limit is modelled.
inline void setmaxnreg(bool inc, int regs) {
  require_warpgroups("setmaxnreg");
  if (regs < 24 || regs > 256 || regs % 8 != 0)
    fail(where() + ": setmaxnreg's register count must be a multiple of 8 in [24, 256]");
  my_lane_slot().in[0] = (static_cast<uint64_t>(regs) << 1) | (inc ? 1u : 0u);
  warp_collective(0xffffffffu, &setmaxnreg_op);
  Block& b = *t_emu.block;
  const unsigned first = (t_emu.thread->linear >> 5) & ~3u;  // the warpgroup's first warp
  Warp& self = my_warp();
  // No lane of this warp executes another warp collective without this one: `rank` is ours.
  const uint32_t rank = self.maxnreg_done, slot = (rank - 1) & 1, code = self.maxnreg_last[slot];
  bool all = true;
  for (unsigned i = 0; i < 4; ++i) {
    const Warp& u = b.warps[first + i];
    if (u.maxnreg_done < rank) {
      all = false;
      if ((u.exited & u.existing) == u.existing)
        fail(where() + ": a warp of the warpgroup exited without executing this setmaxnreg");
    } else if (u.maxnreg_last[slot] != code) {
      fail(where() + ": the warps of a warpgroup execute different setmaxnreg instructions");
    }
  }
  if (!all) {  // parked until the warpgroup's last warp gets here
    self.maxnreg_parked |= 1u << (t_emu.thread->linear & 31);
    park(ThreadState::kWarpCollective);
    return;
  }
  // The last warp: ready the lanes parked at this rank (a warp ahead waits at the next one).
  for (unsigned i = 0; i < 4; ++i) {
    Warp& u = b.warps[first + i];
    if (u.maxnreg_done != rank) continue;
    for (uint32_t m = u.maxnreg_parked; m; m &= m - 1)
      push_ready(b, b.threads[(first + i) * 32 + __builtin_ctz(m)]);
    u.maxnreg_parked = 0;
  }
  if (b.opts->sched == SchedMode::kRandom) yield_now();
}

}  // namespace dg::emu
