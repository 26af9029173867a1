#include "runtime/model/sass_tools.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace dg {

namespace fs = std::filesystem;

namespace {

bool executable(const fs::path& p) { return !p.empty() && access(p.c_str(), X_OK) == 0; }

std::string run_capture(const std::string& cmd, int* status) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  if (!pipe) {
    *status = -1;
    return out;
  }
  std::array<char, 8192> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  int st = pclose(pipe.release());
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return out;
}

}  // namespace

std::string find_cuobjdump(std::string* why) {
  std::string tried;
  if (const char* env = std::getenv("DYNGEN_CUOBJDUMP")) {
    if (executable(env)) return env;
    tried += std::string(" $DYNGEN_CUOBJDUMP=") + env + " (not executable);";
  }
  fs::path venv_lib = fs::path(DG_SOURCE_DIR) / ".venv" / "lib";
  std::error_code ec;
  if (fs::is_directory(venv_lib, ec)) {
    for (const auto& py : fs::directory_iterator(venv_lib, ec)) {
      fs::path p = py.path() / "site-packages" / "nvidia" / "cu13" / "bin" / "cuobjdump";
      if (executable(p)) return p.string();
    }
  }
  tried += " " + venv_lib.string() + "/python*/site-packages/nvidia/cu13/bin/cuobjdump;";
  if (executable("/usr/local/cuda/bin/cuobjdump")) return "/usr/local/cuda/bin/cuobjdump";
  tried += " /usr/local/cuda/bin/cuobjdump;";
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && executable(fs::path(dir) / "cuobjdump"))
        return (fs::path(dir) / "cuobjdump").string();
  }
  tried += " PATH";
  if (why) *why = "cuobjdump not found (tried" + tried + ")";
  return "";
}

std::map<std::string, std::string> sass_by_function(const std::string& cuobjdump,
                                                    const std::string& cubin, std::string* error) {
  std::map<std::string, std::string> out;
  fs::path file =
      fs::temp_directory_path() / ("dyngen-sass-" + std::to_string(getpid()) + "-" +
                                   std::to_string(std::hash<std::string>{}(cubin)) + ".cubin");
  std::ofstream(file, std::ios::binary) << cubin;
  fs::path tool_dir = fs::path(cuobjdump).parent_path();
  // nvdisasm is found through NVDISASM_PATH (the wheels put it beside cuobjdump).
  std::string cmd = "NVDISASM_PATH='" + tool_dir.string() + "' '" + cuobjdump + "' -sass '" +
                    file.string() + "' 2>&1";
  int status = 0;
  std::string text = run_capture(cmd, &status);
  fs::remove(file);
  if (status != 0 || text.find("fatal") != std::string::npos) {
    *error = "cuobjdump -sass failed (status " + std::to_string(status) + "):\n" + text;
    return {};
  }
  // "		Function : NAME" starts each function's listing.
  std::istringstream in(text);
  std::string line, current;
  while (std::getline(in, line)) {
    size_t at = line.find("Function : ");
    if (at != std::string::npos) {
      current = line.substr(at + 11);
      while (!current.empty() && (current.back() == ' ' || current.back() == '\r'))
        current.pop_back();
      out[current];
      continue;
    }
    if (!current.empty()) out[current] += line + "\n";
  }
  if (out.empty()) *error = "cuobjdump -sass listed no functions:\n" + text;
  return out;
}

bool uses_tensor_cores(const std::string& sass) {
  // Instructions appear as "/*0120*/  HMMA.16816.F32.BF16 R4, R8, R12, R4 ;".
  std::istringstream in(sass);
  std::string line;
  while (std::getline(in, line)) {
    for (const char* mma : {"HMMA.", "HGMMA."}) {  // mma.sync, wgmma
      size_t at = line.find(mma);
      if (at != std::string::npos && line.find("*/") < at) return true;
    }
  }
  return false;
}

}  // namespace dg
