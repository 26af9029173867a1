// Header files embedded into the library at build time, so that NVRTC and the host emulation find
// them from any working directory (cmake/embed_files.cmake; Note [Raw string embedding]).
#pragma once
#include <string_view>
#include <vector>

namespace dg {

// One embedded file: the name it is #included by, and its text. Both point at static storage.
struct EmbeddedFile {
  std::string_view name;
  std::string_view content;
};

// The device layer, codegen/device/*.cuh: every generated kernel does #include "dg_device.cuh".
// Hand these to NVRTC as in-memory headers; the host emulation needs them too.
const std::vector<EmbeddedFile>& device_headers();

namespace emu {

// What only the host emulation needs: its prelude, runtime/emu/dg_emu*.h (dg_emu.h is
// force-included when a generated source is compiled for the host), and the host twins of the
// device layer, codegen/device/dg_*_emu.h (a device header includes its twin under
// DG_HOST_EMULATION only). Only EmuModule needs these.
const std::vector<EmbeddedFile>& emu_headers();

}  // namespace emu
}  // namespace dg
