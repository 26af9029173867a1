// EmuModule: a generated CUDA source compiled by the host C++ compiler into a shared object that
// runs its kernels under the host emulation (dg_emu.h). The .so bytes play the role of a cubin:
// the disk cache stores them and load() brings them back.
#pragma once
#include <string>
#include <vector>

#include "runtime/emu/dg_emu_abi.h"
#include "runtime/status.h"

namespace dg::emu {

struct EmuCompileOptions {
  // Host compiler command (may hold words, e.g. "ccache g++"); empty: $DYNGEN_HOST_CXX or "c++".
  std::string cxx;
  // Passed after dyngen's flags, e.g. {"-O0", "-g"} or {"-DDG_EMU_FORCE_UCONTEXT"}.
  std::vector<std::string> extra_flags;
  // Leave the temporary folder (source, headers, .so) in place for debugging.
  bool keep_temp_dir = false;
};

class EmuModule {
 public:
  // Compiles `cuda_source` to .so bytes; on failure the Status message holds the compiler's log.
  static Result<std::string> compile_to_shared_object(const std::string& cuda_source,
                                                      const EmuCompileOptions& options = {});
  // compile_to_shared_object, then load.
  static Result<EmuModule> compile(const std::string& cuda_source,
                                   const EmuCompileOptions& options = {});
  // Loads .so bytes made by compile_to_shared_object (by this or another process).
  static Result<EmuModule> load(const std::string& so_bytes);

  // Everything that determines the .so besides the source and the headers, for cache keys: the
  // resolved compiler command, its `--version` first line, and the flags.
  static std::string compiler_identity(const EmuCompileOptions& options = {});

  EmuModule(EmuModule&& other) noexcept;
  EmuModule& operator=(EmuModule&& other) noexcept;
  EmuModule(const EmuModule&) = delete;
  EmuModule& operator=(const EmuModule&) = delete;
  ~EmuModule();

  // The entry point of `kernel_name` (its DG_EMU_ENTRY), or nullptr if the module has none.
  DgEmuEntryFn find(const std::string& kernel_name) const;

  // Runs `kernel_name` over cfg's grid; args[i] points at the i-th parameter (cuLaunchKernel's
  // convention). Returns "" on success, else the error. Blocks until the grid has finished.
  std::string launch(const std::string& kernel_name, const DgEmuLaunch& cfg, void** args) const;

  const std::string& so_bytes() const { return so_bytes_; }

 private:
  EmuModule() = default;
  void release();

  void* handle_ = nullptr;  // from dlopen
  int fd_ = -1;             // the memfd the module was loaded from (Note [Loading from memory])
  std::string temp_path_;   // or the temporary file
  std::string so_bytes_;
};

}  // namespace dg::emu
