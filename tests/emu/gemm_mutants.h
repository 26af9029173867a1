// Known-bad variants of the tensor-core GEMM main loop, made from the real template
// (codegen/device/dg_gemm_sm80.cuh and the dg_gemm_*_sm80.cuh it includes, as embedded in the
// library) by one anchored textual edit each.
#pragma once
#include <string>
#include <vector>

namespace dg::emu::testing {

// One edit: `anchor` must occur exactly once in the template; it becomes `replacement`.
struct MutantEdit {
  std::string anchor;
  std::string replacement;
};

struct GemmMutant {
  std::string name;
  std::string bug;  // what a GPU would do wrong
  std::vector<MutantEdit> edits;
  bool unaligned = false;  // run with operands off 16-byte alignment (dg_gemm_unaligned_loop)
};

// Note [GEMM mutants]
// Each anchor is a line of dg_gemm_pipeline, dg_gemm_unaligned_loop (dg_gemm_sm80.cuh) or
// DgGemmTileCopy::copy (dg_gemm_copy_sm80.cuh), quoted
// whole, so a rewrite of the template that drops or changes it fails the mutation test loudly
// (the anchor is missing) instead of leaving a mutant silently identical to the template. When
// the main loop changes, update the anchors together with it and keep every mutant caught.
inline const std::vector<GemmMutant>& gemm_mutants() {
  static const std::vector<GemmMutant> mutants = {
      {"prefetch_before_barrier",
       "the next stage's cp.async is issued before the __syncthreads that ends the reads of the "
       "stage it overwrites (a write-after-read race on the ring)",
       {{"    __syncthreads();  // ...and for every thread; stage `write` (read at kt - 1) is free "
         "again\n",
         ""},
        {"    dg_cp_async_commit();\n    dg_gemm_stage_mma<",
         "    dg_cp_async_commit();\n    __syncthreads();\n    dg_gemm_stage_mma<"}}},
      {"wait_group_off_by_one",
       "cp.async.wait_group keeps one group too many in flight: tile kt may not have landed",
       {{"    dg_cp_async_wait<Tile::kStages - 2>();  // tile kt has landed for this thread...\n",
         "    dg_cp_async_wait<Tile::kStages - 1>();\n"}}},
      {"no_barrier_after_wait",
       "no __syncthreads after the wait: a thread reads tiles other threads' copies fill",
       {{"    __syncthreads();  // ...and for every thread; stage `write` (read at kt - 1) is free "
         "again\n",
         ""}}},
      {"no_k_tail_zero_fill",
       "chunks past the K extent are skipped instead of zero-filled, so the K residue multiplies "
       "whatever the stage held",
       {{"          dg_cp_async_16_zfill(dst, g, inside);\n",
         "          if (inside) dg_cp_async_16_zfill(dst, g, inside);\n"}}},
      {"commit_only_when_loading",
       "no empty commit groups at the end of K, so wait_group<kStages - 2> leaves the last "
       "tiles in flight",
       {{"      copies.advance(Tile::BK);\n    }\n    dg_cp_async_commit();\n    "
         "dg_gemm_stage_mma<",
         "      copies.advance(Tile::BK);\n      dg_cp_async_commit();\n    }\n"
         "    dg_gemm_stage_mma<"}}},
      {"prefetch_into_current_stage",
       "the prefetch goes to the stage about to be read",
       {{"      copies.template copy<true, EDGE>(dg_gemm_bytes_after(smem, write), 0, "
         "0);\n",
         "      copies.template copy<true, EDGE>(dg_gemm_bytes_after(smem, read), 0, "
         "0);\n"}}},
      {"unaligned_no_barrier_after_copy",
       "the one-stage unaligned loop reads the stage before every thread has filled it",
       {{"    __syncthreads();  // the stage is filled\n", ""}},
       true},
      {"unaligned_no_barrier_after_mma",
       "the one-stage unaligned loop refills the stage while other warps still read it",
       {{"    __syncthreads();  // and read, before the next tile overwrites it\n", ""}},
       true},
  };
  return mutants;
}

}  // namespace dg::emu::testing
