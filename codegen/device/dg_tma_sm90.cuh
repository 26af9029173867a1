// TMA (sm_90): a 2-D box of a global tensor copied into shared memory by one thread with
// cp.async.bulk.tensor, elements outside the tensor filled with zeros, the box written in the
// tensor map's swizzle, and its bytes completed on an mbarrier (dg_mbarrier_sm90.cuh). Inline PTX
// on a GPU, where the driver encodes the tensor map (cuTensorMapEncodeTiled); under host emulation
// the map is this file's own 128-byte format (dg_tensor_map_encode) and the copy a twin of the
// instruction, dg_tma_sm90_emu.h (Note [TMA box copies]).
//
// Note [TMA box copies]
// (PTX ISA 9.7.9.25, cp.async.bulk.tensor, and "Tensor Access Modes" /
// "Bounding Box"; the CUDA driver API's cuTensorMapEncodeTiled for the map's rules):
// - The box at coordinates (x, y) (elements; signed, so a box may start before the tensor) holds
//   box[0] x box[1] elements; element (i, j) of the box is tensor element (x + i, y + j), zero when
//   that lies outside [0, dims[0]) x [0, dims[1]). The whole box's bytes complete on the barrier,
//   filled or not.
// - Shared memory receives the box row after row, box[0] elements a row, so element (i, j) lands
//   at byte j * box[0] * elem_bytes + i * elem_bytes of the destination; with a swizzle the
//   16-byte chunk bits of that shared-window address are XORed with the bits from 7 up, exactly
//   as wgmma reads them (Note [wgmma layouts] in dg_wgmma_sm90.cuh): a 128-byte-swizzled box of
//   [rows][64 bf16] at a 1024-byte boundary is a K-major operand of 128-byte swizzle atoms, SBO
//   1024. The destination is 128-byte aligned, 1024 with a 128-byte swizzle.
// - The map's rules, checked before encoding (dg_tensor_map_check): the tensor's address 16-byte
//   aligned, dims in [1, 2^32], row strides multiples of 16 bytes below 2^40 and at least a row,
//   box extents in [1, 256], the box's row a multiple of 16 bytes, element strides 1 (the only
//   ones emulated), and with a swizzle the box's row at most the swizzle's span. Emulated maps are
//   2-D so far.
// - Emulation: the copy lands when a thread waits on (or polls) its barrier
//   (DYNGEN_EMU_ASYNC=wait), at issue (=issue) or either (=random), so reading the box before the
//   wait shows poisoned bytes. A block that ends with a copy nobody waited for is an error.
#pragma once
#include "dg_config.cuh"
#include "dg_mbarrier_sm90.cuh"
#include "dg_types.cuh"
#include "dg_wgmma_sm90.cuh"

// An emulated tensor map: 128 bytes, 64-byte aligned like CUtensorMap.
struct alignas(64) DgTensorMap {
  dg_u64 words[16];
};

constexpr dg_u64 kDgTensorMapMagic = 0x31304d5441544744ull;  // marks an emulated map

// Whether a 2-D map of these arguments satisfies cuTensorMapEncodeTiled's documented rules
// (Note [TMA box copies]): nullptr, or the rule broken. strides[0] is the row stride in bytes.
DG_DEVICE const char* dg_tensor_map_check(int rank, int elem_bytes, const void* address,
                                          const dg_u64* dims, const dg_u64* strides,
                                          const dg_u32* box, const dg_u32* element_strides,
                                          int swizzle) {
  if (rank != 2) return "emulated tensor maps are 2-D";
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8)
    return "element size must be 1, 2, 4 or 8 bytes";
  if (reinterpret_cast<unsigned long long>(address) % 16 != 0)
    return "globalAddress must be 16-byte aligned";
  for (int d = 0; d < rank; ++d) {
    if (dims[d] < 1 || dims[d] > (dg_u64{1} << 32)) return "globalDim must be in [1, 2^32]";
    if (box[d] < 1 || box[d] > 256) return "boxDim must be in [1, 256]";
    if (element_strides[d] != 1) return "elementStrides other than 1 are not emulated";
  }
  if (strides[0] % 16 != 0) return "globalStrides must be multiples of 16 bytes";
  if (strides[0] >= (dg_u64{1} << 40)) return "globalStrides must be below 2^40";
  if (strides[0] < dims[0] * static_cast<dg_u64>(elem_bytes))
    return "globalStrides[0] must cover a row (globalDim[0] elements)";
  const dg_u64 row = dg_u64{box[0]} * static_cast<dg_u64>(elem_bytes);
  if (row % 16 != 0) return "boxDim[0] * element size must be a multiple of 16 bytes";
  if (swizzle != kDgSwizzleNone && row > static_cast<dg_u64>(dg_wgmma_row_bytes(swizzle)))
    return "with a swizzle, boxDim[0] * element size must not exceed the swizzle's span";
  return nullptr;
}

// Encodes an emulated map after dg_tensor_map_check; returns its verdict.
DG_DEVICE const char* dg_tensor_map_encode(DgTensorMap* map, int elem_bytes, const void* address,
                                           const dg_u64 (&dims)[2], dg_u64 row_stride,
                                           const dg_u32 (&box)[2], int swizzle) {
  const dg_u32 ones[2] = {1, 1};
  const char* error =
      dg_tensor_map_check(2, elem_bytes, address, dims, &row_stride, box, ones, swizzle);
  if (error) return error;
  for (dg_u64& w : map->words) w = 0;
  map->words[0] = kDgTensorMapMagic;
  map->words[1] = reinterpret_cast<unsigned long long>(address);
  map->words[2] = static_cast<dg_u64>(elem_bytes) | (static_cast<dg_u64>(swizzle) << 8);
  map->words[3] = dims[0];
  map->words[4] = dims[1];
  map->words[5] = row_stride;
  map->words[6] = dg_u64{box[0]} | (dg_u64{box[1]} << 32);
  return nullptr;
}

#if defined(DG_HOST_EMULATION)
#include "dg_tma_sm90_emu.h"  // the host twin
#endif

#if defined(DG_HAS_DEVICE) && (defined(DG_HOST_EMULATION) || defined(__CUDA_ARCH_FEAT_SM90_ALL))

// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes: the box at
// (x, y) of `map` (a __grid_constant__ kernel parameter on a GPU) into `smem_dst`, completing
// its bytes on `bar`. Issued by one thread.
DG_DEVICE void dg_tma_load_2d(void* smem_dst, const DgTensorMap* map, int x, int y, dg_u64* bar) {
#if defined(DG_ON_GPU)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(smem_dst))),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
      "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar)))
      : "memory");
#else
  ::dg::emu::tma_issue(smem_dst, map, x, y, bar);
#endif
}

#endif  // TMA available
