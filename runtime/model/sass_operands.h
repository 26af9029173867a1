// The operands of one SASS instruction as the performance model reads them: its base opcode and
// modifiers, the general registers it reads and writes, and the bytes a load moves per thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/sass_stats.h"

namespace dg {

// "LDG.E.128" -> "LDG".
std::string sass_base(const std::string& opcode);
// Whether `opcode` carries the modifier `m`: sass_has_modifier("LDG.E.128", "128").
bool sass_has_modifier(const std::string& opcode, const std::string& m);
// False for opcodes whose first operand is not a destination register (stores, branches, ...).
bool sass_writes_first_operand(const std::string& opcode);
// The general registers an operand names: R12, R4.64 (R4, R5), [R7+0x20], -R3, |R2|; not UR10 or
// RZ.
std::vector<int> sass_registers_in(const std::string& operand);
// Registers a load writes: its first operand, widened by the access size.
std::vector<int> sass_load_destinations(const SassInstruction& ins);
// Bytes one thread's load (LDG, LDS, LDGSTS) moves, from the width modifier.
int64_t sass_load_bytes(const std::string& opcode);
// The general registers an instruction reads.
std::vector<int> sass_sources(const SassInstruction& ins);

}  // namespace dg
