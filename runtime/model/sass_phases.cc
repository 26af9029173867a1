#include "runtime/model/sass_phases.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "runtime/model/sass_operands.h"

namespace dg {

namespace {

bool reads_any(const SassInstruction& ins, const std::set<int>& pending) {
  if (pending.empty()) return false;
  for (int r : sass_sources(ins))
    if (pending.count(r)) return true;
  return false;
}

// An HGMMA.64xNx16's shared-memory operand bytes per warp: B (N x 16 bf16) always, A (64 x 16) when
// the instruction reads it through a descriptor rather than from registers; a quarter each, since
// each of the warpgroup's four warps issues the instruction.
double hgmma_shared_bytes(const SassInstruction& ins) {
  int m = 0, n = 0, k = 0;
  size_t dot = ins.opcode.find('.');
  if (dot == std::string::npos) return 0;
  if (std::sscanf(ins.opcode.c_str() + dot + 1, "%dx%dx%d", &m, &n, &k) != 3) return 0;
  bool a_from_registers = ins.operands.size() > 1 && ins.operands[1].rfind("gdesc", 0) != 0;
  double bytes = 2.0 * n * k + (a_from_registers ? 0.0 : 2.0 * m * k);
  return bytes / 4;
}

}  // namespace

SerialLoads serial_loads(const SassStats& s, const std::vector<int>& order,
                         bool ignore_sync_global_loads) {
  SerialLoads out;
  std::set<int> global, shared;  // registers loads in flight will write
  bool async_in_flight = false;
  for (int idx : order) {
    const SassInstruction& ins = s.instructions[idx];
    const std::string base = sass_base(ins.opcode);
    ++out.instructions;
    if (reads_any(ins, global)) {
      ++(base == "STS" ? out.staging_rounds : out.direct_rounds);
      global.clear();
    }
    if (reads_any(ins, shared)) {
      ++out.shared_rounds;
      shared.clear();
    }
    if (base == "BAR") ++out.barriers;
    bool async_wait = (base == "DEPBAR" && ins.opcode.find("LDGDEPBAR") == std::string::npos) ||
                      ins.opcode.rfind("SYNCS.PHASECHK", 0) == 0;
    if (async_wait && async_in_flight) {
      ++out.staging_rounds;
      async_in_flight = false;
    }
    if (base == "LDGSTS" || base == "UTMALDG") async_in_flight = true;
    if (base == "LDG" && !ignore_sync_global_loads)
      for (int r : sass_load_destinations(ins)) global.insert(r);
    if (base == "LDS" || base == "LDSM")
      for (int r : sass_load_destinations(ins)) shared.insert(r);
  }
  return out;
}

SerialLoads loop_serial_loads(const SassStats& s, const SassLoop& l) {
  std::vector<int> body;
  for (int j = l.begin; j <= l.end; ++j) body.push_back(j);
  return serial_loads(s, body, l.async_copies > 0);
}

std::vector<int> longest_path_instructions(const SassStats& s, const std::vector<bool>& excluded,
                                           int through_begin, int through_end) {
  const auto& all = s.instructions;
  const int n = static_cast<int>(all.size());
  auto weight = [&](int i) { return i < static_cast<int>(excluded.size()) && excluded[i] ? 0 : 1; };
  std::map<int64_t, int> index_of;
  for (int i = 0; i < n; ++i) index_of[all[i].address] = i;
  std::vector<int> best(n, -1), from(n, -1);
  if (n == 0) return {};
  best[0] = weight(0);
  const bool through = through_begin >= 0;
  // With `through`, a path ends after the range and no edge jumps over it.
  int end = -1;
  for (int i = 0; i < n; ++i) {
    if (best[i] < 0) continue;
    if ((!through || i > through_end) && (end < 0 || best[i] > best[end])) end = i;
    const SassInstruction& ins = all[i];
    const std::string base = sass_base(ins.opcode);
    if (base == "BRX" ||
        base == "JMX") {  // targets unknown: every instruction (Note [Longest path])
      std::vector<int> every(n);
      for (int j = 0; j < n; ++j) every[j] = j;
      return every;
    }
    auto reach = [&](int j) {
      if (through && i < through_begin && j > through_end) return;
      if (best[i] + weight(j) > best[j]) {
        best[j] = best[i] + weight(j);
        from[j] = i;
      }
    };
    const bool ends = base == "EXIT" || base == "RET" || base == "BRA";
    if ((!ends || ins.guarded) && i + 1 < n) reach(i + 1);
    if (base == "BRA" && ins.branch_target > ins.address) {
      auto target = index_of.find(ins.branch_target);
      if (target != index_of.end()) reach(target->second);
    }
  }
  if (end < 0) return through ? longest_path_instructions(s, excluded) : std::vector<int>{};
  std::vector<int> path;
  for (int i = end; i >= 0; i = from[i]) path.push_back(i);
  std::reverse(path.begin(), path.end());
  return path;
}

void split_at_main_loop(const SassStats& s, const std::vector<bool>& counted, SassPhase* before,
                        SassPhase* after) {
  *before = SassPhase{};
  *after = SassPhase{};
  int begin = static_cast<int>(s.instructions.size()), end = begin;
  if (s.main_mma_loop >= 0) {
    begin = s.loops[s.main_mma_loop].begin;
    end = s.loops[s.main_mma_loop].end;
  }
  auto is_counted = [&](int i) { return i < static_cast<int>(counted.size()) && counted[i]; };
  // Through the main loop: the phases the MMA warps run in series (Note [Longest path]).
  std::vector<int> path = s.main_mma_loop >= 0 ? longest_path_instructions(s, counted, begin, end)
                                               : longest_path_instructions(s, counted);
  std::vector<int> pre, post;
  for (int i : path) {
    if (is_counted(i)) continue;
    if (i < begin) pre.push_back(i);
    if (i > end) post.push_back(i);
  }
  before->serial = serial_loads(s, pre);
  after->serial = serial_loads(s, post);
  before->instructions = before->serial.instructions;
  after->instructions = after->serial.instructions;
  std::set<int> on_path(path.begin(), path.end());
  for (const SassLoop& l : s.loops) {
    if (is_counted(l.end) || !on_path.count(l.end)) continue;
    if (l.end < begin) ++before->rolled_loops;
    if (l.begin > end) ++after->rolled_loops;
  }
}

double shared_bytes_per_iteration(const SassStats& s, const SassLoop& l) {
  double bytes = 0;
  for (int j = l.begin; j <= l.end; ++j) {
    const SassInstruction& ins = s.instructions[j];
    const std::string base = sass_base(ins.opcode);
    if (ins.never) continue;
    if (base == "HGMMA") {
      bytes += hgmma_shared_bytes(ins);
    } else if (base == "LDSM") {
      // ldmatrix .x1/.x2/.x4: one, two or four 8x8 b16 matrices (128 bytes each) per warp.
      int matrices = sass_has_modifier(ins.opcode, "4")   ? 4
                     : sass_has_modifier(ins.opcode, "2") ? 2
                                                          : 1;
      bytes += 128.0 * matrices;
    } else if (base == "LDS" || base == "STS" || base == "LDGSTS") {
      bytes += 32.0 * sass_load_bytes(ins.opcode);
    }
  }
  return bytes;
}

}  // namespace dg
