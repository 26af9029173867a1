// mbarrier test kernels (codegen/device/dg_mbarrier_sm90.cuh); see basic_kernels.h for the
// conventions. Barriers live in static shared memory, poisoned before each block like the rest.
#pragma once

namespace dg::emu::testing {

inline constexpr const char* kMbarrierKernels = R"cuda(
#include "dg_device.cuh"
#include "dg_mbarrier_sm90.cuh"

// Every thread writes its slot and arrives; after waiting on phase 0 each sums all slots, so a
// wait that returned before the last arrival shows as a short sum. early[t]: whether phase 0 had
// completed when thread t arrived (true only for the last to arrive).
extern "C" __global__ void arrive_all_then_wait(int* sums, int* early) {
  __shared__ __align__(8) dg_u64 bar;
  __shared__ int slots[128];
  if (threadIdx.x == 0) dg_mbarrier_init(&bar, blockDim.x);
  __syncthreads();
  slots[threadIdx.x] = static_cast<int>(threadIdx.x) + 1;
  dg_mbarrier_arrive(&bar);
  early[threadIdx.x] = dg_mbarrier_try_wait_parity(&bar, 0) ? 1 : 0;
  dg_mbarrier_wait_parity(&bar, 0);
  int s = 0;
  for (unsigned i = 0; i < blockDim.x; ++i) s += slots[i];
  sums[threadIdx.x] = s;
}
DG_EMU_ENTRY(arrive_all_then_wait)

// Phase 0 expects one arrival and 64 bytes: thread 0 arrives with expect_tx(64), threads 1 and 2
// complete 32 bytes each. trace: [0] phase 0 done after the arrival alone, [1] after the first
// 32 bytes, [2] after all; [3] phase 1 not done (parity 1), [4] phase 0 still reads done.
extern "C" __global__ void expect_tx_then_complete(int* trace) {
  __shared__ __align__(8) dg_u64 bar;
  if (threadIdx.x == 0) dg_mbarrier_init(&bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    dg_mbarrier_arrive_expect_tx(&bar, 64);
    trace[0] = dg_mbarrier_try_wait_parity(&bar, 0);
  }
  __syncthreads();
  if (threadIdx.x == 1) {
    dg_mbarrier_complete_tx(&bar, 32);
    trace[1] = dg_mbarrier_try_wait_parity(&bar, 0);
  }
  __syncthreads();
  if (threadIdx.x == 2) {
    dg_mbarrier_complete_tx(&bar, 32);
    trace[2] = dg_mbarrier_try_wait_parity(&bar, 0);
    trace[3] = dg_mbarrier_try_wait_parity(&bar, 1);
    trace[4] = dg_mbarrier_try_wait_parity(&bar, 0);
  }
}
DG_EMU_ENTRY(expect_tx_then_complete)

// Bytes that land before they are expected (a negative tx-count on the way): complete_tx(16)
// then arrive.expect_tx(16) completes phase 0 at the arrival.
extern "C" __global__ void bytes_before_expect(int* trace) {
  __shared__ __align__(8) dg_u64 bar;
  dg_mbarrier_init(&bar, 1);
  dg_mbarrier_complete_tx(&bar, 16);
  trace[0] = dg_mbarrier_try_wait_parity(&bar, 0);
  dg_mbarrier_arrive_expect_tx(&bar, 16);
  trace[1] = dg_mbarrier_try_wait_parity(&bar, 0);
}
DG_EMU_ENTRY(bytes_before_expect)

// A producer/consumer ring of `stages` slots over `rounds` items: warp 0 (the producer) waits
// for a slot to be free (phase parity of its round), writes it and arrives on `full`; warp 1
// waits on `full`, adds the item to its sum and arrives on `empty`. out[0]: the consumer's sum.
extern "C" __global__ void ring(int rounds, int* out) {
  constexpr int kStages = 3;
  __shared__ __align__(8) dg_u64 full[kStages], empty[kStages];
  __shared__ int slot[kStages];
  if (threadIdx.x == 0)
    for (int s = 0; s < kStages; ++s) {
      dg_mbarrier_init(&full[s], 1);
      dg_mbarrier_init(&empty[s], 1);
    }
  __syncthreads();
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int sum = 0;
  for (int i = 0; i < rounds; ++i) {
    const int s = i % kStages;
    const unsigned round = static_cast<unsigned>(i / kStages);
    if (warp == 0 && lane == 0) {
      if (round > 0) dg_mbarrier_wait_parity(&empty[s], (round - 1) & 1u);
      slot[s] = i + 1;
      dg_mbarrier_arrive(&full[s]);
    } else if (warp == 1 && lane == 0) {
      dg_mbarrier_wait_parity(&full[s], round & 1u);
      sum += slot[s];
      dg_mbarrier_arrive(&empty[s]);
    }
  }
  if (warp == 1 && lane == 0) out[0] = sum;
}
DG_EMU_ENTRY(ring)

extern "C" __global__ void use_before_init(int* out) {
  __shared__ __align__(8) dg_u64 bar;
  dg_mbarrier_arrive(&bar);
  out[0] = 1;
}
DG_EMU_ENTRY(use_before_init)

extern "C" __global__ void too_many_arrivals(int* out) {
  __shared__ __align__(8) dg_u64 bar;
  if (threadIdx.x == 0) dg_mbarrier_init(&bar, 1);
  __syncthreads();
  if (threadIdx.x < 2) dg_mbarrier_arrive_expect_tx(&bar, 4);  // the first leaves 4 bytes pending
  out[0] = 1;
}
DG_EMU_ENTRY(too_many_arrivals)

extern "C" __global__ void wait_forever(int* out) {
  __shared__ __align__(8) dg_u64 bar;
  if (threadIdx.x == 0) dg_mbarrier_init(&bar, 2);
  __syncthreads();
  if (threadIdx.x == 0) dg_mbarrier_arrive(&bar);  // one of two arrivals
  dg_mbarrier_wait_parity(&bar, 0);
  out[0] = 1;
}
DG_EMU_ENTRY(wait_forever)
)cuda";

}  // namespace dg::emu::testing
