// Static checks of the machine code, without a GPU. For every generated kernel of the seed's
// forward and backward graphs, the Phi-3.5-MoE-shaped forward and the codegen catalog, compiled
// for sm_80 and sm_90a:
// ptxas reports 0 spill bytes and shared memory within the architecture's limits, and the SASS
// of every kernel with bf16 contractions shows tensor-core MMAs (HMMA): bf16 GEMMs lower to the
// tensor-core template (codegen/device/dg_gemm_sm80.cuh), and on sm_90a every kernel with tensor
// maps shows HGMMA and UTMALDG (Note [sm_90a GEMMs]). The SASS checker itself is checked on the mma
// test kernels of tests/emu against scalar kernels.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <iostream>

#include "ir/graph_io.h"
#include "runtime/compiler.h"
#include "runtime/emu/device_headers.h"
#include "runtime/model/sass_tools.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/ptxas_report.h"
#include "tests/codegen/op_cases.h"
#include "tests/common/fixtures.h"
#include "tests/common/machine_code.h"
#include "tests/common/temp_dir.h"
#include "tests/emu/basic_kernels.h"
#include "tests/emu/tensor_core_kernels.h"

namespace dg {
namespace {

constexpr const char* kArchs[] = {"sm_80", "sm_90a"};

std::string cache_dir() { return testing::run_cache_dir("dyngen-static-test-cache"); }

std::string cuobjdump_or_fail() {
  std::string why;
  std::string tool = find_cuobjdump(&why);
  if (tool.empty())
    ADD_FAILURE() << why
                  << "\nThe SASS checks need cuobjdump and nvdisasm: scripts/setup.sh installs the "
                     "PyPI packages nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm into .venv "
                     "(or set DYNGEN_CUOBJDUMP to a cuobjdump with nvdisasm beside it).";
  return tool;
}

// 16-bit GEMMs that run on the scalar tile by design, by test case: the tensor-core template takes
// 2-d bf16 problems only (tensor_core_eligible in codegen/emit_gemm.cc), so the batched matmul
// (which keeps its batch dim) and the float16 linear stay on the scalar tile. Every other kernel
// with 16-bit contractions must show HMMA.
bool bf16_gemm_on_scalar_tile_by_design(const std::string& test_case) {
  return test_case == "op_matmul_batched" || test_case == "op_f16_linear_reduce_layout";
}

struct StaticCase {
  std::string name;
  Graph graph;
};
void PrintTo(const StaticCase& c, std::ostream* os) { *os << c.name; }

std::vector<StaticCase> static_cases() {
  std::vector<StaticCase> cases;
  for (const char* f : {"seed_expert_mlp", "seed_expert_mlp_backward", "phi35moe_expert_mlp"}) {
    LoadResult r = load_graph_file(testing::fixture_path(std::string(f) + ".dgir"));
    if (!r.ok()) throw std::runtime_error(r.error);
    cases.push_back({f, std::move(r.graph)});
  }
  for (OpCase& c : all_op_cases()) cases.push_back({"op_" + c.name, std::move(c.graph)});
  return cases;
}

class StaticChecks : public ::testing::TestWithParam<StaticCase> {};

TEST_P(StaticChecks, NoSpillsSharedMemoryFitsAndGemmsShowExpectedMma) {
  std::string tool = cuobjdump_or_fail();
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    CompileRequest req;
    req.target = arch;
    req.cache_dir = cache_dir();
    CompileOutcome o = compile_graph(GetParam().graph, req);
    ASSERT_TRUE(o.ok()) << o.error;
    const KernelPlan& plan = o.executable->plan();
    // Both binaries: the fallbacks are compiled on first need (Note [Fallbacks compiled on first
    // need]).
    auto code = testing::machine_code(tool, *o.executable, arch, cache_dir());
    ASSERT_TRUE(code.ok()) << code.message();
    ASSERT_EQ(code->report.size(), plan.kernels.size()) << "ptxas report missing or incomplete";
    for (const KernelLaunch& k : plan.kernels) {
      const KernelResources* r = nullptr;
      for (const KernelResources& x : code->report)
        if (x.name == k.name) r = &x;
      ASSERT_NE(r, nullptr) << k.name << " is not in ptxas's report";
      EXPECT_EQ(r->spill_store_bytes, 0) << k.name << ": " << k.summary;
      EXPECT_EQ(r->spill_load_bytes, 0) << k.name << ": " << k.summary;
      EXPECT_LE(r->shared_bytes, kMaxStaticSharedBytes) << k.name;
      EXPECT_LE(r->shared_bytes + k.shared_bytes, max_shared_bytes_per_block(arch)) << k.name;
      EXPECT_GT(r->registers, 0) << k.name;
    }
    size_t fallbacks = 0;
    for (const KernelLaunch& k : plan.kernels) fallbacks += k.fallback;
    EXPECT_EQ(o.resources.size() + fallbacks, code->report.size())
        << "the compile's own report is its first binary's, without the fallbacks";
    if (tool.empty()) continue;
    auto& sass = code->sass;
    for (const KernelLaunch& k : plan.kernels) {
      ASSERT_TRUE(sass.count(k.name)) << k.name << " is not in the SASS listing";
      if (k.tensor_flops == SymExpr(0)) continue;  // not a bf16 GEMM
      bool expect_hmma = !bf16_gemm_on_scalar_tile_by_design(GetParam().name);
      EXPECT_EQ(uses_tensor_cores(sass[k.name]), expect_hmma) << k.name << ": " << k.summary;
      // Note [sm_90a GEMMs]: a kernel that takes tensor maps loads them with TMA into wgmma.
      if (k.tensor_maps.empty()) continue;
      EXPECT_NE(sass[k.name].find("HGMMA.64x"), std::string::npos) << k.name;
      EXPECT_NE(sass[k.name].find("UTMALDG.2D"), std::string::npos) << k.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, StaticChecks, ::testing::ValuesIn(static_cases()),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// Compiles a test source (with the device headers) to a cubin with ptxas's report.
CompiledKernel compile_test_source(const std::string& source, const std::string& arch) {
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  CompileOptions o;
  o.arch = arch;
  o.ptxas_verbose = true;
  auto r = nvrtc_compile(source, headers, o);
  if (!r.ok()) throw std::runtime_error(r.message());
  return r.value();
}

// The HMMA check passes on the mma.sync kernels and fails on scalar ones, so the catalog check
// above can fail.
TEST(SassChecker, SeesTensorCoresInMmaKernelsAndNotInScalarOnes) {
  std::string tool = cuobjdump_or_fail();
  ASSERT_FALSE(tool.empty());
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    std::string error;
    auto mma = sass_by_function(
        tool, compile_test_source(emu::testing::kTensorCoreKernels, arch).binary, &error);
    ASSERT_FALSE(mma.empty()) << error;
    ASSERT_TRUE(mma.count("gemm_nk")) << "the mma test kernel gemm_nk is missing";
    EXPECT_TRUE(uses_tensor_cores(mma["gemm_nk"]));
    auto scalar = sass_by_function(
        tool, compile_test_source(emu::testing::kBasicKernels, arch).binary, &error);
    ASSERT_FALSE(scalar.empty()) << error;
    for (const auto& [name, text] : scalar) EXPECT_FALSE(uses_tensor_cores(text)) << name;
  }
}

TEST(PtxasReport, ParsesEveryKernelOfALog) {
  CompiledKernel k = compile_test_source(emu::testing::kTensorCoreKernels, "sm_90a");
  std::vector<KernelResources> r = parse_ptxas_log(k.log);
  ASSERT_FALSE(r.empty()) << k.log;
  bool found = false;
  for (const KernelResources& x : r) {
    EXPECT_EQ(x.arch, "sm_90a");
    EXPECT_GT(x.registers, 0) << x.name;
    if (x.name == "gemm_nk") {
      found = true;
      // as[16][40] and ws[16][40] bf16 tiles: 2 * 16 * 40 * 2 bytes of static shared memory.
      EXPECT_EQ(x.shared_bytes, 2 * 16 * 40 * 2);
    }
  }
  EXPECT_TRUE(found) << k.log;
  std::vector<KernelResources> back;
  ASSERT_TRUE(deserialize_resources(serialize_resources(r), &back));
  ASSERT_EQ(back.size(), r.size());
  EXPECT_EQ(back[0].registers, r[0].registers);
  EXPECT_FALSE(deserialize_resources("k sm_90 12 x\n", &back));
}

TEST(PtxasReport, ReadsSpillsFromTheLog) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k1_big' for 'sm_80'\n"
      "ptxas info    : Function properties for k1_big\n"
      "ptxas         .     40 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 8320 bytes smem, 380 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'k2_small' for 'sm_80'\n"
      "ptxas info    : Function properties for k2_small\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, 368 bytes cmem[0]\n";
  std::vector<KernelResources> r = parse_ptxas_log(log);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "k1_big");
  EXPECT_EQ(r[0].registers, 255);
  EXPECT_EQ(r[0].stack_frame_bytes, 40);
  EXPECT_EQ(r[0].spill_store_bytes, 24);
  EXPECT_EQ(r[0].spill_load_bytes, 16);
  EXPECT_EQ(r[0].shared_bytes, 8320);
  EXPECT_EQ(r[0].barriers, 1);
  EXPECT_EQ(r[1].name, "k2_small");
  EXPECT_EQ(r[1].registers, 12);
  EXPECT_EQ(r[1].shared_bytes, 0);
  EXPECT_EQ(r[1].spill_store_bytes, 0);
}

TEST(CompileCache, DevicePayloadRoundTripsAndRejectsOthers) {
  std::vector<KernelResources> report = {{"k0_linear", "sm_80", 64, 1, 0, 0, 0, 8320, 380}};
  std::string elf =
      "\x7f"
      "ELF";
  elf += '\0';
  elf += "binary";
  std::string payload = pack_device_payload(elf, report);
  std::string binary;
  std::vector<KernelResources> back;
  ASSERT_TRUE(unpack_device_payload(payload, &binary, &back));
  EXPECT_EQ(binary, elf);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].name, "k0_linear");
  EXPECT_EQ(back[0].shared_bytes, 8320);
  EXPECT_FALSE(
      unpack_device_payload("\x7f"
                            "ELF plain cubin",
                            &binary, &back));
  EXPECT_FALSE(unpack_device_payload("dyngen-device-payload-v1 999\nshort", &binary, &back));
  EXPECT_FALSE(unpack_device_payload("dyngen-device-payload-v1 x\n", &binary, &back));
}

TEST(CompileCache, OptionsEnterTheKey) {
  CompileOptions a, b;
  a.arch = b.arch = "sm_90a";
  b.ptxas_verbose = true;
  EXPECT_NE(compile_cache_key("x", {}, a), compile_cache_key("x", {}, b));
  b.ptxas_verbose = false;
  b.line_info = true;
  EXPECT_NE(compile_cache_key("x", {}, a), compile_cache_key("x", {}, b));
}

}  // namespace
}  // namespace dg
