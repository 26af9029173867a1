// Loads graph.fb bytes (schema: ir/graph.fbs) into a verified Graph. The bytes are untrusted.
//
// Note [graph.fb compatibility]
// graph.fbs is append-only (see the rules at its top): a new reader must load every file an
// older writer produced, which tests/cli/compat checks against committed v1 files. A file
// records the schema revision it was written for; this reader refuses a revision it does not
// know (a newer writer may have added fields whose meaning an old reader would silently drop)
// and a missing one. When the schema grows: append the fields, bump kGraphFbVersion, note the
// revision in graph.fbs, keep reading older revisions, and commit a new compat file.
//
// Note [graph.fb loader checks]
// Loading never crashes, aborts or runs unbounded, whatever the bytes:
//   1. size limit, 8-byte aligned copy if needed, file identifier "DGIR";
//   2. flatbuffers::Verifier with explicit depth and table limits (structure only);
//   3. semantic checks on everything the verifier cannot know: schema revision; symbol names
//      (identifiers, not reserved, unique) and facts (|bound| <= 2^62, lo < hi, divisor >= 1);
//      the expression table (known kinds, operand counts, operands point at earlier entries
//      only, constants within +-2^62, each canonical result bounded in depth and size, and a
//      total work budget, so that no expansion such as (a + b)^(2^k) can blow up and no file
//      can fill the process-wide intern table (Note [SymExpr interning])); expressions
//      are built through the SymExpr constructors inside try/catch (they throw on overflow and
//      division by zero); value and node ids in range; known dtype, value-kind, attribute-kind
//      and op codes; rank, operand, attribute and list-length limits; a budget on the work the
//      verifier will do for the shapes each node touches;
//   4. verify_graph (use-before-def, arity, types against shape inference).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace dg {

// The schema revision this build writes and the newest one it reads (see graph.fbs).
inline constexpr uint32_t kGraphFbVersion = 1;
// The largest magnitude of a constant, coefficient, symbol bound or divisor graph.fb holds; the
// writer refuses a graph beyond it (a file it wrote must load again) and the loader rejects one.
inline constexpr int64_t kGraphFbMaxConst = int64_t{1} << 62;

struct FbLimits {
  size_t max_bytes = size_t{64} << 20;  // whole file
  uint32_t max_table_depth = 16;        // flatbuffers nesting (the schema needs 4)
  uint32_t max_tables = 1u << 22;       // flatbuffers tables verified
  uint32_t max_symbols = 4096;
  uint32_t max_exprs = 1u << 16;  // expression-table entries
  int max_expr_depth = 64;        // of each canonical expression
  int64_t max_expr_size = 1024;   // tree size of each canonical expression
  uint32_t max_values = 1u << 20;
  int max_rank = 8;
  uint32_t max_node_inputs = 4096;
  uint32_t max_attrs = 64;                   // per node
  uint32_t max_list = 4096;                  // ints / exprs attribute length
  size_t max_name = 128;                     // symbol, attribute and graph names
  int64_t max_expr_work = int64_t{1} << 20;  // budget for building the expression table
  int64_t max_work = int64_t{1} << 25;       // budget for what verification will do
};

struct LoadResult {
  Graph graph;
  std::string error;  // one line, empty on success
  bool ok() const { return error.empty(); }
};

// Decodes and verifies graph.fb bytes; see Note [graph.fb loader checks]. Never throws.
LoadResult load_graph_fb(const void* data, size_t size);
LoadResult load_graph_fb(const void* data, size_t size, const FbLimits& limits);

}  // namespace dg
