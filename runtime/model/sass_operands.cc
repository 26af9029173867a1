#include "runtime/model/sass_operands.h"

#include <cctype>
#include <cstdlib>
#include <set>

namespace dg {

std::string sass_base(const std::string& opcode) { return opcode.substr(0, opcode.find('.')); }

bool sass_has_modifier(const std::string& opcode, const std::string& m) {
  return (opcode + ".").find("." + m + ".") != std::string::npos;
}

bool sass_writes_first_operand(const std::string& opcode) {
  static const std::set<std::string> kNoDest = {
      "ST",      "STS",    "STG",      "STL",     "STSM",    "RED",    "BAR",
      "BRA",     "EXIT",   "RET",      "CALL",    "LDGSTS",  "BSYNC",  "BSSY",
      "NOP",     "DEPBAR", "WARPSYNC", "MEMBAR",  "ERRBAR",  "CCTL",   "LDGDEPBAR",
      "ARRIVES", "SYNCS",  "FENCE",    "UTMALDG", "UTMASTG", "UBLKCP", "WARPGROUP"};
  return !kNoDest.count(sass_base(opcode));
}

std::vector<int> sass_registers_in(const std::string& operand) {
  std::vector<int> regs;
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 'R' || (i > 0 && std::isalnum(static_cast<unsigned char>(operand[i - 1]))))
      continue;
    size_t j = i + 1;
    while (j < operand.size() && std::isdigit(static_cast<unsigned char>(operand[j]))) ++j;
    if (j == i + 1) continue;
    int r = std::atoi(operand.substr(i + 1, j - i - 1).c_str());
    int width = operand.compare(j, 4, ".128") == 0 ? 4 : operand.compare(j, 3, ".64") == 0 ? 2 : 1;
    for (int w = 0; w < width; ++w) regs.push_back(r + w);
    i = j - 1;
  }
  return regs;
}

std::vector<int> sass_load_destinations(const SassInstruction& ins) {
  if (ins.operands.empty()) return {};
  std::vector<int> base = sass_registers_in(ins.operands[0]);
  if (base.empty()) return {};
  int width = 1;
  if (sass_has_modifier(ins.opcode, "128") || sass_has_modifier(ins.opcode, "4")) width = 4;
  if (sass_has_modifier(ins.opcode, "64") || sass_has_modifier(ins.opcode, "2")) width = 2;
  std::vector<int> regs;
  for (int w = 0; w < width; ++w) regs.push_back(base[0] + w);
  return regs;
}

int64_t sass_load_bytes(const std::string& opcode) {
  if (sass_has_modifier(opcode, "128")) return 16;
  if (sass_has_modifier(opcode, "64")) return 8;
  if (sass_has_modifier(opcode, "U16") || sass_has_modifier(opcode, "S16")) return 2;
  if (sass_has_modifier(opcode, "U8") || sass_has_modifier(opcode, "S8")) return 1;
  return 4;
}

std::vector<int> sass_sources(const SassInstruction& ins) {
  std::vector<int> regs;
  for (size_t k = sass_writes_first_operand(ins.opcode) ? 1 : 0; k < ins.operands.size(); ++k)
    for (int r : sass_registers_in(ins.operands[k])) regs.push_back(r);
  return regs;
}

}  // namespace dg
