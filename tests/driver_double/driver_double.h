/* The driver double's control surface, for tests (the driver entry points it exports are the
 * CUDA driver's own). Tests reach these through dlsym on the library the runtime opened
 * ($DYNGEN_CUDA_DRIVER), or by linking it.
 *
 * The device the double simulates comes from the environment, read at cuInit:
 *   DG_DOUBLE_DEVICES         number of devices (default 1)
 *   DG_DOUBLE_CC              compute capability as major*10+minor (default 90)
 *   DG_DOUBLE_DRIVER_VERSION  what cuDriverGetVersion reports (default 12080, older than the
 *                             toolkit's NVRTC, so the runtime sends PTX; the double runs PTX only)
 *   DG_DOUBLE_SHARED_OPTIN    max dynamic shared memory per block (default 232448 = 227 KiB)
 */
#ifndef DG_DRIVER_DOUBLE_H_
#define DG_DRIVER_DOUBLE_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Every call so far, one line each ("cuLaunchKernel k0_linear grid=1,2,1 block=256,1,1 smem=0
 * params=7 ctx=0"); valid until the next call into the double. */
const char* dgdbl_calls(void);
void dgdbl_clear_calls(void);
/* 0: launches are checked and recorded but not executed (huge grids); 1 (default): executed. */
void dgdbl_set_execute(int on);
/* The next launch on `device` faults: CUDA_ERROR_ILLEGAL_ADDRESS from that launch (when
 * `at_sync` is 0) or from the next synchronization (1), and every later call in that device's
 * context fails the same way, as a sticky fault does. */
void dgdbl_inject_fault(int device, int at_sync);
/* Forgets faults (a real process would have to exit). */
void dgdbl_clear_faults(void);

#ifdef __cplusplus
}
#endif
#endif /* DG_DRIVER_DOUBLE_H_ */
