#include "runtime/model/sass_stats.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "runtime/model/sass_operands.h"

namespace dg {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// One instruction line: "/*0450*/  @P0 BRA 0x1a50 ;  /* 0x... */". False for anything else
// (headers, the encoding-only continuation lines, which have "/* 0x" with a space).
bool parse_line(const std::string& line, SassInstruction* out) {
  size_t open = line.find("/*");
  if (open == std::string::npos || open + 2 >= line.size() ||
      !std::isxdigit(static_cast<unsigned char>(line[open + 2])))
    return false;
  size_t close = line.find("*/", open);
  if (close == std::string::npos) return false;
  out->address = std::strtoll(line.substr(open + 2, close - open - 2).c_str(), nullptr, 16);
  size_t semi = line.find(';', close);
  if (semi == std::string::npos) return false;
  std::istringstream in(line.substr(close + 2, semi - close - 2));
  std::string word;
  if (!(in >> word)) return false;
  out->guarded = word[0] == '@' && word != "@PT";
  out->never = word == "@!PT";
  if (word[0] == '@' && !(in >> word)) return false;  // the guard predicate
  out->opcode = word;
  std::string rest;
  std::getline(in, rest);
  out->operands.clear();
  std::stringstream ops(rest);
  std::string op;
  while (std::getline(ops, op, ','))
    if (!trim(op).empty()) out->operands.push_back(trim(op));
  out->branch_target = -1;
  if (sass_base(out->opcode) == "BRA" && !out->operands.empty())
    out->branch_target = std::strtoll(out->operands.back().c_str(), nullptr, 16);
  return true;
}

// The first instruction after `at` and up to `end` that reads a register the load at `at` writes;
// -1 when there is none.
int first_reader(const std::vector<SassInstruction>& ins, int at, int end) {
  std::vector<int> dest = sass_load_destinations(ins[at]);
  for (int j = at + 1; j <= end; ++j)
    for (int r : sass_sources(ins[j]))
      for (int d : dest)
        if (r == d) return j;
  return -1;
}

}  // namespace

double mma_flops_per_warp(const std::string& opcode) {
  std::string base = sass_base(opcode);
  if (base != "HMMA" && base != "HGMMA") return 0;
  size_t dot = opcode.find('.');
  if (dot == std::string::npos) return 0;
  std::string shape = opcode.substr(dot + 1, opcode.find('.', dot + 1) - dot - 1);
  if (base == "HGMMA") {
    // 64xNx16: one warpgroup instruction, issued by each of its four warps.
    int m = 0, n = 0, k = 0;
    if (std::sscanf(shape.c_str(), "%dx%dx%d", &m, &n, &k) != 3) return 0;
    return 2.0 * m * n * k / 4;
  }
  // "16816": m16 n8 k16; "1688": m16 n8 k8; "16832": m16 n8 k32.
  if (shape.size() < 4 || shape.compare(0, 3, "168") != 0) return 0;
  int k = std::atoi(shape.substr(3).c_str());
  return 2.0 * 16 * 8 * k;
}

double SassStats::instructions_per_m16n8k16() const {
  if (main_mma_loop < 0) return 0;
  const SassLoop& l = loops[main_mma_loop];
  constexpr double kHmmaFlops = 2.0 * 16 * 8 * 16;  // one warp's m16n8k16
  return l.mma_flops > 0 ? l.instructions / (l.mma_flops / kHmmaFlops) : 0;
}

int SassStats::longest_path(const std::vector<bool>& excluded) const {
  const int n = static_cast<int>(instructions.size());
  auto weight = [&](int i) { return i < static_cast<int>(excluded.size()) && excluded[i] ? 0 : 1; };
  std::map<int64_t, int> index_of;
  for (int i = 0; i < n; ++i) index_of[instructions[i].address] = i;
  std::vector<int> best(n, -1);  // the most instructions on a path reaching i, i included
  if (n > 0) best[0] = weight(0);
  int longest = 0;
  for (int i = 0; i < n; ++i) {
    if (best[i] < 0) continue;  // unreachable through forward edges
    longest = std::max(longest, best[i]);
    const SassInstruction& ins = instructions[i];
    const std::string base = sass_base(ins.opcode);
    if (base == "BRX" || base == "JMX") {
      int all = 0;
      for (int j = 0; j < n; ++j) all += weight(j);
      return all;
    }
    auto reach = [&](int j) { best[j] = std::max(best[j], best[i] + weight(j)); };
    const bool ends = base == "EXIT" || base == "RET" || base == "BRA";
    if ((!ends || ins.guarded) && i + 1 < n) reach(i + 1);
    if (base == "BRA" && ins.branch_target > ins.address) {
      auto target = index_of.find(ins.branch_target);
      if (target != index_of.end()) reach(target->second);
    }
  }
  return longest;
}

namespace {

// Note [Out-of-line waits]
// ptxas moves an mbarrier wait's retry out of line: the inline TRYWAIT branches forward to a stub
// after the function's code, `s: [YIELD;] TRYWAIT P, [bar]; @!P BRA s; BRA back`, whose last BRA
// returns to the instruction after the inline wait. That BRA points backwards but closes no loop:
// taken as one, it spanned the main loop's wait to the function's end, and once the epilogue held
// wgmmas of its own (Note [Rank-r products on tensor cores]) that span held the most MMAs and
// became the "main loop". So an unguarded backward BRA right after a spin (a guarded branch back
// to code that only a jump reaches: the instruction before it is an unguarded BRA or EXIT) is the
// stub's return; the spin itself stays a loop.
bool is_wait_stub_return(const std::vector<SassInstruction>& all, int b) {
  if (all[b].guarded || sass_base(all[b].opcode) != "BRA" || b < 2) return false;
  const SassInstruction& spin = all[b - 1];
  if (!spin.guarded || sass_base(spin.opcode) != "BRA" || spin.branch_target > spin.address)
    return false;
  int start = b - 1;
  while (start > 0 && all[start - 1].address >= spin.branch_target) --start;
  if (start == 0 || all[start].address != spin.branch_target) return false;
  const SassInstruction& before = all[start - 1];
  const std::string base = sass_base(before.opcode);
  return !before.guarded && (base == "BRA" || base == "EXIT" || base == "RET");
}

}  // namespace

SassStats analyze_sass(const std::string& function_sass) {
  SassStats s;
  std::istringstream in(function_sass);
  std::string line;
  SassInstruction ins;
  while (std::getline(in, line))
    if (parse_line(line, &ins)) s.instructions.push_back(ins);
  const auto& all = s.instructions;
  for (const SassInstruction& i : all) {
    double f = mma_flops_per_warp(i.opcode);
    if (f > 0) ++s.mma;
    s.mma_flops += f;
    if (sass_base(i.opcode) == "FFMA") ++s.ffma;
  }
  for (int b = 0; b < static_cast<int>(all.size()); ++b) {
    if (all[b].branch_target < 0 || all[b].branch_target >= all[b].address) continue;
    if (is_wait_stub_return(all, b)) continue;
    SassLoop l;
    l.end = b;
    l.begin = b;
    while (l.begin > 0 && all[l.begin - 1].address >= all[b].branch_target) --l.begin;
    l.instructions = l.end - l.begin + 1;
    for (int j = l.begin; j <= l.end; ++j) {
      const SassInstruction& i = all[j];
      std::string base = sass_base(i.opcode);
      double f = mma_flops_per_warp(i.opcode);
      if (f > 0) ++l.mma;
      l.mma_flops += f;
      if (base == "FFMA") ++l.ffma;
      if (base == "BAR") ++l.barriers;
      if (base == "LDGSTS") {
        ++l.async_copies;
        l.async_copy_bytes += sass_load_bytes(i.opcode);
      }
      if (base == "LDG") {
        ++l.global_loads;
        l.global_load_bytes += sass_load_bytes(i.opcode);
        int reader = first_reader(all, j, l.end);
        if (reader >= 0 && sass_base(all[reader].opcode) == "STS") l.exposed_staging_load = true;
        if (reader >= 0 && sass_base(all[reader].opcode) != "STS") l.exposed_global_load = true;
      }
      if (base == "LDS" || base == "LDSM") {
        ++l.shared_loads;
        if (first_reader(all, j, l.end) >= 0) l.exposed_shared_load = true;
      }
    }
    if (l.async_copies > 0) l.exposed_global_load = l.exposed_staging_load = false;
    s.loops.push_back(l);
  }
  auto inside = [](const SassLoop& inner, const SassLoop& outer) {
    return inner.begin >= outer.begin && inner.end <= outer.end &&
           (inner.begin != outer.begin || inner.end != outer.end);
  };
  for (SassLoop& outer : s.loops)
    for (const SassLoop& inner : s.loops)
      if (inside(inner, outer)) ++outer.inner_loops;
  for (int k = 0; k < static_cast<int>(s.loops.size()); ++k) {
    const SassLoop& l = s.loops[k];
    if (l.mma > 0) {
      const SassLoop* best = s.main_mma_loop < 0 ? nullptr : &s.loops[s.main_mma_loop];
      if (!best || l.mma > best->mma || (l.mma == best->mma && l.instructions < best->instructions))
        s.main_mma_loop = k;
    }
    if (l.ffma == 0) continue;
    bool innermost = true;
    for (const SassLoop& other : s.loops)
      if (other.ffma > 0 && inside(other, l)) innermost = false;
    if (innermost) s.simt_loops.push_back(k);
  }
  return s;
}

}  // namespace dg
