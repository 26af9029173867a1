#include "runtime/cache_key.h"

#include <array>

namespace dg {
namespace {

constexpr std::string_view kHeader = "dyngen-kernel-cache-v2";
constexpr std::array<std::string_view, 5> kFields = {"dyngen", "arch", "compiler", "headers",
                                                     "source"};

std::string* field(KernelKeyParts* p, size_t i) {
  std::string* fields[] = {&p->version, &p->arch, &p->compiler, &p->headers_digest,
                           &p->source_digest};
  return fields[i];
}

}  // namespace

std::string kernel_cache_key(const KernelKeyParts& parts) {
  KernelKeyParts copy = parts;
  std::string key(kHeader);
  for (size_t i = 0; i < kFields.size(); ++i) {
    key += "\n";
    key += kFields[i];
    key += " ";
    // A newline inside a value would make the text ambiguous; none of ours has one.
    for (char c : *field(&copy, i)) key += c == '\n' ? ' ' : c;
  }
  return key;
}

bool parse_kernel_cache_key(std::string_view key, KernelKeyParts* parts) {
  KernelKeyParts out;
  size_t line_end = key.find('\n');
  if (key.substr(0, line_end) != kHeader) return false;
  for (size_t i = 0; i < kFields.size(); ++i) {
    if (line_end == std::string_view::npos) return false;
    size_t start = line_end + 1;
    line_end = key.find('\n', start);
    std::string_view line = key.substr(
        start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
    if (line.size() <= kFields[i].size() || line.substr(0, kFields[i].size()) != kFields[i] ||
        line[kFields[i].size()] != ' ')
      return false;
    *field(&out, i) = std::string(line.substr(kFields[i].size() + 1));
  }
  if (line_end != std::string_view::npos) return false;
  *parts = std::move(out);
  return true;
}

std::string arch_for_compute_capability(int cc) {
  if (cc == 90) return "sm_90a";
  return "sm_" + std::to_string(cc);
}

}  // namespace dg
