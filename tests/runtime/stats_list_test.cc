// The runtime's counters are one list (runtime/dyngen_stats.def): the C struct dg_stats, the C++
// record RuntimeStats and the C API's description of them (dg_stats_count, _name, _doc, _values)
// must follow it in count and order. Every check walks the list itself, so a counter added there
// is checked here without a line of this file changing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>

#include "runtime/dyngen.h"
#include "runtime/runtime_stats.h"

namespace {

struct Listed {
  const char* name;
  const char* doc;
  size_t c_offset;   // offsetof(dg_stats, name)
  size_t cc_offset;  // offsetof(RuntimeStats, name)
  int enumerator;    // Stat::name
};

const Listed kListed[] = {
#define DG_STAT(name, doc)                                                 \
  {#name, doc, offsetof(dg_stats, name), offsetof(dg::RuntimeStats, name), \
   static_cast<int>(dg::Stat::name)},
#include "runtime/dyngen_stats.def"
#undef DG_STAT
};
constexpr int kListedCount = sizeof(kListed) / sizeof(kListed[0]);

TEST(StatsList, StructRecordAndCApiFollowTheListInOrder) {
  ASSERT_EQ(dg_stats_count(), kListedCount);
  ASSERT_EQ(dg::kStatCount, kListedCount);
  EXPECT_EQ(sizeof(dg_stats), kListedCount * sizeof(int64_t));
  EXPECT_EQ(sizeof(dg::RuntimeStats), sizeof(dg_stats));
  for (int i = 0; i < kListedCount; ++i) {
    const Listed& s = kListed[i];
    SCOPED_TRACE(s.name);
    EXPECT_STREQ(dg_stats_name(i), s.name);
    EXPECT_STREQ(dg_stats_doc(i), s.doc);
    EXPECT_GT(std::strlen(s.doc), 0u) << "each counter says what it counts";
    EXPECT_EQ(s.c_offset, i * sizeof(int64_t));
    EXPECT_EQ(s.cc_offset, i * sizeof(int64_t));
    EXPECT_EQ(s.enumerator, i);
  }
  EXPECT_EQ(dg_stats_name(kListedCount), nullptr);
  EXPECT_EQ(dg_stats_name(-1), nullptr);
  EXPECT_EQ(dg_stats_doc(kListedCount), nullptr);
}

// A compile moves several counters, each by its own amount; dg_get_stats and dg_stats_values
// must then agree field for field.
TEST(StatsList, ValuesComeInTheStructsOrder) {
  char dir_template[] = "/tmp/dg_stats_list_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  dg_reset_stats();
  dg_graph* g = nullptr;
  ASSERT_EQ(dg_graph_load_text("graph @g\nsym s in [1, inf] div 1\ninput %x: f32[s, 8]\n"
                               "%y: f32[s, 8] = exp(%x)\noutput %y\n",
                               &g),
            DG_OK)
      << dg_last_error();
  dg_compile_options opts = {};
  opts.target = "sm_80";  // NVRTC only: no GPU needed
  opts.cache_dir = dir_template;
  for (int repeat = 0; repeat < 2; ++repeat) {
    dg_executable* e = nullptr;
    ASSERT_EQ(dg_compile(g, &opts, &e), DG_OK) << dg_last_error();
    dg_executable_free(e);
  }
  dg_graph_free(g);

  dg_stats s;
  dg_get_stats(&s);
  EXPECT_EQ(s.graphs_compiled, 2);
  EXPECT_EQ(s.nvrtc_compiles, 1);
  EXPECT_EQ(s.cache_misses, 1);
  EXPECT_EQ(s.cache_hits_memory, 1);  // the repeat
  EXPECT_GT(s.compile_time_us, 0);
  std::array<int64_t, kListedCount> fields;
  std::memcpy(fields.data(), &s, sizeof(s));
  std::array<int64_t, kListedCount + 1> values;
  values.fill(-7);
  dg_stats_values(values.data(), kListedCount + 1);  // writes no more than there are
  for (int i = 0; i < kListedCount; ++i) EXPECT_EQ(values[i], fields[i]) << kListed[i].name;
  EXPECT_EQ(values[kListedCount], -7);

  dg_reset_stats();
  dg_get_stats(&s);
  EXPECT_EQ(s.graphs_compiled, 0);
  std::filesystem::remove_all(dir_template);
}

}  // namespace
