// The mbarrier twin (codegen/device/dg_mbarrier_sm90_emu.h) against the PTX ISA's semantics (Note
// [mbarrier semantics]): a phase completes on its last arrival with no bytes outstanding,
// try_wait.parity reads phases by parity, transaction bytes may land before they are expected,
// a three-stage producer/consumer ring runs under every scheduling mode, and misuse is an error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/emu/emu_test_util.h"
#include "tests/emu/mbarrier_kernels.h"

namespace dg::emu::testing {
namespace {

const EmuModule& mbarrier_module() { return test_module(kMbarrierKernels); }

TEST(EmuMbarrier, PhaseCompletesOnTheLastArrival) {
  std::vector<int> sums(128, 0), early(128, -1);
  int* ps = sums.data();
  int* pe = early.data();
  ASSERT_EQ(launch(mbarrier_module(), "arrive_all_then_wait", grid1d(2, 128), ps, pe), "");
  for (int s : sums) EXPECT_EQ(s, 128 * 129 / 2);
  int done_at_arrival = 0;
  for (int e : early) done_at_arrival += e;
  // Under the FIFO scheduler each thread runs to its wait before the next arrives: only the
  // last arrival sees the phase done. Under random schedules more may.
  EXPECT_GE(done_at_arrival, 1);
  if (std::getenv("DYNGEN_EMU_SCHED") == nullptr) EXPECT_EQ(done_at_arrival, 1);
}

TEST(EmuMbarrier, TransactionBytesHoldThePhase) {
  std::vector<int> trace(5, -1);
  int* pt = trace.data();
  ASSERT_EQ(launch(mbarrier_module(), "expect_tx_then_complete", grid1d(1, 32), pt), "");
  EXPECT_EQ(trace, (std::vector<int>{0, 0, 1, 0, 1}));
}

TEST(EmuMbarrier, BytesMayLandBeforeTheyAreExpected) {
  std::vector<int> trace(2, -1);
  int* pt = trace.data();
  ASSERT_EQ(launch(mbarrier_module(), "bytes_before_expect", grid1d(1, 1), pt), "");
  EXPECT_EQ(trace, (std::vector<int>{0, 1}));
}

TEST(EmuMbarrier, ProducerConsumerRingPassesEveryItem) {
  for (int rounds : {1, 3, 7, 40}) {
    int sum = -1;
    int* po = &sum;
    ASSERT_EQ(launch(mbarrier_module(), "ring", grid1d(1, 64), rounds, po), "");
    EXPECT_EQ(sum, rounds * (rounds + 1) / 2) << rounds;
  }
}

TEST(EmuMbarrier, MisuseIsAnError) {
  int out = 0;
  int* po = &out;
  EXPECT_NE(
      launch(mbarrier_module(), "use_before_init", grid1d(1, 1), po).find("before mbarrier.init"),
      std::string::npos);
  EXPECT_NE(launch(mbarrier_module(), "too_many_arrivals", grid1d(1, 32), po)
                .find("more mbarrier arrivals than the phase expects"),
            std::string::npos);
  EXPECT_NE(launch(mbarrier_module(), "wait_forever", grid1d(1, 32), po).find("never completes"),
            std::string::npos);
}

}  // namespace
}  // namespace dg::emu::testing
