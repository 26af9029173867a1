// Where a worker's static __shared__ variables live, so that they can be poisoned per block and
// checked by the race detector.
#pragma once
#include <link.h>

#include <cstdint>
#include <string>

#include "dg_emu_engine.h"

namespace dg::emu {

// Note [Poisoned shared memory]
// On a GPU shared memory starts each block with whatever the last
// block left, so a kernel that reads a byte before writing it is wrong however it looks on the
// host. The emulation fills every block's shared memory, dynamic and static, with 0xff bytes
// first: a NaN as bf16, f16 or f32, and -1 as an integer, so such reads show as NaN or garbage in
// the results (a missing zero-fill of a K tail, for one). Static __shared__ variables are
// thread_locals (Note [Shared memory as thread_local]); they are the module's only zero-
// initialized thread-locals (Note [Engine thread-locals]), so they are exactly the .tbss part of
// the module's TLS block: the bytes after the p_filesz initialized bytes of its PT_TLS segment.
// dl_iterate_phdr gives that segment and this OS thread's copy of it (dlpi_tls_data).
struct TlsSearch {
  uintptr_t anchor;  // an address inside this module
  unsigned char* data = nullptr;
  size_t filesz = 0, memsz = 0;
  bool found = false;
};

inline int find_module_tls(dl_phdr_info* info, size_t, void* arg) {
  TlsSearch& s = *static_cast<TlsSearch*>(arg);
  bool mine = false;
  const ElfW(Phdr)* tls = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && s.anchor >= lo && s.anchor < lo + ph.p_memsz) mine = true;
    if (ph.p_type == PT_TLS) tls = &ph;
  }
  if (!mine) return 0;
  s.found = true;
  if (tls != nullptr) {
    s.data = static_cast<unsigned char*>(info->dlpi_tls_data);
    s.filesz = tls->p_filesz;
    s.memsz = tls->p_memsz;
  }
  return 1;
}

// Points b.static_smem at this OS thread's static shared memory. "" or an error.
inline std::string locate_static_smem(Block& b) {
  TlsSearch s;
  s.anchor = reinterpret_cast<uintptr_t>(&find_module_tls);
  t_emu.initialized = 1;  // makes sure this thread's TLS block of the module exists
  dl_iterate_phdr(&find_module_tls, &s);
  const auto* engine = reinterpret_cast<const unsigned char*>(&t_emu);
  if (!s.found || s.data == nullptr || engine < s.data || engine + sizeof t_emu > s.data + s.filesz)
    return "emulation failure: cannot locate static shared memory (the module's thread-local "
           "storage is not laid out as Note [Poisoned shared memory] expects)";
  b.static_smem = s.data + s.filesz;
  b.static_smem_bytes = s.memsz - s.filesz;
  return "";
}

// Note [Emulated shared window]
// On a GPU a shared-memory pointer has an address in the block's shared window (what
// __cvta_generic_to_shared returns, what wgmma descriptors and TMA destinations hold), and the
// 128-byte swizzle works on its bits. The emulation's window puts dynamic shared memory at
// DYNGEN_EMU_SMEM_OFFSET (default 0, so a 1024-byte aligned tile is aligned as on a GPU whose
// dynamic shared memory is declared so), and the static __shared__ variables after it. An
// offset that is not a multiple of 1024 is an adversarial placement: it shows a kernel that
// assumes the alignment it was promised without checking it (Note [Device debug mode] in
// codegen/device/dg_debug.cuh checks it).
inline uint32_t smem_window_address(const void* p) {
  const Block& b = *t_emu.block;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t d = reinterpret_cast<uintptr_t>(b.dyn_smem);
  if (b.dyn_smem != nullptr && a >= d && (a < d + b.dyn_smem_bytes || a == d))
    return b.dyn_window + static_cast<uint32_t>(a - d);  // the base even of no bytes
  const uintptr_t s = reinterpret_cast<uintptr_t>(b.static_smem);
  if (b.static_smem != nullptr && a >= s && a < s + b.static_smem_bytes)
    return b.dyn_window + static_cast<uint32_t>((b.dyn_smem_bytes + 15) / 16 * 16 + (a - s));
  fail(where() + ": a shared-window address asked for a pointer outside shared memory");
}

}  // namespace dg::emu
