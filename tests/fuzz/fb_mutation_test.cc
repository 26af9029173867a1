// load_graph_fb against corrupted graph.fb bytes, without libFuzzer: every truncation of real
// files, random bit flips, and hand-built files that each break one rule of
// Note [graph.fb loader checks]. Each must come back as a one-line error: no crash, no hang.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/fb_loader.h"
#include "ir/fb_writer.h"
#include "ir/graph_generated.h"
#include "ir/text_format.h"
#include "tests/common/file_bytes.h"

namespace dg {
namespace {

namespace fs = std::filesystem;

using dg::testing::read_all;

// Valid seed graphs (corpus and compat files), or the corpus's regression inputs: files named
// regress_*.fb that once crashed a sanitizer build and must stay load errors.
std::vector<std::string> seed_files(bool regressions = false) {
  std::vector<std::string> out;
  for (const char* dir : {DG_FUZZ_CORPUS_DIR, DG_CLI_COMPAT_DIR})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".fb" &&
          (e.path().filename().string().rfind("regress_", 0) == 0) == regressions)
        out.push_back(read_all(e.path()));
  return out;
}

// A graph.fb assembled field by field, so that a test can break exactly one thing.
struct RawAttr {
  std::string name;
  fb::AttrKind kind = fb::AttrKind::Int;
  int64_t i = 0;
  std::vector<int64_t> ints;
  std::vector<uint32_t> exprs;
  uint8_t dtype = 0;
};
RawAttr attr(const std::string& name, fb::AttrKind kind = fb::AttrKind::Int) {
  RawAttr a;
  a.name = name;
  a.kind = kind;
  return a;
}
struct RawNode {
  uint32_t op = 0;
  std::vector<uint32_t> inputs;
  std::optional<uint32_t> output;
  std::vector<RawAttr> attrs;
};
struct RawValue {
  uint8_t kind = 1;   // Tensor
  uint8_t dtype = 3;  // f32
  std::vector<uint32_t> shape;
  std::optional<uint32_t> sym;
};
struct RawSymbol {
  std::string name;
  int64_t lo = 2, hi = 0;
  bool lo_unbounded = false, hi_unbounded = true;
  int64_t divisor = 1;
};
struct RawExpr {
  uint8_t kind = 0;
  int64_t value = 0;
  uint32_t symbol = 0;
  std::vector<uint32_t> operands;
};
struct RawGraph {
  uint32_t version = kGraphFbVersion;
  std::vector<RawSymbol> symbols;
  std::vector<RawExpr> exprs;
  std::vector<RawValue> values;
  std::vector<uint32_t> inputs, outputs;
  std::vector<RawNode> nodes;

  std::string encode(const char* identifier = "DGIR") const {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<fb::Symbol>> syms;
    for (auto& s : symbols)
      syms.push_back(fb::CreateSymbolDirect(b, s.name.c_str(), s.lo, s.lo_unbounded, s.hi,
                                            s.hi_unbounded, s.divisor));
    std::vector<flatbuffers::Offset<fb::Expr>> es;
    for (auto& e : exprs)
      es.push_back(fb::CreateExprDirect(b, static_cast<fb::ExprKind>(e.kind), e.value, e.symbol,
                                        &e.operands));
    std::vector<flatbuffers::Offset<fb::Value>> vs;
    for (auto& v : values)
      vs.push_back(fb::CreateValueDirect(
          b, static_cast<fb::ValueKind>(v.kind), static_cast<fb::DType>(v.dtype), &v.shape,
          v.sym ? flatbuffers::Optional<uint32_t>(*v.sym) : flatbuffers::nullopt));
    std::vector<flatbuffers::Offset<fb::Node>> ns;
    for (auto& n : nodes) {
      std::vector<flatbuffers::Offset<fb::Attr>> as;
      for (auto& a : n.attrs)
        as.push_back(fb::CreateAttrDirect(b, a.name.c_str(), a.kind, a.i, 0.0, &a.ints, &a.exprs,
                                          static_cast<fb::DType>(a.dtype)));
      ns.push_back(fb::CreateNodeDirect(
          b, n.op, &n.inputs,
          n.output ? flatbuffers::Optional<uint32_t>(*n.output) : flatbuffers::nullopt, &as));
    }
    auto root = fb::CreateGraphDirect(b, version, "g", &syms, &es, &vs, &inputs, &outputs, &ns);
    b.Finish(root, identifier);
    return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  }
};

constexpr uint8_t kConst = 1, kSymbol = 2, kSum = 3, kProduct = 4, kFloorDiv = 5;
constexpr uint32_t kNegCode = 4;  // ops.def: neg

// %0: f32[s0, 4] input; %1 = neg(%0); output %1.
RawGraph base() {
  RawGraph g;
  g.symbols = {RawSymbol{"s0"}};
  g.exprs = {{kSymbol, 0, 0, {}}, {kConst, 4, 0, {}}};
  g.values = {{1, 3, {0, 1}, {}}, {1, 3, {0, 1}, {}}};
  g.inputs = {0};
  g.outputs = {1};
  g.nodes = {{kNegCode, {0}, 1u, {}}};
  return g;
}

std::string load_error(const std::string& bytes) {
  LoadResult r = load_graph_fb(bytes.data(), bytes.size());
  EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
  return r.error;
}

// Expects an error mentioning `needle`.
void expect_error(const RawGraph& g, const std::string& needle) {
  std::string err = load_error(g.encode());
  EXPECT_NE(err.find(needle), std::string::npos) << "error was: '" << err << "'";
}

TEST(FbMutation, BaseLoads) {
  std::string bytes = base().encode();
  LoadResult r = load_graph_fb(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.graph.nodes.size(), 1u);
}

TEST(FbMutation, RegressionInputsAreErrors) {
  std::vector<std::string> files = seed_files(/*regressions=*/true);
  EXPECT_FALSE(files.empty());
  for (const std::string& bytes : files) EXPECT_NE(load_error(bytes), "");
}

// Cutting a file short is an error, except where only the builder's trailing alignment padding
// (zero bytes after the last string) goes: then the very same graph loads.
TEST(FbMutation, EveryTruncationIsAnError) {
  for (const std::string& bytes : seed_files()) {
    LoadResult full = load_graph_fb(bytes.data(), bytes.size());
    ASSERT_TRUE(full.ok()) << full.error;
    for (size_t n = 0; n < bytes.size(); ++n) {
      std::string prefix = bytes.substr(0, n);
      LoadResult r = load_graph_fb(prefix.data(), prefix.size());
      if (!r.ok()) {
        EXPECT_EQ(r.error.find('\n'), std::string::npos);
        continue;
      }
      EXPECT_EQ(bytes.find_first_not_of('\0', n), std::string::npos)
          << "prefix of " << n << " bytes loaded";
      EXPECT_EQ(print_graph(r.graph), print_graph(full.graph));
    }
  }
}

TEST(FbMutation, RandomBitFlipsNeverCrash) {
  std::mt19937_64 rng(42);
  int loaded = 0, total = 0;
  for (const std::string& bytes : seed_files()) {
    for (int i = 0; i < 400; ++i, ++total) {
      std::string m = bytes;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) m[rng() % m.size()] ^= static_cast<char>(1u << (rng() % 8));
      LoadResult r = load_graph_fb(m.data(), m.size());
      if (!r.ok()) {
        EXPECT_EQ(r.error.find('\n'), std::string::npos);
        continue;
      }
      ++loaded;  // a harmless flip (a float bit, a bound): what loads must round-trip
      std::string again = write_graph_fb(r.graph);
      LoadResult r2 = load_graph_fb(again.data(), again.size());
      ASSERT_TRUE(r2.ok()) << r2.error;
      EXPECT_EQ(print_graph(r2.graph), print_graph(r.graph));
    }
  }
  EXPECT_LT(loaded, total);
}

TEST(FbMutation, GarbageAndSizes) {
  EXPECT_NE(load_error(""), "");
  EXPECT_NE(load_graph_fb(nullptr, 0).error, "");
  EXPECT_NE(load_error("D"), "");
  EXPECT_NE(load_error(std::string("\0\0\0\0DGIR", 8)), "");
  EXPECT_NE(load_error(std::string("\x08\0\0\0DGIR", 8)), "");
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string junk(8 + rng() % 300, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    junk.replace(4, 4, "DGIR");
    load_error(junk);  // must not crash; may not even be an error in theory
  }
  // Size limits are checked before anything is read.
  std::string bytes = base().encode();
  FbLimits small;
  small.max_bytes = bytes.size() - 1;
  EXPECT_NE(load_graph_fb(bytes.data(), bytes.size(), small).error.find("exceeds"),
            std::string::npos);
  std::string huge(FbLimits{}.max_bytes + 1, '\0');
  EXPECT_NE(load_error(huge).find("exceeds"), std::string::npos);
  EXPECT_NE(load_error(base().encode("XXXX")).find("DGIR"), std::string::npos);
}

TEST(FbMutation, VersionAndCodes) {
  RawGraph g = base();
  g.version = 0;
  expect_error(g, "missing schema version");
  g.version = kGraphFbVersion + 1;
  expect_error(g, "schema version");
  g = base();
  g.nodes[0].op = 999;
  expect_error(g, "unknown op code 999");
  g.nodes[0].op = 0;
  expect_error(g, "unknown op code 0");
  g = base();
  g.values[0].dtype = 200;
  expect_error(g, "unknown dtype code 200");
  g.values[0].dtype = 0;
  expect_error(g, "unknown dtype code 0");
  g = base();
  g.values[1].kind = 9;
  expect_error(g, "unknown kind 9");
  g = base();
  g.exprs[1].kind = 77;
  expect_error(g, "unknown kind 77");
}

TEST(FbMutation, IdsAndStructure) {
  RawGraph g = base();
  g.nodes[0].inputs = {5};
  expect_error(g, "out of range");
  g = base();
  g.nodes[0].output.reset();
  expect_error(g, "has no output");
  g = base();
  g.nodes[0].output = 0;  // redefines the input
  expect_error(g, "has a producer");
  g = base();
  g.nodes.push_back(g.nodes[0]);
  g.values.push_back(g.values[1]);
  expect_error(g, "defined by two nodes");
  g = base();
  g.inputs = {7};
  expect_error(g, "out of range");
  g = base();
  g.outputs = {2};
  expect_error(g, "out of range");
  g = base();
  g.outputs = {};
  expect_error(g, "no outputs");
  g = base();
  g.nodes[0].inputs = {1};  // uses its own result
  expect_error(g, "before it is defined");
  g = base();
  g.values[1].shape = {1, 0};  // declared f32[4, s0], neg gives f32[s0, 4]
  expect_error(g, "declared type");
  g = base();
  g.values[0].shape.assign(1000, 1);
  expect_error(g, "rank 1000");
  g = base();
  g.values[0].shape = {0, 9};
  expect_error(g, "expression 9, out of range");
  g = base();
  g.values[1] = {2, 0, {}, {}};  // a symint without its expression
  expect_error(g, "without sym_value");
  g = base();
  g.nodes[0].inputs.assign(5000, 0);
  expect_error(g, "too many operands");
  g = base();
  g.nodes.assign(3, g.nodes[0]);
  expect_error(g, "more nodes than values");
}

TEST(FbMutation, Symbols) {
  for (const char* bad : {"", "1abc", "a b", "floordiv", "inf", "s-1"}) {
    RawGraph g = base();
    g.symbols[0].name = bad;
    expect_error(g, "invalid name");
  }
  RawGraph g = base();
  g.symbols.push_back(g.symbols[0]);
  expect_error(g, "declared twice");
  g = base();
  g.symbols[0].hi_unbounded = false;
  g.symbols[0].hi = 1;
  expect_error(g, "empty or single-valued range");
  g.symbols[0].hi = 2;
  expect_error(g, "empty or single-valued range");
  g = base();
  g.symbols[0].divisor = 0;
  expect_error(g, "invalid divisor");
  g = base();
  g.symbols[0].lo = int64_t{1} << 62 | 1;
  expect_error(g, "beyond 2^62");
  g = base();
  g.symbols[0].lo = 0;
  g.symbols[0].lo_unbounded = true;  // s0 may be negative: not a valid dimension
  expect_error(g, "may be negative");
}

TEST(FbMutation, Expressions) {
  RawGraph g = base();
  g.exprs[1] = {kSum, 0, 0, {1}};  // refers to itself
  expect_error(g, "not an earlier entry");
  g = base();
  g.exprs[0] = {kSum, 0, 0, {1}};  // forward reference
  expect_error(g, "not an earlier entry");
  g = base();
  g.exprs[1].value = (int64_t{1} << 62) + 1;
  expect_error(g, "constant beyond 2^62");
  g = base();
  g.exprs[0].symbol = 3;
  expect_error(g, "symbol index out of range");
  g = base();
  g.exprs[1] = {kSum, 0, 0, {}};
  expect_error(g, "wrong number of operands");
  g = base();
  g.exprs.push_back({kConst, 0, 0, {}});
  g.exprs.push_back({kFloorDiv, 0, 0, {0, 2}});
  expect_error(g, "division by zero");
  g = base();
  g.exprs.push_back({kConst, int64_t{1} << 62, 0, {}});
  g.exprs.push_back({kProduct, 0, 0, {2, 2}});
  expect_error(g, "overflow");
  g = base();
  g.exprs.push_back({kFloorDiv, 0, 0, {0}});
  expect_error(g, "wrong number of operands");
}

TEST(FbMutation, DeepAndExplosiveExpressionsAreRefusedQuickly) {
  auto start = std::chrono::steady_clock::now();
  // A chain floordiv(floordiv(...(s0, s0)...), s0), 60000 deep.
  RawGraph g = base();
  for (uint32_t i = 0; i < 60000; ++i)
    g.exprs.push_back({kFloorDiv, 0, 0, {static_cast<uint32_t>(g.exprs.size() - 1), 0}});
  expect_error(g, "nested too deeply");
  // (s0 + 1)^(2^k) by repeated squaring, and s0^(2^k): refused before expanding.
  for (bool with_one : {true, false}) {
    g = base();
    g.exprs.push_back({kConst, 1, 0, {}});
    if (with_one)
      g.exprs.push_back({kSum, 0, 0, {0, 2}});
    else
      g.exprs.push_back({kProduct, 0, 0, {0}});
    for (int k = 0; k < 64; ++k) {
      uint32_t last = static_cast<uint32_t>(g.exprs.size() - 1);
      g.exprs.push_back({kProduct, 0, 0, {last, last}});
    }
    expect_error(g, "expression");
  }
  // Many symbols summed into one long sum, then multiplied by itself.
  g = base();
  std::vector<uint32_t> all;
  for (uint32_t i = 1; i < 400; ++i) {
    g.symbols.push_back(RawSymbol{"t" + std::to_string(i)});
    g.exprs.push_back({kSymbol, 0, i, {}});
    all.push_back(static_cast<uint32_t>(g.exprs.size() - 1));
  }
  g.exprs.push_back({kSum, 0, 0, all});
  uint32_t sum = static_cast<uint32_t>(g.exprs.size() - 1);
  g.exprs.push_back({kProduct, 0, 0, {sum, sum}});
  expect_error(g, "too large");
  // Many reshapes of one rank-8 value whose dims are sums: each use costs the verifier a
  // polynomial expansion, so the budget runs out after a few nodes.
  g = base();
  for (int i = 1; i <= 2; ++i) {
    g.symbols.push_back(RawSymbol{"u" + std::to_string(i)});
    g.exprs.push_back({kSymbol, 0, static_cast<uint32_t>(i), {}});
  }
  g.exprs.push_back({kSum, 0, 0, {2, 3}});
  uint32_t wide = static_cast<uint32_t>(g.exprs.size() - 1);
  g.values[0].shape.assign(8, wide);
  g.values[1].shape.assign(8, wide);
  RawAttr shape = attr("shape", fb::AttrKind::Exprs);
  shape.exprs.assign(8, wide);
  g.nodes[0].op = 37;  // reshape
  g.nodes[0].attrs = {shape};
  g.nodes.resize(1);
  for (int i = 0; i < 2000; ++i) {  // many uses of the same expensive value
    g.values.push_back(g.values[1]);
    RawNode n = g.nodes[0];
    n.output = static_cast<uint32_t>(g.values.size() - 1);
    g.nodes.push_back(n);
  }
  expect_error(g, "too complex");
  // One sum of two million operands: stopped by the work budget.
  g = base();
  g.exprs.push_back({kSum, 0, 0, std::vector<uint32_t>(2000000, 0)});
  expect_error(g, "expressions too complex");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
}

TEST(FbMutation, Attributes) {
  RawGraph g = base();
  g.nodes[0].attrs = {attr("a b")};
  expect_error(g, "invalid attribute name");
  g.nodes[0].attrs = {attr("x"), attr("x")};
  expect_error(g, "given twice");
  RawAttr a = attr("x");
  a.kind = static_cast<fb::AttrKind>(42);
  g.nodes[0].attrs = {a};
  expect_error(g, "unknown kind 42");
  a = attr("x", fb::AttrKind::Dtype);
  a.dtype = 99;
  g.nodes[0].attrs = {a};
  expect_error(g, "unknown dtype code 99");
  a = attr("x", fb::AttrKind::Ints);
  a.ints.assign(5000, 1);
  g.nodes[0].attrs = {a};
  expect_error(g, "too long");
  a = attr("x", fb::AttrKind::Exprs);
  a.exprs = {0, 12};
  g.nodes[0].attrs = {a};
  expect_error(g, "out of range");
  g.nodes[0].attrs.assign(65, attr("x"));
  expect_error(g, "too many attributes");
}

}  // namespace
}  // namespace dg
