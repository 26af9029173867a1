// Running the `dyngen` command (DG_CLI, set per test target) as a child process, for the tests
// of tests/compile: its exit code and its output (stdout and stderr together).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace dg::testing {

struct CliResult {
  int exit_code;
  std::string out;
};

inline CliResult run_cli(const std::string& args) {
  std::string cmd = std::string(DG_CLI) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  int status = pclose(pipe.release());
  // A child killed by a signal reports 128 + the signal, as a shell does.
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace dg::testing
