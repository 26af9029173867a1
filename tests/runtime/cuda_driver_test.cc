// The driver is dlopen'd: without libcuda or a GPU it reports why instead of failing.
#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace dg {
namespace {

TEST(CudaDriver, InstanceReportsUnavailableCleanly) {
  const CudaDriver& d = CudaDriver::instance();
  EXPECT_EQ(&d, &CudaDriver::instance());
  if (d.available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(d.unavailable_reason().empty());
  EXPECT_EQ(d.default_arch(), "sm_90a");
  Result<int> cc = d.compute_capability();
  ASSERT_FALSE(cc.ok());
  EXPECT_EQ(cc.message(), d.unavailable_reason());
  EXPECT_FALSE(d.ensure_context().ok());

  Result<CudaModule> m = CudaModule::load(
      "\x7f"
      "ELF not really a cubin");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), d.unavailable_reason());
}

TEST(CudaDriver, MissingLibraryNamesIt) {
  CudaDriver d = CudaDriver::open("/nonexistent/libcuda.so.1");
  EXPECT_FALSE(d.available());
  EXPECT_NE(d.unavailable_reason().find("/nonexistent/libcuda.so.1"), std::string::npos)
      << d.unavailable_reason();
  EXPECT_EQ(d.device_count(), 0);
  EXPECT_EQ(d.default_arch(3), "sm_90a");
}

TEST(CudaDriver, ToolkitStubLibraryIsUnavailable) {
  if (access(DG_CUDA_STUB_LIBCUDA, R_OK) != 0) GTEST_SKIP() << "no stub " DG_CUDA_STUB_LIBCUDA;
  CudaDriver d = CudaDriver::open(DG_CUDA_STUB_LIBCUDA);
  EXPECT_FALSE(d.available());
  // The stub exports every symbol, so the table binds and cuInit is what fails.
  EXPECT_NE(d.api().cuInit, nullptr);
  EXPECT_NE(d.api().cuLaunchKernel, nullptr);
  EXPECT_NE(d.unavailable_reason().find("cuInit"), std::string::npos) << d.unavailable_reason();
  Result<CudaModule> m = CudaModule::load("x", 0, d);
  EXPECT_FALSE(m.ok());
}

TEST(CudaDriver, EmptyModuleRefusesWork) {
  CudaModule m;
  EXPECT_FALSE(m.loaded());
  EXPECT_FALSE(m.function("k").ok());
  EXPECT_FALSE(m.launch(nullptr, {}, {}, 0, nullptr, nullptr).ok());
  CudaModule moved = std::move(m);
  EXPECT_FALSE(moved.loaded());
}

}  // namespace
}  // namespace dg
