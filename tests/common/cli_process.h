// The built `dyngen` command run as a child process, two ways: through the shell with its output
// (stdout and stderr together) read back, or spawned with an argument list and each stream
// captured on its own (or stdout closed), with the signal that ended it.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace dg::testing {

// The path of the dyngen binary the tests run.
const char* dyngen_binary();

struct CliResult {
  int exit_code;
  std::string out;
};

// `dyngen ARGS 2>&1` through the shell (ARGS is shell text: quote what needs it). A child killed
// by a signal reports 128 + the signal, as a shell does.
CliResult run_cli(const std::string& args);

struct SpawnedCli {
  int code = -1;   // exit status, or -1 when the process did not exit normally
  int signal = 0;  // the signal that ended it, if any
  std::string out, err;
};

// dyngen with `args` as its argv (no shell); stdout and stderr go through files in `work_dir`,
// stdout is closed instead when `close_stdout`.
SpawnedCli spawn_cli(std::vector<std::string> args, const std::filesystem::path& work_dir,
                     bool close_stdout = false);

// Whether the output `text` holds `fragment`.
inline bool has(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

}  // namespace dg::testing
