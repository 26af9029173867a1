#include "runtime/binary_key.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "ir/sha256.h"
#include "runtime/emu/device_headers.h"
#include "runtime/emu/emu_module.h"
#include "runtime/version.h"

namespace dg {

namespace {

std::string digest_of(std::initializer_list<const std::vector<EmbeddedFile>*> sets) {
  Sha256 h;
  for (const auto* files : sets)
    for (const EmbeddedFile& f : *files) {
      h.update(f.name);
      h.update(f.content);
    }
  auto d = h.finish();
  return to_hex(d.data(), d.size());
}

const std::string& device_headers_digest() {
  static const std::string digest = digest_of({&device_headers()});
  return digest;
}

// A host module is also built from the emulator's own headers (the engine, its scheduler and
// stack pool are compiled into every module): a change there is another module.
const std::string& host_headers_digest() {
  static const std::string digest = digest_of({&device_headers(), &emu::emu_headers()});
  return digest;
}

constexpr const char* kDeviceDebugMacro = "-DDG_DEVICE_DEBUG=1";

// The compiler's identity (its `--version`, which takes a process to read) once per option set.
const std::string& host_compiler_identity() {
  if (device_debug_mode()) {
    static const std::string debug =
        emu::EmuModule::compiler_identity(host_compile_options()) + " +source-sha";
    return debug;
  }
  static const std::string plain =
      emu::EmuModule::compiler_identity(host_compile_options()) + " +source-sha";
  return plain;
}

}  // namespace

bool device_debug_mode() {
  const char* v = std::getenv("DYNGEN_DEVICE_DEBUG");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

CompileOptions device_compile_options(const std::string& arch) {
  CompileOptions copts;
  copts.arch = arch;
  // Line info names the source by its hash in the PTX and cubin (.file), which profilers show
  // and the driver double uses to find the source's host emulation.
  copts.line_info = true;
  copts.ptxas_verbose = true;  // Note [ptxas report]
  if (device_debug_mode()) copts.extra_options.push_back(kDeviceDebugMacro);
  return copts;
}

emu::EmuCompileOptions host_compile_options() {
  emu::EmuCompileOptions o;
  if (device_debug_mode()) o.extra_flags.push_back(kDeviceDebugMacro);
  return o;
}

Result<KernelKeyParts> kernel_key_parts(const std::string& source, const std::string& arch) {
  KernelKeyParts p;
  p.version = dyngen_version();
  p.arch = arch;
  if (arch == "host") {
    p.compiler = host_compiler_identity();
  } else {
    // The resolved NVRTC options are part of the key: a binary built with other options is
    // another binary (Note [What the key covers] in nvrtc_compiler.cc).
    auto resolved = nvrtc_options(device_compile_options(arch));
    if (!resolved.ok()) return Status::error(resolved.message());
    p.compiler = "nvrtc " + nvrtc_version();
    for (const std::string& opt : resolved.value()) p.compiler += " " + opt;
  }
  p.headers_digest = arch == "host" ? host_headers_digest() : device_headers_digest();
  p.source_digest = sha256_hex(source);
  return p;
}

Result<BinaryKey> binary_key(const std::string& source, const ResolvedTarget& target) {
  BinaryKey key;
  key.arch = target.name == "host" ? "host" : binary_arch(target);
  auto parts = kernel_key_parts(source, key.arch);
  if (!parts.ok()) return parts.status();
  key.source_sha = parts->source_digest;
  key.source_name = key.source_sha + (device_debug_mode() ? "-debug" : "");
  key.stored = kernel_cache_key(parts.value());
  key.file = sha256_hex(key.stored);
  return key;
}

}  // namespace dg
