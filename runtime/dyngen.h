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
  const char* target; /* "host" (CPU emulation), "cuda" (GPU 0), "cuda:N" (GPU N), "sm_80",
                         "sm_90a"; NULL: cuda if a GPU, else host. A GPU executable runs on every device its arch
                         runs on (Note [Arch compatibility]), one module per context. */
  const char* cache_dir; /* NULL: $DYNGEN_CACHE_DIR or the user's cache folder */
  const char* emit_dir;  /* NULL, or a folder for the CUDA source and the IR after each pass */
  const char* disabled_passes; /* NULL, or comma-separated pass names to skip (bisecting) */
} dg_compile_options;

typedef struct dg_stats {
  int64_t graphs_compiled; /* dg_compile calls that produced an executable */
  int64_t nvrtc_compiles;  /* NVRTC (or host compiler) invocations */
  int64_t cache_hits_memory;
  int64_t cache_hits_disk;
  int64_t cache_misses;
  int64_t cache_corrupt; /* corrupt entries found and replaced */
  int64_t launches;
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

#ifdef __cplusplus
}
#endif
#endif /* DYNGEN_H_ */
