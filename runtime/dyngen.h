/* dyngen C API: load a graph, compile it once for every value of its symbolic dims, run it.
 *
 * Plain C types and opaque handles, so one built library serves every Python version through
 * ctypes, and the CLI uses the same entry points. Every function returns DG_OK (0) or an error
 * code; dg_last_error() then gives a message for the calling thread. Nothing here aborts.
 */
#ifndef DYNGEN_H_
#define DYNGEN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DG_MAX_RANK 8

enum dg_status {
  DG_OK = 0,
  DG_ERR_INTERNAL = 1,
  DG_ERR_INVALID_INPUT = 2, /* malformed or unverifiable graph, bad arguments */
  DG_ERR_UNSUPPORTED = 3,   /* a valid graph dyngen cannot compile (names the op or reason) */
  DG_ERR_COMPILE = 4,       /* NVRTC or the host compiler failed; the log is in the message */
  DG_ERR_LAUNCH = 5,        /* a shape/dtype mismatch at call time or a launch failure */
};

typedef struct dg_graph dg_graph;
typedef struct dg_executable dg_executable;

#define DG_DEVICE_HOST 0
#define DG_DEVICE_CUDA 1

/* A tensor argument: data pointer (device or host), shape, dtype (codes of ir/dtype.h) and where
 * the data lives (DG_DEVICE_HOST, or DG_DEVICE_CUDA with the device's ordinal). Tensors are
 * contiguous row-major. A symbolic-integer argument has rank -1 and its value in shape[0].
 * A GPU executable takes CUDA tensors of one device; a rank-0 host tensor beside them is a
 * scalar passed by value (copied to the device on the launch's stream). */
typedef struct dg_tensor {
  void* data;
  int64_t shape[DG_MAX_RANK];
  int32_t rank;
  int32_t dtype;
  int32_t device_type;
  int32_t device_index;
} dg_tensor;

typedef struct dg_compile_options {
  const char*
      target;            /* "host" (CPU emulation), "cuda" (GPU 0), "cuda:N" (GPU N), "sm_80",
                            "sm_90a"; NULL: cuda if a GPU, else host. A GPU executable runs on every device its
                            arch            runs on (Note [Arch compatibility]), one module per context. */
  const char* cache_dir; /* NULL: $DYNGEN_CACHE_DIR or the user's cache folder */
  const char* emit_dir;  /* NULL, or a folder for the CUDA source and the IR after each pass */
  const char* disabled_passes; /* NULL, or comma-separated pass names to skip (bisecting) */
  const char* source_arch;     /* NULL, or the arch the kernels are generated for when not the
                                  target's: "sm_90a" with target "host" runs sm_90a's (wgmma) kernels
                                  under the emulation */
} dg_compile_options;

/* The runtime's counters since the process started (or dg_reset_stats): one int64_t per line of
 * dyngen_stats.def (shipped beside this header), in its order; the meanings are there, and
 * dg_stats_doc gives them too. */
typedef struct dg_stats {
#define DG_STAT(name, doc) int64_t name;
#include "dyngen_stats.def"
#undef DG_STAT
} dg_stats;

const char* dg_version(void);
const char* dg_last_error(void);

/* Graphs: graph.fb bytes or the IR text form. */
int dg_graph_load(const void* data, size_t size, dg_graph** out);
int dg_graph_load_text(const char* text, dg_graph** out);
void dg_graph_free(dg_graph* g);
/* Canonical hash (64 hex chars + NUL) and printed IR (malloc'd; free with dg_free). */
int dg_graph_hash(const dg_graph* g, char out[65]);
int dg_graph_print(const dg_graph* g, char** out);
void dg_free(void* p);

/* Compile (or fetch from the memory/disk cache). */
int dg_compile(const dg_graph* g, const dg_compile_options* opts, dg_executable** out);
void dg_executable_free(dg_executable* e);
/* The cache key (64 hex chars + NUL) and whether this compile was a cache hit (0/1/2 = miss,
 * memory, disk). */
int dg_executable_info(const dg_executable* e, char key[65], int* cache_hit, int* num_inputs,
                       int* num_outputs);
/* JSON describing kernels and their launch shapes as symbolic expressions (malloc'd). */
int dg_executable_describe(const dg_executable* e, char** json);

/* Binds the symbols from the inputs' shapes (checking static dims, dtypes and consistency),
 * fills the outputs' shape/rank/dtype and the workspace size in bytes. */
int dg_prepare(const dg_executable* e, const dg_tensor* inputs, int num_inputs, dg_tensor* outputs,
               int num_outputs, size_t* workspace_bytes);
/* Runs on `stream` (a CUstream, NULL for the default stream; ignored for "host"). Outputs and
 * workspace are allocated by the caller with the sizes dg_prepare gave. */
int dg_launch(const dg_executable* e, const dg_tensor* inputs, int num_inputs,
              const dg_tensor* outputs, int num_outputs, void* workspace, void* stream);

/* Everything dg_launch does except launching: checks the arguments, binds the symbols, runs the
 * shape program and packs every kernel's arguments. For measuring host overhead per call. */
int dg_launch_dry_run(const dg_executable* e, const dg_tensor* inputs, int num_inputs,
                      const dg_tensor* outputs, int num_outputs, void* workspace);

void dg_get_stats(dg_stats* out);
void dg_reset_stats(void);
/* The counters described, so that a binding need not list them: how many there are, and the name
 * (a dg_stats field) and one-line meaning of the i-th, in dg_stats's order (NULL out of range).
 * dg_stats_values writes the first n values (n at most the count) into out. */
int dg_stats_count(void);
const char* dg_stats_name(int i);
const char* dg_stats_doc(int i);
void dg_stats_values(int64_t* out, int n);

/* ---- Building graphs (One IR) ----------------------------------------------------------------
 * A frontend builds a graph through these calls instead of writing graph.fb or text itself: the
 * core types every node (ir/shape_infer.cc, the rules the text parser and the graph.fb loader
 * apply) and owns the symbolic canonical form (ir/sym_expr.h). Symbolic expressions are handles
 * (int32 >= 0) into the builder; two handles are equal exactly when their canonical expressions
 * are. Values are the graph's value ids. An op is applied to the attributes set since the last
 * op (dg_builder_attr_*). A call the IR refuses returns DG_ERR_INVALID_INPUT with the IR's
 * message (e.g. "linear: inner dims differ: ..."). */
typedef struct dg_builder dg_builder;

int dg_builder_new(const char* name, dg_builder** out);
void dg_builder_free(dg_builder* b);

/* Expressions: a declared symbol with facts (value in [lo, hi], a multiple of divisor; lo/hi
 * INT64_MIN/INT64_MAX are unbounded), a constant, or `op` applied to two expressions: "add",
 * "sub", "mul", "floordiv", "mod", "max", "min", "ceildiv". */
int dg_builder_symbol(dg_builder* b, const char* name, int64_t lo, int64_t hi, int64_t divisor,
                      int32_t* expr);
int dg_builder_const(dg_builder* b, int64_t value, int32_t* expr);
int dg_builder_expr(dg_builder* b, const char* op, int32_t lhs, int32_t rhs, int32_t* expr);
/* Sound bounds of an expression; is_const and is_symbol say whether it is a constant (its value
 * in lo) or a bare symbol. */
int dg_builder_expr_info(dg_builder* b, int32_t expr, int64_t* lo, int64_t* hi, int* is_const,
                         int* is_symbol);
/* *result = 1 if lhs >= rhs is proven for every value of the symbols, else 0. */
int dg_builder_provably_ge(dg_builder* b, int32_t lhs, int32_t rhs, int* result);
/* The expression in the text form (malloc'd; free with dg_free). */
int dg_builder_expr_str(dg_builder* b, int32_t expr, char** out);
/* Its value with symbols `names[i]` = values[i]; DG_ERR_INVALID_INPUT if one is unbound. */
int dg_builder_expr_eval(dg_builder* b, int32_t expr, const char* const* names,
                         const int64_t* values, int count, int64_t* out);

/* Values. dims are expression handles. */
int dg_builder_input(dg_builder* b, int32_t dtype, const int32_t* dims, int rank, int32_t* value);
int dg_builder_sym_input(dg_builder* b, int32_t expr, int32_t* value);
int dg_builder_attr_int(dg_builder* b, const char* name, int64_t value);
int dg_builder_attr_float(dg_builder* b, const char* name, double value);
int dg_builder_attr_ints(dg_builder* b, const char* name, const int64_t* values, int count);
int dg_builder_attr_syms(dg_builder* b, const char* name, const int32_t* exprs, int count);
int dg_builder_attr_dtype(dg_builder* b, const char* name, int32_t dtype);
int dg_builder_op(dg_builder* b, const char* op, const int32_t* inputs, int count, int32_t* value);
/* A value's type: dtype code, rank and dims (expression handles; at most DG_MAX_RANK). A
 * symbolic-integer value has rank -1 and its expression in dims[0]. */
int dg_builder_value_type(dg_builder* b, int32_t value, int32_t* dtype, int32_t* rank,
                          int32_t dims[DG_MAX_RANK]);
int dg_builder_output(dg_builder* b, int32_t value);
/* The graph built so far, verified, as a dg_graph (the builder stays usable). */
int dg_builder_finish(dg_builder* b, dg_graph** out);

/* A builder holding a loaded graph (to read its symbols, inputs and types, or extend it), and
 * what it holds: the declared symbols (expression handles) and the input value ids, in order.
 * *count is the full number; at most `capacity` are written. */
int dg_graph_to_builder(const dg_graph* g, dg_builder** out);
int dg_builder_symbols(dg_builder* b, int32_t* exprs, int capacity, int* count);
int dg_builder_inputs(dg_builder* b, int32_t* values, int capacity, int* count);
int dg_builder_num_nodes(dg_builder* b, int* count);

/* graph.fb bytes of a graph (malloc'd; free with dg_free). */
int dg_graph_write_fb(const dg_graph* g, void** data, size_t* size);

#ifdef __cplusplus
}
#endif
#endif /* DYNGEN_H_ */
