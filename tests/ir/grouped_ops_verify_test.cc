// The grouped-experts ops (Note [Grouped experts ops]) in the IR: their result types, and the
// builder's and verifier's clear messages for malformed uses.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "ir/graph_hash.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace dg {
namespace {

// "graph ... ; %y = <op line>" parsed; returns the parse error ("" when it parses and verifies).
std::string parse_error(const std::string& op_lines) {
  std::string text =
      "graph @g\nsym s in [1, inf] div 1\ninput %a: bf16[s, 8]\ninput %g: bf16[s, 6]\n"
      "input %idx: i64[s, 2]\ninput %offs: i32[4]\ninput %wf: bf16[4, 6, 8]\n"
      "input %w0: bf16[6, 8]\ninput %w1: bf16[6, 8]\ninput %w2: bf16[6, 8]\n"
      "input %w3: bf16[6, 8]\ninput %wt: bf16[8, 6]\ninput %f: f32[6, 8]\n" +
      op_lines + "output %y\n";
  ParseResult r = parse_graph_text(text);
  if (!r.ok()) return r.error;
  return verify_graph(r.graph);
}

TEST(IrGroupedOps, WellFormedUsesTypeAsTheContractSays) {
  EXPECT_EQ(parse_error("%y: i32[4] = expert_offsets(%idx) {num_experts = 4}\n"), "");
  EXPECT_EQ(parse_error("%y: i32[2*s] = expert_order(%idx) {num_experts = 4}\n"), "");
  EXPECT_EQ(parse_error("%y: bf16[s, 6] = grouped_mm(%a, %offs, %wf) {w_layout = 0}\n"), "");
  EXPECT_EQ(
      parse_error("%y: bf16[s, 6] = grouped_mm(%a, %offs, %w0, %w1, %w2, %w3) {w_layout = 0}\n"),
      "");
  EXPECT_EQ(parse_error("%y: bf16[s, 8] = grouped_mm(%g, %offs, %wf) {w_layout = 1}\n"), "");
  EXPECT_EQ(parse_error("%y: bf16[4, 6, 8] = grouped_mm_wgrad(%g, %a, %offs)\n"), "");
}

struct Malformed {
  const char* what;
  std::string line;
  const char* expect;
};

TEST(IrGroupedOps, MalformedUsesAreRejectedWithAClearMessage) {
  const Malformed cases[] = {
      {"float index", "%y: i32[4] = expert_offsets(%a) {num_experts = 4}\n",
       "expert_offsets: top_k_index must be i64 or i32"},
      {"no expert count", "%y: i32[4] = expert_offsets(%idx)\n", "missing attribute num_experts"},
      {"zero experts", "%y: i32[0] = expert_order(%idx) {num_experts = 0}\n",
       "num_experts must be >= 1"},
      {"offsets of the wrong length", "%y: i32[5] = expert_offsets(%idx) {num_experts = 4}\n",
       "declared"},
      {"offs not i32", "%y: bf16[s, 6] = grouped_mm(%a, %idx, %wf) {w_layout = 0}\n",
       "offs must be i32[E]"},
      {"no layout", "%y: bf16[s, 6] = grouped_mm(%a, %offs, %wf)\n", "w_layout must be 0"},
      {"G neither 1 nor E", "%y: bf16[s, 6] = grouped_mm(%a, %offs, %w0, %w1) {w_layout = 0}\n",
       "takes 1 fused weight [E, ...] or E = 4 per-expert weights, got 2"},
      {"E differs between offs and weight",
       "%o3: i32[3] = expert_offsets(%idx) {num_experts = 3}\n"
       "%y: bf16[s, 6] = grouped_mm(%a, %o3, %wf) {w_layout = 0}\n",
       "the fused weight's first dim must be E = 3"},
      {"weight dtype", "%y: bf16[s, 6] = grouped_mm(%a, %offs, %f, %f, %f, %f) {w_layout = 0}\n",
       "weights must have a's dtype bf16"},
      {"per-expert shapes differ",
       "%y: bf16[s, 6] = grouped_mm(%a, %offs, %w0, %w1, %wt, %w3) {w_layout = 0}\n",
       "per-expert weights differ in shape"},
      {"inner dims (layout)", "%y: bf16[s, 6] = grouped_mm(%a, %offs, %wf) {w_layout = 1}\n",
       "inner dims differ"},
      {"a not a matrix", "%y: bf16[s, 6] = grouped_mm(%idx, %offs, %wf) {w_layout = 0}\n",
       "a must be a bf16, f16 or f32 matrix"},
      {"too few operands", "%y: bf16[s, 6] = grouped_mm(%a, %offs) {w_layout = 0}\n",
       "takes 3 or more operands"},
      {"wgrad rows differ",
       "%x2: bf16[4, 8] = slice(%w0) {dim = 0, start = sym[0], end = sym[4], step = 1}\n"
       "%y: bf16[4, 6, 8] = grouped_mm_wgrad(%g, %x2, %offs)\n",
       "x must be bf16[s, K]"},
      {"wgrad dtype", "%y: bf16[4, 6, 8] = grouped_mm_wgrad(%g, %idx, %offs)\n", "x must be bf16"},
  };
  for (const Malformed& c : cases) {
    std::string err = parse_error(c.line);
    EXPECT_NE(err.find(c.expect), std::string::npos)
        << c.what << ": wanted '" << c.expect << "', got '" << err << "'";
  }
}

TEST(IrGroupedOps, BuilderRejectsAndTheHashSeesTheLayout) {
  GraphBuilder b("g");
  SymExpr s = b.symbol("s", 1);
  ValueId a = b.input(DType::kF32, {s, 8});
  ValueId offs = b.input(DType::kI32, {2});
  ValueId w = b.input(DType::kF32, {2, 8, 8});
  EXPECT_THROW(b.op(OpKind::kGroupedMm, {a, offs, w}, {{"w_layout", int64_t{2}}}),
               std::invalid_argument);
  auto build = [](int64_t layout) {
    GraphBuilder gb("g");
    SymExpr t = gb.symbol("s", 1);
    ValueId x = gb.input(DType::kF32, {t, 8});
    ValueId o = gb.input(DType::kI32, {2});
    gb.output(gb.op(OpKind::kGroupedMm, {x, o, gb.input(DType::kF32, {2, 8, 8})},
                    {{"w_layout", layout}}));
    return gb.finish();
  };
  EXPECT_NE(graph_hash(build(0)), graph_hash(build(1)));
  EXPECT_EQ(graph_hash(build(1)), graph_hash(build(1)));
}

}  // namespace
}  // namespace dg
