// The entry format (Note [Cache entry format]) and the memory cache.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "ir/sha256.h"
#include "runtime/cache_entry.h"
#include "runtime/memory_cache.h"

namespace dg {
namespace {

TEST(CacheEntry, RoundTripAndLayout) {
  const std::string key = "k1", payload = std::string(
                                    "\x7f"
                                    "ELF\0payload",
                                    12);
  const std::string e = encode_cache_entry(key, payload);
  ASSERT_EQ(e.size(), kCacheHeaderBytes + key.size() + payload.size());
  EXPECT_EQ(e.substr(0, 8), "DGKCACHE");
  EXPECT_EQ(e[8], 1);   // version, little-endian
  EXPECT_EQ(e[12], 2);  // key length
  EXPECT_EQ(e.substr(16, 2), key);
  EXPECT_EQ(e[18], 12);  // payload length
  std::string_view k = key;
  const DecodedEntry d = decode_cache_entry(e, &k);
  ASSERT_EQ(d.check, EntryCheck::kValid);
  EXPECT_EQ(d.key, key);
  EXPECT_EQ(d.payload, payload);
  EXPECT_EQ(decode_cache_entry(e, nullptr).check, EntryCheck::kValid);
}

TEST(CacheEntry, EveryDamageIsDetected) {
  const std::string key = "key", e = encode_cache_entry(key, std::string(1000, 'p'));
  std::string_view k = key;
  auto check = [&](const std::string& bytes) { return decode_cache_entry(bytes, &k).check; };

  EXPECT_EQ(check(""), EntryCheck::kNotAnEntry);
  EXPECT_EQ(check("hello, world: not an entry at all, but long enough to have a header"),
            EntryCheck::kNotAnEntry);
  for (size_t cut : {size_t{10}, size_t{40}, e.size() - 500, e.size() - 1}) {
    EXPECT_NE(check(e.substr(0, cut)), EntryCheck::kValid) << cut;
  }
  EXPECT_EQ(check(e.substr(0, e.size() - 1)), EntryCheck::kSizeMismatch);
  EXPECT_EQ(check(e + "x"), EntryCheck::kSizeMismatch);
  std::string v = e;
  v[8] = 2;
  EXPECT_EQ(check(v), EntryCheck::kUnsupportedVersion);
  std::string p = e;
  p[p.size() - 7] ^= 1;
  EXPECT_EQ(check(p), EntryCheck::kChecksumMismatch);
  std::string s = e;
  s[16 + 3 + 8 + 5] ^= 1;  // inside the stored checksum
  EXPECT_EQ(check(s), EntryCheck::kChecksumMismatch);
  std::string_view other = "kez";
  EXPECT_EQ(decode_cache_entry(e, &other).check, EntryCheck::kKeyMismatch);
  std::string kl = e;
  kl[13] = 0x7f;  // key length far past the file
  EXPECT_EQ(check(kl), EntryCheck::kBadKeyLength);
}

TEST(CacheEntry, FileNames) {
  const std::string name = entry_file_name("abc");
  EXPECT_EQ(name, sha256_hex("abc") + ".dgk");
  EXPECT_TRUE(is_entry_file_name(name));
  EXPECT_FALSE(is_temp_file_name(name));
  EXPECT_TRUE(is_temp_file_name(name + ".tmp.12.0.ff"));
  EXPECT_FALSE(is_entry_file_name(name + ".tmp.12.0.ff"));
  EXPECT_FALSE(is_entry_file_name("notes.dgk"));
  EXPECT_FALSE(is_entry_file_name(std::string(64, 'A') + ".dgk"));
  EXPECT_FALSE(is_temp_file_name("notes.txt"));
}

TEST(MemoryCache, PutGetEraseReplace) {
  MemoryCache m;
  EXPECT_FALSE(m.get("a"));
  m.put("a", "1");
  m.put("a", "22");
  EXPECT_EQ(m.get("a"), "22");
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.bytes(), 3u);
  EXPECT_TRUE(m.erase("a"));
  EXPECT_FALSE(m.erase("a"));
  EXPECT_EQ(m.bytes(), 0u);
}

TEST(MemoryCache, EvictsLeastRecentlyUsedPastBudget) {
  MemoryCache m(30);
  m.put("a", std::string(9, 'a'));  // 10 bytes each
  m.put("b", std::string(9, 'b'));
  m.put("c", std::string(9, 'c'));
  ASSERT_TRUE(m.get("a"));  // a is now the most recent; b the least
  m.put("d", std::string(9, 'd'));
  EXPECT_FALSE(m.get("b"));
  EXPECT_TRUE(m.get("a"));
  EXPECT_TRUE(m.get("c"));
  EXPECT_TRUE(m.get("d"));
  m.put("huge", std::string(100, 'h'));  // larger than the budget: not kept, nothing evicted
  EXPECT_FALSE(m.get("huge"));
  EXPECT_EQ(m.size(), 3u);
}

TEST(MemoryCache, ThreadSafe) {
  MemoryCache m(1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = "k" + std::to_string((i * 7 + t) % 64);
        if (auto v = m.get(key)) {
          EXPECT_EQ(*v, key + "-value");
        }
        m.put(key, key + "-value");
        if (i % 100 == 0) m.erase(key);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(m.size(), 64u);
}

}  // namespace
}  // namespace dg
