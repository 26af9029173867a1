// Rejections: the parser (Note [Text parser robustness]) and the verifier turn bad input into one
// clear message, "line N: ..." for text, never a crash or an escaping exception.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "ir/text_format.h"
#include "ir/verifier.h"

namespace dg {
namespace {

struct Bad {
  const char* what;
  std::string text;
  int line;            // the line the error must name
  const char* expect;  // a substring of the message
};

// Line 1 is the graph line, 2 the symbol, 3 and 4 inputs; the case's text starts on line 5.
std::string with_header(const std::string& body) {
  return "graph @bad\nsym s in [2, inf] div 1\ninput %x: f32[s, 4]\ninput %v: f32[4]\n" + body;
}

std::string nested(int depth) {
  return std::string(static_cast<size_t>(depth), '(') + "s" +
         std::string(static_cast<size_t>(depth), ')');
}

void PrintTo(const Bad& bad, std::ostream* os) { *os << bad.what; }

class IrTextReject : public ::testing::TestWithParam<Bad> {};

TEST_P(IrTextReject, ClearMessage) {
  const Bad& bad = GetParam();
  ParseResult r = parse_graph_text(bad.text);
  ASSERT_FALSE(r.ok()) << bad.what << ": accepted\n" << bad.text;
  EXPECT_EQ(r.error.rfind("line " + std::to_string(bad.line) + ": ", 0), 0u)
      << bad.what << ": " << r.error;
  EXPECT_NE(r.error.find(bad.expect), std::string::npos) << bad.what << ": " << r.error;
  EXPECT_TRUE(r.graph.nodes.empty() && r.graph.values.empty());
}

const Bad kBad[] = {
    // symbols
    {"undeclared symbol", "graph @g\ninput %x: f32[t, 4]\noutput %x\n", 2, "undeclared symbol 't'"},
    {"symbol declared twice", "sym s in [2, inf]\nsym s in [2, inf]\n", 2, "declared twice"},
    {"empty range", "sym s in [5, 2]\n", 1, "empty range"},
    {"one-value symbol", "sym s in [4, 4]\n", 1, "single value 4"},
    {"divisor zero", "sym s in [2, 9] div 0\n", 1, "divisor below 1"},
    {"reserved symbol name", "sym max in [2, 9]\n", 1, "cannot be a symbol name"},
    {"lower bound inf", "sym s in [inf, 9]\n", 1, "lower bound cannot be inf"},
    {"range literal overflow", "sym s in [0, 99999999999999999999]\n", 1, "out of range"},
    // values
    {"use before def", with_header("%a: f32[s, 4] = exp(%b)\n%b: f32[s, 4] = exp(%x)\noutput %a\n"),
     5, "%b is used before its definition on line 6"},
    {"use of itself", with_header("%a: f32[s, 4] = exp(%a)\noutput %a\n"), 5, "used before"},
    {"dangling operand", with_header("%a: f32[s, 4] = exp(%7)\noutput %a\n"), 5,
     "%7 is not defined"},
    {"dangling output", with_header("%a: f32[s, 4] = exp(%x)\noutput %a, %nope\n"), 6,
     "%nope is not defined"},
    {"defined twice", with_header("%x: f32[s, 4] = exp(%x)\noutput %x\n"), 5,
     "%x is defined twice (first on line 3)"},
    {"symbolic output", "graph @g\nsym s in [2, inf]\ninput %n: sym s\noutput %n\n", 4,
     "outputs are tensors"},
    {"missing output", with_header("%a: f32[s, 4] = exp(%x)\n"), 5, "missing the output line"},
    {"statement after output", with_header("output %x\n%a: f32[s, 4] = exp(%x)\n"), 6,
     "after the output line"},
    {"graph line not first", with_header("graph @again\n"), 5, "must come first"},
    // ops and types
    {"unknown op", with_header("%a: f32[s, 4] = frobnicate(%x)\noutput %a\n"), 5,
     "unknown op 'frobnicate'"},
    {"bad arity", with_header("%a: f32[s, 4] = exp(%x, %x)\noutput %a\n"), 5,
     "exp: takes 1 operands, got 2"},
    {"wrong declared dtype", with_header("%a: f16[s, 4] = exp(%x)\noutput %a\n"), 5,
     "%a is declared f16[s, 4] but exp gives f32[s, 4]"},
    {"wrong declared shape", with_header("%a: f32[s, 5] = exp(%x)\noutput %a\n"), 5,
     "but exp gives f32[s, 4]"},
    {"broadcast mismatch", with_header("%a: f32[s, 4] = add(%x, %y)\noutput %a\n"), 5,
     "%y is not defined"},
    {"broadcast mismatch",
     with_header("input %y: f32[s, 3]\n%a: f32[s, 4] = add(%x, %y)\noutput %a\n"), 6,
     "do not broadcast"},
    {"unknown dtype", with_header("%a: f33[s, 4] = exp(%x)\noutput %a\n"), 5,
     "unknown dtype 'f33'"},
    {"absurd rank", with_header("input %r: f32[1, 1, 1, 1, 1, 1, 1, 1, 1]\noutput %r\n"), 5,
     "rank above the limit 8"},
    {"negative dim", with_header("input %r: f32[-3]\noutput %r\n"), 5,
     "dimension -3 may be negative"},
    {"maybe negative dim", with_header("input %r: f32[4 - s]\noutput %r\n"), 5, "may be negative"},
    {"missing attribute", with_header("%a: f32[4] = sum(%x)\noutput %a\n"), 5,
     "missing attribute dims"},
    {"attribute twice", with_header("%a: f32[4] = sum(%x) {dims = [0], dims = [0]}\noutput %a\n"),
     5, "attribute dims given twice"},
    {"unknown attribute value", with_header("%a: f32[4] = sum(%x) {dims = zero}\noutput %a\n"), 5,
     "unknown attribute value 'zero'"},
    {"int list literal overflow",
     with_header("%a: f32[4] = sum(%x) {dims = [9223372036854775808]}\noutput %a\n"), 5,
     "out of range"},
    {"float overflow",
     with_header("%c: f32[] = constant() {dtype = f32, value = 1e999}\noutput %c\n"), 5,
     "float literal 1e999 is out of range"},
    {"malformed number",
     with_header("%c: f32[] = constant() {dtype = f32, value = 1.5e}\noutput %c\n"), 5,
     "malformed number"},
    {"unterminated operands", with_header("%a: f32[s, 4] = exp(%x\noutput %a\n"), 5,
     "expected ')'"},
    {"trailing junk", with_header("%a: f32[s, 4] = exp(%x) extra\noutput %a\n"), 5,
     "unexpected 'extra'"},
    {"unknown statement", with_header("let %a = 1\n"), 5, "expected 'graph', 'sym', 'input'"},
    {"binary garbage", with_header(std::string("input %r: f32[s\0\xff]\n", 20)), 5, "byte 0x00"},
    // expressions
    {"dangling operator", with_header("input %r: f32[s +]\noutput %r\n"), 5,
     "expected an expression"},
    {"unclosed paren", with_header("input %r: f32[(s]\noutput %r\n"), 5,
     "expected ')' to close '('"},
    {"missing operator", with_header("input %r: f32[s s]\noutput %r\n"), 5, "expected ']'"},
    {"one-argument function", with_header("input %r: f32[floordiv(s)]\noutput %r\n"), 5,
     "expected ',' between the arguments of floordiv"},
    {"unknown function", with_header("input %r: f32[ceil(s, 2)]\noutput %r\n"), 5,
     "unknown function 'ceil'"},
    {"fractional dim", with_header("input %r: f32[2.5]\noutput %r\n"), 5, "expected ']'"},
    {"division by zero", with_header("input %r: f32[floordiv(s, 0)]\noutput %r\n"), 5,
     "floordiv by zero"},
    {"modulo by symbolic zero", with_header("input %r: f32[mod(s, s - s)]\noutput %r\n"), 5,
     "mod by zero"},
    {"literal overflow", with_header("input %r: f32[99999999999999999999]\noutput %r\n"), 5,
     "integer literal 99999999999999999999 is out of range"},
    {"arithmetic overflow", with_header("input %r: f32[9223372036854775807 + 1]\noutput %r\n"), 5,
     "integer overflow"},
    {"coefficient overflow", with_header("input %r: f32[s * 9223372036854775807 * 2]\noutput %r\n"),
     5, "integer overflow"},
    {"dim beyond int64", with_header("input %r: f32[9223372036854775807 + s]\noutput %r\n"), 5,
     "exceeds the int64 range"},
    {"INT64_MIN / -1", with_header("input %n: sym floordiv(-9223372036854775808, -1)\noutput %x\n"),
     5, "integer overflow"},
    {"deep nesting", with_header("input %r: f32[" + nested(100) + "]\noutput %r\n"), 5,
     "nested deeper than 64"},
    {"deep unary minus", with_header("input %n: sym " + std::string(200, '-') + "s\noutput %x\n"),
     5, "nested deeper than 64"},
    {"deep function nesting",
     with_header("input %n: sym " +
                 [] {
                   std::string e = "s";
                   for (int i = 0; i < 80; ++i) e = "max(" + e + ", 1)";
                   return e;
                 }() +
                 "\noutput %x\n"),
     5, "nested deeper than 64"},
    {"expression blow-up",
     [] {
       std::string t = "graph @g\n", e;
       for (int i = 0; i < 12; ++i) {
         t += "sym a" + std::to_string(i) + " in [0, 9]\n";
         e += (i ? " * " : "") + std::string("(a") + std::to_string(i) + " + 1)";
       }
       return t + "input %n: sym " + e + "\n";
     }(),
     14, "expression grows past"},
};

INSTANTIATE_TEST_SUITE_P(All, IrTextReject, ::testing::ValuesIn(kBad),
                         [](const ::testing::TestParamInfo<Bad>& info) {
                           std::string name = std::to_string(info.index) + "_" + info.param.what;
                           for (char& c : name)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(IrTextRejectHuge, InputOverTheSizeLimit) {
  ParseResult r = parse_graph_text(std::string((size_t{64} << 20) + 1, ' '));
  EXPECT_EQ(r.error.rfind("line 1: input is too large", 0), 0u) << r.error;
}

TEST(IrTextAccept, NestingUpToTheLimitAndExtremeLiterals) {
  std::string text = with_header("input %r: f32[" + nested(60) + "]\n" +
                                 "input %n: sym -9223372036854775808 + s\n" +
                                 "input %m: sym s - 9223372036854775808\noutput %r\n");
  ParseResult r = parse_graph_text(text);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.graph.value(3).sym_value, r.graph.value(4).sym_value);
  EXPECT_EQ(print_graph(parse_graph_text(print_graph(r.graph)).graph), print_graph(r.graph));
}

TEST(IrTextAccept, CrLfAndTabs) {
  ParseResult r =
      parse_graph_text("graph @g\r\nsym s in [2, inf]\r\n\tinput %x:\tf32[s]\r\noutput %x");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(print_graph(r.graph),
            "graph @g\nsym s in [2, inf] div 1\ninput %0: f32[s]\noutput %0\n");
}

// The verifier on graphs built in memory (what the FlatBuffers loader hands it).
class IrVerifier : public ::testing::Test {
 protected:
  Graph good() {
    GraphBuilder b("v");
    SymExpr s = b.symbol("s", 2);
    ValueId x = b.input(DType::kF32, {s, 4});
    ValueId y = b.op(OpKind::kExp, {x});
    b.output(b.op(OpKind::kAdd, {y, x}));
    return b.finish();
  }
};

TEST_F(IrVerifier, AcceptsTheBuildersGraph) { EXPECT_EQ(verify_graph(good()), ""); }

TEST_F(IrVerifier, Rejections) {
  auto expect_error = [](const Graph& g, const std::string& part) {
    std::string err = verify_graph(g);
    EXPECT_NE(err.find(part), std::string::npos) << "wanted '" << part << "', got '" << err << "'";
  };
  Graph g = good();
  g.nodes[0].inputs[0] = 99;
  expect_error(g, "operand %99 does not exist");

  g = good();
  std::swap(g.nodes[0], g.nodes[1]);
  expect_error(g, "used before it is defined");

  g = good();
  g.values[g.nodes[0].output].type.dtype = DType::kF16;
  expect_error(g, "declared type f16[s, 4] but the op gives f32[s, 4]");

  g = good();
  g.symbols.clear();
  expect_error(g, "undeclared symbol s");

  g = good();
  g.nodes[0].inputs.push_back(g.inputs[0]);
  expect_error(g, "takes 1 operands, got 2");

  g = good();
  g.outputs = {42};
  expect_error(g, "graph output %42 is not defined");

  g = good();
  g.values[0].type.shape.assign(9, SymExpr(1));
  expect_error(g, "rank 9, above the limit 8");

  g = good();
  g.values[0].type.shape[1] = SymExpr(-4);
  expect_error(g, "may be negative");

  g = good();
  g.outputs.clear();
  expect_error(g, "no outputs");
}

}  // namespace
}  // namespace dg
