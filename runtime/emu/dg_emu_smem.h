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

}  // namespace dg::emu
