// `dyngen inspect|convert|hash` run as a separate process: output, round trips between IR text
// and graph.fb, hashes, and the exit codes and one-line errors of Note [dyngen exit codes].
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/common/cli_process.h"
#include "tests/common/file_bytes.h"
#include "tests/common/source_tree.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using Proc = dg::testing::SpawnedCli;
using dg::testing::read_all;
using dg::testing::repo_path;
using dg::testing::write_all;

class CliTest : public ::testing::Test {
 protected:
  fs::path fixture(const std::string& name) const { return repo_path("tests/cli/" + name); }
  fs::path tmp(const std::string& name) const { return dir_ / name; }

  // Runs dyngen with `args`; stdout is closed instead of captured when `close_stdout`.
  Proc dyngen(std::vector<std::string> args, bool close_stdout = false) const {
    return dg::testing::spawn_cli(std::move(args), dir_, close_stdout);
  }

  // Invalid input: exit 2, nothing on stdout, one line "dyngen: PATH: ..." on stderr.
  void expect_invalid(const fs::path& path, const std::string& command = "inspect") const {
    Proc r = dyngen({command, path.string()});
    EXPECT_EQ(r.signal, 0) << path;
    EXPECT_EQ(r.code, 2) << path << "\n" << r.err;
    EXPECT_EQ(r.out, "") << path;
    std::string prefix = "dyngen: " + path.string() + ": ";
    EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  }

  dg::testing::TempDir work_;
  fs::path dir_ = work_.path();
};

TEST_F(CliTest, HelpAndVersion) {
  Proc h = dyngen({"--help"});
  EXPECT_EQ(h.code, 0);
  for (const char* cmd : {"inspect", "convert", "hash"})
    EXPECT_NE(h.out.find(cmd), std::string::npos);
  Proc v = dyngen({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("dyngen ", 0), 0u) << v.out;
  for (const char* cmd : {"inspect", "convert", "hash"}) EXPECT_EQ(dyngen({cmd, "--help"}).code, 0);
}

TEST_F(CliTest, UsageErrorsAreOneLineExit2) {
  for (std::vector<std::string> args : {std::vector<std::string>{},
                                        {"frobnicate"},
                                        {"inspect"},
                                        {"inspect", "a", "b"},
                                        {"convert", "a"},
                                        {"hash", "--bogus"}}) {
    Proc r = dyngen(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("dyngen: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

// The CLI fixtures, and the shared seed fixtures in tests/fixtures.
std::vector<fs::path> text_fixtures() {
  std::vector<fs::path> out;
  for (const char* name : {"lora_mlp", "exprs", "ops_mix"})
    out.push_back(repo_path("tests/cli/" + std::string(name) + ".dgir"));
  for (const auto& e : fs::directory_iterator(repo_path("tests/fixtures")))
    if (e.path().extension() == ".dgir") out.push_back(e.path());
  return out;
}

TEST_F(CliTest, ConvertRoundTripTextFbText) {
  for (const fs::path& text : text_fixtures()) {
    std::string name = text.stem().string();
    Proc printed = dyngen({"inspect", text.string()});
    ASSERT_EQ(printed.code, 0) << printed.err;
    fs::path fb = tmp(std::string(name) + ".fb"), back = tmp(std::string(name) + ".dgir");
    ASSERT_EQ(dyngen({"convert", text.string(), fb.string()}).code, 0);
    ASSERT_EQ(dyngen({"convert", fb.string(), back.string()}).code, 0);
    EXPECT_EQ(read_all(back), printed.out) << name;
    Proc from_fb = dyngen({"inspect", fb.string()});
    EXPECT_EQ(from_fb.code, 0);
    EXPECT_EQ(from_fb.out, printed.out) << name;
    // fb -> fb is byte-identical.
    fs::path fb2 = tmp(std::string(name) + "_2.fb");
    ASSERT_EQ(dyngen({"convert", fb.string(), fb2.string()}).code, 0);
    EXPECT_EQ(read_all(fb2), read_all(fb)) << name;
  }
}

TEST_F(CliTest, HashSameForTextAndFb) {
  for (const fs::path& text : text_fixtures()) {
    fs::path fb = tmp(text.stem().string() + ".fb");
    ASSERT_EQ(dyngen({"convert", text.string(), fb.string()}).code, 0) << text;
    Proc a = dyngen({"hash", text.string()}), b = dyngen({"hash", fb.string()});
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, b.out) << text;
  }
}

TEST_F(CliTest, HashStableAcrossProcessesFormatsAndSymbolNames) {
  fs::path text = fixture("lora_mlp.dgir"), fb = tmp("g.fb");
  ASSERT_EQ(dyngen({"convert", text.string(), fb.string()}).code, 0);
  Proc a = dyngen({"hash", text.string()}), b = dyngen({"hash", text.string()});
  Proc c = dyngen({"hash", fb.string()});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out.size(), 65u) << a.out;  // 64 hex digits and a newline
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out, c.out);
  // Dynamo names its symbols per process (s77, s12, ...): the hash does not depend on them.
  std::string renamed = read_all(text);
  for (size_t p; (p = renamed.find("s0")) != std::string::npos;) renamed.replace(p, 2, "s77");
  write_all(tmp("renamed.dgir"), renamed);
  EXPECT_EQ(dyngen({"hash", tmp("renamed.dgir").string()}).out, a.out);
  // A different static dim is a different graph.
  std::string changed = read_all(text);
  for (size_t p; (p = changed.find("[16, 64]")) != std::string::npos;)
    changed.replace(p, 8, "[8, 64]");
  for (size_t p; (p = changed.find("[128, 16]")) != std::string::npos;)
    changed.replace(p, 9, "[128, 8]");
  for (size_t p; (p = changed.find("[s0, 16]")) != std::string::npos;)
    changed.replace(p, 8, "[s0, 8]");
  write_all(tmp("changed.dgir"), changed);
  Proc d = dyngen({"hash", tmp("changed.dgir").string()});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out, a.out);
}

TEST_F(CliTest, BadFilesExit2WithOneLine) {
  fs::path text = fixture("lora_mlp.dgir"), fb = tmp("good.fb");
  ASSERT_EQ(dyngen({"convert", text.string(), fb.string()}).code, 0);
  std::string bytes = read_all(fb);

  write_all(tmp("truncated.fb"), bytes.substr(0, bytes.size() / 2));
  expect_invalid(tmp("truncated.fb"));
  std::string flipped = bytes;
  flipped[5] ^= 0x10;  // inside the file identifier
  write_all(tmp("flipped_id.fb"), flipped);
  expect_invalid(tmp("flipped_id.fb"));
  write_all(tmp("garbage.fb"), std::string(300, '\x5a'));
  expect_invalid(tmp("garbage.fb"));
  write_all(tmp("empty.fb"), "");
  expect_invalid(tmp("empty.fb"));
  write_all(tmp("empty.dgir"), "");
  expect_invalid(tmp("empty.dgir"));
  write_all(tmp("binary_as_text.dgir"), bytes);
  expect_invalid(tmp("binary_as_text.dgir"));
  write_all(tmp("bad.dgir"), "graph @g\ninput %0: f32[4]\n%1: f32[5] = neg(%0)\noutput %1\n");
  expect_invalid(tmp("bad.dgir"));
  expect_invalid(tmp("missing.fb"));
  expect_invalid(tmp("missing.dgir"), "hash");
  expect_invalid(dir_, "hash");  // a folder
  expect_invalid(tmp("truncated.fb"), "hash");

  // Bit flips anywhere: a clean load or a one-line exit 2, never a signal.
  std::mt19937 rng(1234);
  for (int i = 0; i < 40; ++i) {
    std::string m = bytes;
    m[rng() % m.size()] ^= static_cast<char>(1u << (rng() % 8));
    fs::path p = tmp("flip" + std::to_string(i) + ".fb");
    write_all(p, m);
    Proc r = dyngen({"inspect", p.string()});
    EXPECT_EQ(r.signal, 0);
    EXPECT_TRUE(r.code == 0 || r.code == 2) << r.code << " " << r.err;
    if (r.code == 2) {
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    }
  }
}

TEST_F(CliTest, ConvertToUnwritablePathExit2) {
  fs::path out = tmp("no_such_dir") / "x.fb";
  Proc r = dyngen({"convert", fixture("lora_mlp.dgir").string(), out.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("dyngen: " + out.string() + ": ", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// The fuzzer's finding (issue: a graph dyngen writes must load again): a 0-d `full` whose empty
// `shape` list the writer leaves 4 bytes off an 8-byte boundary.
TEST_F(CliTest, ConvertedFileInspectsAsTheOriginal) {
  fs::path in = repo_path("tests/fuzz/corpus/roundtrip_misaligned_empty_shape.fb");
  fs::path out = tmp("rt.fb");
  Proc first = dyngen({"inspect", in.string()});
  ASSERT_EQ(first.code, 0) << first.err;
  ASSERT_EQ(dyngen({"convert", in.string(), out.string()}).code, 0);
  Proc again = dyngen({"inspect", out.string()});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, first.out);
}

// A constant the text form holds and graph.fb cannot is refused by the writer, not written.
TEST_F(CliTest, ConvertRefusesAConstantBeyondTheFormat) {
  fs::path text = tmp("big.dgir"), out = tmp("big.fb");
  write_all(text,
            "graph @big\nsym s in [2, inf] div 1\ninput %n: sym s - 9223372036854775807 - 1\n"
            "input %x: f32[s]\noutput %x\n");
  Proc r = dyngen({"convert", text.string(), out.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("beyond +-2^62"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliTest, ClosedStdoutIsAnErrorNotASignal) {
  Proc r = dyngen({"inspect", fixture("lora_mlp.dgir").string()}, /*close_stdout=*/true);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.code, 1) << r.err;
}

TEST_F(CliTest, CompatFilesInspect) {
  int seen = 0;
  for (const auto& e : fs::directory_iterator(fixture("compat"))) {
    if (e.path().extension() != ".fb") continue;
    ++seen;
    fs::path text = e.path();
    text.replace_extension(".dgir");
    Proc r = dyngen({"inspect", e.path().string()});
    ASSERT_EQ(r.code, 0) << r.err;
    Proc t = dyngen({"inspect", text.string()});
    EXPECT_EQ(r.out, t.out) << e.path();
    EXPECT_EQ(dyngen({"hash", e.path().string()}).out, dyngen({"hash", text.string()}).out);
  }
  EXPECT_GE(seen, 3);
}

TEST_F(CliTest, CacheCommandIsDispatchedWhenBuilt) {
  Proc r = dyngen({"cache", "--help"});
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
