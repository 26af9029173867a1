// Whole-file reads and writes for tests: bytes in, bytes out, no text-mode translation.
#pragma once
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace dg::testing {

inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_all(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace dg::testing
