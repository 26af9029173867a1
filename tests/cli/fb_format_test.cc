// graph.fb in process: round trips, deterministic bytes, schema/code tables in agreement, and
// the compatibility check that committed v1 files keep loading (Note [graph.fb compatibility]).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "ir/fb_loader.h"
#include "ir/fb_writer.h"
#include "ir/graph_generated.h"
#include "ir/graph_hash.h"
#include "ir/graph_io.h"
#include "ir/text_format.h"
#include "tests/common/file_bytes.h"
#include "tests/common/source_tree.h"
#include "tests/common/temp_dir.h"

namespace dg {
namespace {

namespace fs = std::filesystem;

using dg::testing::read_all;
using dg::testing::repo_path;

Graph parse_file(const fs::path& p) {
  ParseResult r = parse_graph_text(read_all(p));
  EXPECT_TRUE(r.ok()) << p << ": " << r.error;
  return r.graph;
}

Graph load_bytes(const std::string& bytes) {
  LoadResult r = load_graph_fb(bytes.data(), bytes.size());
  EXPECT_TRUE(r.ok()) << r.error;
  return r.graph;
}

// Every symbol fact and attribute kind, including values the text form spells specially.
Graph all_features_graph() {
  GraphBuilder b("all_features");
  SymExpr s0 = b.symbol("s0", 2, Interval::kPosInf, 1);
  SymExpr s1 = b.symbol("s1", 16, int64_t{1} << 62, 16);
  b.symbol("neg", Interval::kNegInf, -(int64_t{1} << 62) + 5, 3);
  ValueId x = b.input(DType::kF32, {s0, s1});
  b.sym_input(max(s0, s1) - mod(s1, s0) + 7 * floordiv(s1, 16));
  ValueId c = b.op(OpKind::kConstant, {}, {{"dtype", DType::kF32}, {"value", std::nan("")}});
  ValueId y = b.op(OpKind::kMul, {x, c});
  ValueId r = b.op(OpKind::kReshape, {y}, {{"shape", std::vector<SymExpr>{s0 * s1}}});
  ValueId s =
      b.op(OpKind::kSum, {y}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", int64_t{1}}});
  b.output(r);
  b.output(s);
  return b.finish();
}

TEST(FbFormat, AllFeaturesRoundTrip) {
  Graph g = all_features_graph();
  std::string bytes = write_graph_fb(g);
  Graph back = load_bytes(bytes);
  EXPECT_EQ(print_graph(back), print_graph(g));
  EXPECT_EQ(graph_hash(back), graph_hash(g));
  EXPECT_EQ(write_graph_fb(back), bytes);  // deterministic, and a fixed point
  EXPECT_EQ(write_graph_fb(g), bytes);
}

TEST(FbFormat, FixturesRoundTrip) {
  std::vector<fs::path> files;
  for (fs::path dir : {repo_path("tests/cli"), repo_path("tests/fixtures")})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".dgir") files.push_back(e.path());
  EXPECT_GE(files.size(), 3u);
  for (const fs::path& name : files) {
    Graph g = parse_file(name);
    std::string bytes = write_graph_fb(g);
    Graph back = load_bytes(bytes);
    EXPECT_EQ(print_graph(back), print_graph(g)) << name;
    EXPECT_EQ(write_graph_fb(back), bytes) << name;
    // The symbols come back as the very same interned expressions.
    ASSERT_EQ(back.symbols.size(), g.symbols.size());
    for (size_t i = 0; i < g.symbols.size(); ++i) EXPECT_EQ(back.symbols[i], g.symbols[i]);
  }
}

// Note [graph.fb compatibility]: files written by schema revision 1 must load forever, to the
// graph their committed text form describes. Never regenerate these files; add new ones.
TEST(FbFormat, CompatV1FilesStillLoad) {
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(repo_path("tests/cli/compat"))) {
    if (entry.path().extension() != ".fb") continue;
    ++seen;
    fs::path text = entry.path();
    text.replace_extension(".dgir");
    LoadResult r = load_graph_file(entry.path().string());
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(print_graph(r.graph), print_graph(parse_file(text))) << entry.path();
    Graph again = load_bytes(write_graph_fb(r.graph));
    EXPECT_EQ(print_graph(again), print_graph(r.graph)) << entry.path();
  }
  EXPECT_GE(seen, 3);
}

TEST(FbFormat, DtypeCodesMatchSchema) {
  for (uint32_t code = 0; code < 256; ++code) {
    auto d = dtype_from_code(code);
    std::string fb_name = fb::EnumNameDType(static_cast<fb::DType>(code));
    bool in_schema = code != 0 && !fb_name.empty();
    EXPECT_EQ(d.has_value(), in_schema) << "dtype code " << code << " (" << fb_name << ")";
    if (d) {
      std::string ours(dtype_name(*d));
      for (char& ch : ours) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      for (char& ch : fb_name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      EXPECT_EQ(ours, fb_name) << "dtype code " << code;
    }
  }
}

TEST(FbFormat, OpCodesAreTheCatalogCodes) {
  int n = 0;
  const OpInfo* ops = all_ops(&n);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(op_from_code(static_cast<uint32_t>(ops[i].kind)), ops[i].kind);
  EXPECT_FALSE(op_from_code(0));
  EXPECT_FALSE(op_from_code(static_cast<uint32_t>(n) + 1));
}

TEST(FbFormat, FileIdentifierAndVersion) {
  std::string bytes = write_graph_fb(all_features_graph());
  EXPECT_EQ(bytes.substr(4, 4), "DGIR");
  EXPECT_EQ(fb::GetGraph(bytes.data())->version(), kGraphFbVersion);
}

TEST(FbFormat, UnalignedInputLoads) {
  std::string bytes = write_graph_fb(all_features_graph());
  std::string shifted = "x" + bytes;
  LoadResult r = load_graph_fb(shifted.data() + 1, bytes.size());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(print_graph(r.graph), print_graph(all_features_graph()));
}

TEST(FbFormat, WriterRejectsUndeclaredSymbol) {
  Graph g = all_features_graph();
  g.symbols.erase(g.symbols.begin());
  EXPECT_THROW(write_graph_fb(g), std::invalid_argument);
}

TEST(FbFormat, SaveAndLoadFilesByExtension) {
  dg::testing::TempDir tmp;
  fs::path dir = tmp.path();
  Graph g = all_features_graph();
  for (const char* name : {"g.fb", "g.dgir", "g.txt"}) {
    std::string path = (dir / name).string();
    ASSERT_EQ(save_graph_file(path, g), "");
    LoadResult r = load_graph_file(path);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(print_graph(r.graph), print_graph(g)) << name;
  }
  EXPECT_EQ(read_all(dir / "g.fb"), write_graph_fb(g));
  EXPECT_EQ(read_all(dir / "g.dgir"), print_graph(g));
  LoadResult missing = load_graph_file((dir / "missing.fb").string());
  EXPECT_EQ(missing.error.rfind((dir / "missing.fb").string() + ": ", 0), 0u) << missing.error;
  std::string bad = save_graph_file((dir / "no_such_dir" / "x.fb").string(), g);
  EXPECT_NE(bad.find("no_such_dir"), std::string::npos) << bad;
}

}  // namespace
}  // namespace dg
