// Text form golden tests (Note [IR text form]): text in, canonical text out, and the round trip
// print(parse(print(g))) == print(g) over the golden files, the seed fixtures and every op in the
// catalog. Golden pairs are golden/NAME.dgir -> golden/NAME.expected; the seed fixtures in
// tests/fixtures/ have their expected output in golden/ under the same stem.
// DYNGEN_UPDATE_GOLDEN=1 rewrites the .expected files from the current printer (review the diff).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/text_format.h"
#include "ir/verifier.h"
#include "tests/common/file_bytes.h"
#include "tests/common/fixtures.h"

namespace dg {
namespace {

namespace fs = std::filesystem;

using testing::fixture_path;
using testing::read_all;

std::vector<fs::path> golden_inputs() {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(DG_IR_GOLDEN_DIR))
    if (e.path().extension() == ".dgir") files.push_back(e.path());
  for (auto& e : fs::directory_iterator(testing::repo_path("tests/fixtures")))
    if (e.path().extension() == ".dgir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

void expect_round_trip(const Graph& g, const std::string& what) {
  std::string printed = print_graph(g);
  ParseResult again = parse_graph_text(printed);
  ASSERT_TRUE(again.ok()) << what << ": printed form does not parse: " << again.error << "\n"
                          << printed;
  EXPECT_EQ(print_graph(again.graph), printed) << what;
}

TEST(IrTextGolden, FilesPrintAsExpected) {
  const bool update = std::getenv("DYNGEN_UPDATE_GOLDEN") != nullptr;
  auto files = golden_inputs();
  ASSERT_GE(files.size(), 4u) << "golden inputs missing";
  for (const fs::path& in : files) {
    SCOPED_TRACE(in.string());
    ParseResult r = parse_graph_text(read_all(in));
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(verify_graph(r.graph), "");
    std::string printed = print_graph(r.graph);
    fs::path expected = fs::path(DG_IR_GOLDEN_DIR) / (in.stem().string() + ".expected");
    if (update) std::ofstream(expected, std::ios::binary) << printed;
    ASSERT_TRUE(fs::exists(expected)) << "no " << expected << " (DYNGEN_UPDATE_GOLDEN=1 writes it)";
    EXPECT_EQ(printed, read_all(expected));
    expect_round_trip(r.graph, in.filename().string());
  }
}

TEST(IrTextGolden, SeedFixturesHaveTheSeedsShape) {
  ParseResult fwd = parse_graph_text(read_all(fixture_path("seed_expert_mlp.dgir")));
  ASSERT_TRUE(fwd.ok()) << fwd.error;
  const Graph& g = fwd.graph;
  ASSERT_EQ(g.symbols.size(), 1u);
  EXPECT_EQ(g.symbols[0].symbol_name(), "s77");
  EXPECT_EQ(g.symbols[0].symbol_range().lo, 2);
  ASSERT_EQ(g.inputs.size(), 11u);  // x, s77 and nine weights, as Dynamo passes them
  EXPECT_EQ(g.value(g.inputs[1]).kind, ValueKind::kSymInt);
  EXPECT_EQ(g.nodes.size(), 26u);  // the FX graph's 23 nodes and one constant per `* 2.0`
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.tensor(g.outputs[0]).to_string(), "bf16[s77, 2048]");

  ParseResult bwd = parse_graph_text(read_all(fixture_path("seed_expert_mlp_backward.dgir")));
  ASSERT_TRUE(bwd.ok()) << bwd.error;
  std::vector<std::string> outs;
  for (ValueId id : bwd.graph.outputs) outs.push_back(bwd.graph.tensor(id).to_string());
  EXPECT_EQ(outs, (std::vector<std::string>{"bf16[s77, 2048]", "f32[16, 2048]", "f32[1024, 16]",
                                            "f32[16, 2048]", "f32[1024, 16]", "f32[16, 1024]",
                                            "f32[2048, 16]"}));
}

// One small graph per op, built with GraphBuilder; an op without a recipe fails the test, so a
// new op in ops.def comes with its round-trip case.
Graph build_one(OpKind kind) {
  GraphBuilder b("op_" + std::string(op_name(kind)));
  SymExpr s = b.symbol("s", 2, Interval::kPosInf, 1);
  ValueId x = b.input(DType::kF32, {s, 8});
  auto unary = [&] { return b.op(kind, {x}); };
  auto binary = [&] { return b.op(kind, {x, b.input(DType::kF32, {8})}); };
  ValueId out = -1;
  switch (kind) {
    case OpKind::kConstant:
      out = b.op(kind, {}, {{"dtype", DType::kF32}, {"value", 0.5}});
      break;
    case OpKind::kFull:
      out = b.op(kind, {},
                 {{"dtype", DType::kBF16},
                  {"value", -1.0e-5},
                  {"shape", std::vector<SymExpr>{s, 2 * s + 1}}});
      break;
    case OpKind::kCast:
      out = b.op(kind, {x}, {{"dtype", DType::kBF16}});
      break;
    case OpKind::kWhere: {
      ValueId cond = b.input(DType::kBool, {s, 8});
      out = b.op(kind, {cond, x, b.input(DType::kF32, {})});
      break;
    }
    case OpKind::kLinear:
      out = b.op(kind, {x, b.input(DType::kF32, {4, 8}), b.input(DType::kF32, {4})});
      break;
    case OpKind::kMatmul:
      out = b.op(kind, {b.input(DType::kF32, {3, s, 8}), b.input(DType::kF32, {8, 5})});
      break;
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kAmax:
      out = b.op(kind, {x}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", int64_t{1}}});
      break;
    case OpKind::kReshape:
      out = b.op(kind, {x}, {{"shape", std::vector<SymExpr>{2 * s, 4}}});
      break;
    case OpKind::kPermute:
      out = b.op(kind, {x}, {{"dims", std::vector<int64_t>{1, 0}}});
      break;
    case OpKind::kExpand:
      out = b.op(kind, {b.input(DType::kF32, {1, 8})}, {{"shape", std::vector<SymExpr>{s, 8}}});
      break;
    case OpKind::kSlice:
      out = b.op(kind, {x},
                 {{"dim", int64_t{0}},
                  {"start", std::vector<SymExpr>{1}},
                  {"end", std::vector<SymExpr>{s}},
                  {"step", int64_t{2}}});
      break;
    case OpKind::kCat:
      out = b.op(kind, {x, x, x}, {{"dim", int64_t{0}}});
      break;
    case OpKind::kIndexSelect:
      out = b.op(kind, {x, b.input(DType::kI64, {s + 3})}, {{"dim", int64_t{0}}});
      break;
    case OpKind::kIndexAdd:
    case OpKind::kIndexCopy: {
      ValueId idx = b.input(DType::kI32, {5});
      out = b.op(kind, {x, idx, b.input(DType::kF32, {5, 8})}, {{"dim", int64_t{0}}});
      break;
    }
    case OpKind::kGather:
      out = b.op(kind, {x, b.input(DType::kI64, {s, 1})}, {{"dim", int64_t{1}}});
      break;
    case OpKind::kScatter: {
      ValueId idx = b.input(DType::kI64, {s, 1});
      out = b.op(kind, {x, idx, b.input(DType::kF32, {s, 1})}, {{"dim", int64_t{-1}}});
      break;
    }
    case OpKind::kCumsum:
      out = b.op(kind, {x}, {{"dim", int64_t{0}}, {"dtype", DType::kF64}});
      break;
    case OpKind::kTopk:
      out = b.op(kind, {x}, {{"k", int64_t{3}}});
      break;
    case OpKind::kExpertOffsets:
    case OpKind::kExpertOrder:
      out = b.op(kind, {b.input(DType::kI64, {s, 2})}, {{"num_experts", int64_t{4}}});
      break;
    case OpKind::kGroupedMm: {
      ValueId offs = b.input(DType::kI32, {4});
      std::vector<ValueId> in{x, offs};
      for (int e = 0; e < 4; ++e) in.push_back(b.input(DType::kF32, {8, 5}));  // [K, N] each
      out = b.op(kind, in, {{"w_layout", int64_t{1}}});
      break;
    }
    case OpKind::kGroupedMmWgrad:
      out = b.op(kind, {b.input(DType::kF32, {s, 3}), x, b.input(DType::kI32, {4})});
      break;
    case OpKind::kSymConstant:
      out = b.op(kind, {}, {{"dtype", DType::kF16}, {"value", std::vector<SymExpr>{3 * s - 1}}});
      break;
    default:
      switch (op_info(kind).category) {
        case OpCategory::kUnary:
          out = unary();
          break;
        case OpCategory::kBinary:
        case OpCategory::kCompare:
          out = binary();
          break;
        default:
          ADD_FAILURE() << "no round-trip recipe for op " << op_name(kind);
          return {};
      }
  }
  b.output(out);
  return b.finish();
}

TEST(IrTextGolden, EveryOpRoundTrips) {
  int count = 0;
  const OpInfo* ops = all_ops(&count);
  ASSERT_GT(count, 0);
  for (int i = 0; i < count; ++i) {
    SCOPED_TRACE(std::string(ops[i].name));
    Graph g;
    try {
      g = build_one(ops[i].kind);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "GraphBuilder rejected the recipe: " << e.what();
      continue;
    }
    if (g.nodes.empty()) continue;
    EXPECT_EQ(verify_graph(g), "");
    std::string printed = print_graph(g);
    EXPECT_NE(printed.find(" = " + std::string(ops[i].name) + "("), std::string::npos) << printed;
    expect_round_trip(g, std::string(ops[i].name));
  }
}

// Random edits of the seed fixture: the parser reports or accepts, never crashes, and whatever it
// accepts round-trips.
TEST(IrTextGolden, MutatedTextNeverCrashes) {
  const std::string base = read_all(fixture_path("seed_expert_mlp.dgir"));
  const std::string alphabet = "%:=()[]{},.-+*#@ \n0123456789sfbiuxdivnmaxfloordiv";
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string t = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !t.empty(); ++k) {
      size_t at = rng() % t.size();
      switch (rng() % 4) {
        case 0:
          t[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          t.erase(at, 1 + rng() % 8);
          break;
        case 2:
          t.insert(at, 1, static_cast<char>(rng() % 256));
          break;
        default:
          t.insert(at, t.substr(rng() % t.size(), rng() % 40));
          break;
      }
    }
    ParseResult r = parse_graph_text(t);
    if (!r.ok()) {
      EXPECT_EQ(r.error.rfind("line ", 0), 0u) << r.error;
      continue;
    }
    ++accepted;
    expect_round_trip(r.graph, "mutation " + std::to_string(i));
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace dg
