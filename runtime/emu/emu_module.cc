#include "runtime/emu/emu_module.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "runtime/emu/device_headers.h"

namespace dg::emu {
namespace {

namespace fs = std::filesystem;

// Note [Host compile flags]
// -std=c++17 is what generated sources are written against;
// -fno-strict-aliasing because CUDA code reinterprets freely (float4 loads of float arrays, bf16
// pairs read as u32), which is fine under NVCC and undefined under GCC's aliasing rules;
// -fvisibility=hidden keeps the .so's dynamic symbols to the DG_EMU_ENTRY functions and lets TLS
// use the cheaper local-dynamic model; -pthread for the engine's worker threads.
const char* const kBaseFlags[] = {"-x", "c++",
                                  // Note [Host compile flags] says why each flag is here.
                                  "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread",
                                  "-fno-strict-aliasing", "-fvisibility=hidden",
                                  "-DDG_HOST_EMULATION"};

std::string resolve_cxx(const EmuCompileOptions& options) {
  if (!options.cxx.empty()) return options.cxx;
  if (const char* env = std::getenv("DYNGEN_HOST_CXX"); env != nullptr && *env != '\0') return env;
  return "c++";
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command; returns its exit status and fills `output` with stdout and stderr.
int run_command(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    *output = "cannot run: " + command;
    return -1;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void write_file(const fs::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

fs::path make_temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "dyngen-emu-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

// Note [Loading from memory]
// The .so bytes are loaded through an anonymous memfd
// (/proc/self/fd/N), so nothing is left on disk and a noexec /tmp does not matter; a temporary
// file is the fallback. The memfd (or file) lives as long as the module: glibc's dlopen returns
// the already-loaded library when a path string matches, so a closed and reused fd number (or a
// recreated temporary name) would hand back the wrong module.
struct LoadedObject {
  void* handle = nullptr;
  int fd = -1;            // memfd, kept open while loaded
  std::string temp_path;  // fallback file, removed after dlclose
};

LoadedObject dlopen_bytes(const std::string& bytes, std::string* error) {
  LoadedObject obj;
  std::string path;
  int fd = memfd_create("dyngen-emu", MFD_CLOEXEC);
  if (fd >= 0) {
    path = "/proc/self/fd/" + std::to_string(fd);
  } else {
    path = (fs::temp_directory_path() / "dyngen-emu-XXXXXX.so").string();
    fd = mkstemps(path.data(), 3);
    if (fd < 0) {
      *error = "cannot create a temporary file for the module";
      return obj;
    }
    obj.temp_path = path;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  if (done == bytes.size()) {
    obj.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (obj.handle == nullptr) *error = std::string("dlopen failed: ") + dlerror();
  } else {
    *error = "cannot write the module to " + path;
  }
  if (obj.temp_path.empty() && obj.handle != nullptr) {
    obj.fd = fd;
  } else {
    close(fd);
  }
  if (obj.handle == nullptr) {
    if (!obj.temp_path.empty()) unlink(obj.temp_path.c_str());
    obj.temp_path.clear();
  }
  return obj;
}

}  // namespace

std::string EmuModule::compiler_identity(const EmuCompileOptions& options) {
  std::string cxx = resolve_cxx(options);
  std::string version;
  run_command(cxx + " --version", &version);
  std::string id = cxx + "\n" + version.substr(0, version.find('\n'));
  for (const char* f : kBaseFlags) id += std::string(" ") + f;
  for (const std::string& f : options.extra_flags) id += " " + f;
  return id;
}

Result<std::string> EmuModule::compile_to_shared_object(const std::string& cuda_source,
                                                        const EmuCompileOptions& options) {
  fs::path dir;
  try {
    dir = make_temp_dir();
    for (const auto* files : {&device_headers(), &emu_headers()})
      for (const EmbeddedFile& f : *files) write_file(dir / std::string(f.name), f.content);
    const fs::path source = dir / "kernels.cu", so = dir / "kernels.so";
    write_file(source, cuda_source);
    std::string command = resolve_cxx(options);
    for (const char* f : kBaseFlags) command += std::string(" ") + f;
    command +=
        " -I" + shell_quote(dir.string()) + " -include " + shell_quote((dir / "dg_emu.h").string());
    for (const std::string& f : options.extra_flags) command += " " + shell_quote(f);
    command += " " + shell_quote(source.string()) + " -o " + shell_quote(so.string());
    std::string log;
    int rc = run_command(command, &log);
    std::string bytes;
    if (rc == 0) {
      std::ifstream in(so, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (options.keep_temp_dir) {
      log += "\n(kept " + dir.string() + ")";
    } else {
      fs::remove_all(dir);
    }
    if (rc != 0)
      return Status::error("host compile failed (exit " + std::to_string(rc) + "): " + command +
                           "\n" + log);
    if (bytes.empty()) return Status::error("host compiler produced no module\n" + log);
    return bytes;
  } catch (const std::exception& e) {
    std::error_code ignored;
    if (!dir.empty() && !options.keep_temp_dir) fs::remove_all(dir, ignored);
    return Status::error(std::string("host compile failed: ") + e.what());
  }
}

Result<EmuModule> EmuModule::compile(const std::string& cuda_source,
                                     const EmuCompileOptions& options) {
  Result<std::string> so = compile_to_shared_object(cuda_source, options);
  if (!so.ok()) return so.status();
  return load(so.value());
}

Result<EmuModule> EmuModule::load(const std::string& so_bytes) {
  std::string error;
  LoadedObject obj = dlopen_bytes(so_bytes, &error);
  if (obj.handle == nullptr) return Status::error("cannot load emulation module: " + error);
  EmuModule module;
  module.handle_ = obj.handle;
  module.fd_ = obj.fd;
  module.temp_path_ = std::move(obj.temp_path);
  module.so_bytes_ = so_bytes;
  return module;
}

EmuModule::EmuModule(EmuModule&& other) noexcept { *this = std::move(other); }

EmuModule& EmuModule::operator=(EmuModule&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
    fd_ = std::exchange(other.fd_, -1);
    temp_path_ = std::exchange(other.temp_path_, std::string());
    so_bytes_ = std::move(other.so_bytes_);
  }
  return *this;
}

EmuModule::~EmuModule() { release(); }

void EmuModule::release() {
  if (handle_ != nullptr) dlclose(handle_);
  // Note [Loading from memory]: the first module a process loads defines the engine's GNU-unique
  // symbols (inline variables, statics of inline functions) for every later one, and glibc then
  // never unloads it, so a closed memfd's number would name it again. Such a module keeps its
  // memfd for the life of the process.
  if (handle_ != nullptr && fd_ >= 0) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd_);
    if (void* still = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
      dlclose(still);
      fd_ = -1;
    }
  }
  if (fd_ >= 0) close(fd_);
  if (!temp_path_.empty()) unlink(temp_path_.c_str());
  handle_ = nullptr;
  fd_ = -1;
  temp_path_.clear();
}

DgEmuEntryFn EmuModule::find(const std::string& kernel_name) const {
  if (handle_ == nullptr) return nullptr;
  return reinterpret_cast<DgEmuEntryFn>(
      dlsym(handle_, (kernel_name + DG_EMU_ENTRY_SUFFIX).c_str()));
}

std::string EmuModule::launch(const std::string& kernel_name, const DgEmuLaunch& cfg,
                              void** args) const {
  DgEmuEntryFn entry = find(kernel_name);
  if (entry == nullptr)
    return "no kernel '" + kernel_name + "' in the emulation module (missing DG_EMU_ENTRY?)";
  char err[2048] = {0};
  if (entry(&cfg, args, err, sizeof err) == 0) return "";
  return err[0] != '\0' ? std::string(err) : kernel_name + ": launch failed";
}

}  // namespace dg::emu
