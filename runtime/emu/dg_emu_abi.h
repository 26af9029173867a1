/* The C boundary between a host-emulation module (a generated source compiled into a .so) and
   whoever loads it (EmuModule). Plain C so that both sides agree without sharing C++ types. */
#ifndef DG_EMU_ABI_H_
#define DG_EMU_ABI_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Launch geometry, as cuLaunchKernel takes it. */
typedef struct DgEmuLaunch {
  unsigned int grid_x, grid_y, grid_z;
  unsigned int block_x, block_y, block_z;
  unsigned int dynamic_smem_bytes;
} DgEmuLaunch;

/* Each kernel `k` in a module exports `int k__emu(cfg, args, err, err_len)` (see DG_EMU_ENTRY):
   args[i] points at the i-th kernel parameter, as cuLaunchKernel's kernelParams. Returns 0 on
   success; otherwise nonzero with a NUL-terminated message in err (truncated to err_len). */
typedef int (*DgEmuEntryFn)(const DgEmuLaunch* cfg, void** args, char* err, int err_len);

/* The suffix that turns a kernel name into its entry symbol. */
#define DG_EMU_ENTRY_SUFFIX "__emu"

#ifdef __cplusplus
}
#endif

#endif /* DG_EMU_ABI_H_ */
