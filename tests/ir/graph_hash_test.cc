// Canonical graph hash (Note [Canonical graph hash]): invariant under symbol names, value names
// and the graph's name; sensitive to ops, dtypes, static dims, attributes and symbol facts; stable
// across processes.
#include "ir/graph_hash.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "ir/sha256.h"
#include "ir/text_format.h"
#include "tests/common/fixtures.h"

namespace dg {
namespace {

using testing::fixture_text;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::string hash_of(const std::string& text) {
  ParseResult r = parse_graph_text(text);
  EXPECT_TRUE(r.ok()) << r.error << "\n" << text;
  return r.ok() ? graph_hash(r.graph) : "";
}

// A small LoRA-style graph; each test below edits one thing in it.
const char* kBase = R"(graph @base
sym s3 in [2, inf] div 1
input %x: bf16[s3, 64]
input %w: bf16[32, 64]
input %n: sym s3
%y: bf16[s3, 32] = linear(%x, %w)
%yf: f32[s3, 32] = cast(%y) {dtype = f32}
%c: f32[] = constant() {dtype = f32, value = 2.0}
%z: f32[s3, 32] = mul(%yf, %c)
%a: f32[s3, 32] = silu(%z)
output %a
)";

TEST(IrGraphHash, SymbolNamesValueNamesAndGraphNameDoNotMatter) {
  const std::string seed = fixture_text("seed_expert_mlp.dgir");
  const std::string h = hash_of(seed);
  ASSERT_EQ(h.size(), 64u);
  EXPECT_EQ(hash_of(replace_all(seed, "s77", "s3")), h);
  EXPECT_EQ(hash_of(replace_all(seed, "s77", "tokens")), h);
  ParseResult r = parse_graph_text(seed);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(hash_of(print_graph(r.graph)), h);  // %names vs dense numbering
  r.graph.name = "layer_7_expert_12";
  EXPECT_EQ(graph_hash(r.graph), h);
  EXPECT_EQ(hash_of(replace_all(kBase, "s3", "s77")), hash_of(kBase));
}

TEST(IrGraphHash, BuilderAndTextAgree) {
  GraphBuilder b("built");
  SymExpr s = b.symbol("tokens", 2);
  ValueId x = b.input(DType::kBF16, {s, 64});
  ValueId w = b.input(DType::kBF16, {32, 64});
  b.sym_input(s);
  ValueId yf = b.op(OpKind::kCast, {b.op(OpKind::kLinear, {x, w})}, {{"dtype", DType::kF32}});
  ValueId c = b.op(OpKind::kConstant, {}, {{"dtype", DType::kF32}, {"value", 2.0}});
  b.output(b.op(OpKind::kSilu, {b.op(OpKind::kMul, {yf, c})}));
  EXPECT_EQ(graph_hash(b.finish()), hash_of(kBase));
}

TEST(IrGraphHash, EachChangeChangesTheHash) {
  const std::string h = hash_of(kBase);
  struct Edit {
    const char* what;
    std::string from, to;
  } edits[] = {
      {"op", "silu(%z)", "sigmoid(%z)"},
      {"dtype", "f32[s3, 32] = cast(%y) {dtype = f32}\n%c: f32[] = constant() {dtype = f32",
       "f64[s3, 32] = cast(%y) {dtype = f64}\n%c: f64[] = constant() {dtype = f64"},
      {"static dim", "%w: bf16[32, 64]", "%w: bf16[16, 64]"},
      {"attribute", "value = 2.0", "value = 4.0"},
      {"symbol range", "sym s3 in [2, inf]", "sym s3 in [1, inf]"},
      {"symbol divisor", "[2, inf] div 1", "[2, inf] div 8"},
      {"input order", "input %x: bf16[s3, 64]\ninput %w: bf16[32, 64]",
       "input %w: bf16[32, 64]\ninput %x: bf16[s3, 64]"},
  };
  for (const Edit& e : edits) {
    std::string text = kBase;
    ASSERT_NE(text.find(e.from), std::string::npos) << e.what;
    text = replace_all(text, e.from, e.to);
    if (std::string(e.what) == "dtype") text = replace_all(text, "f32[s3, 32]", "f64[s3, 32]");
    if (std::string(e.what) == "static dim") text = replace_all(text, "32]", "16]");
    EXPECT_NE(hash_of(text), h) << e.what << "\n" << text;
  }
}

// FIPS 180-2's examples, and the same digest fed in uneven pieces: the digest behind every graph
// hash and cache key (Note [SHA-256 from libcrypto]).
TEST(IrSha256, KnownAnswers) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(sha256_hex(two_blocks),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(sha256_hex(million),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  Sha256 h;
  for (size_t at = 0, step = 1; at < million.size(); at += step, step = step * 3 % 1000 + 1)
    h.update(million.data() + at, std::min(step, million.size() - at));
  auto d = h.finish();
  EXPECT_EQ(to_hex(d.data(), d.size()), sha256_hex(million));
}

// Recorded once from this implementation; a change here means every cached kernel is recompiled,
// so update it only on purpose.
constexpr char kSeedForwardHash[] =
    "1fe9565f99370eefdf496264b1abc6c4baf5077b1f71f38301f10253faf56ede";

TEST(IrGraphHash, StableAcrossProcesses) {
  const std::string seed = fixture_text("seed_expert_mlp.dgir");
  const std::string h = hash_of(seed);
  EXPECT_EQ(h, kSeedForwardHash);

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Intern unrelated expressions first so that node addresses and creation order differ.
    SymExpr other = SymExpr::symbol("s77", 0, 1000, 4);
    for (int i = 0; i < 1000; ++i)
      (void)(SymExpr::symbol("j" + std::to_string(i), 0, i + 1) * (i + 1) + floordiv(other, i + 2));
    std::string child = hash_of(replace_all(seed, "s77", "s9"));
    ssize_t n = write(fds[1], child.data(), child.size());
    _exit(n == static_cast<ssize_t>(child.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string got;
  char buf[128];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;)
    got.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(got, h);
}

}  // namespace
}  // namespace dg
