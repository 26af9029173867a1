#include "tests/common/cli_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>

#include "tests/common/file_bytes.h"

extern char** environ;

namespace dg::testing {

const char* dyngen_binary() { return DG_CLI; }

CliResult run_cli(const std::string& args) {
  std::string cmd = std::string(DG_CLI) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  int status = pclose(pipe.release());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

SpawnedCli spawn_cli(std::vector<std::string> args, const std::filesystem::path& work_dir,
                     bool close_stdout) {
  SpawnedCli r;
  std::filesystem::path out = work_dir / "stdout", err = work_dir / "stderr";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (close_stdout)
    posix_spawn_file_actions_addclose(&fa, 1);
  else
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  args.insert(args.begin(), DG_CLI);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, DG_CLI, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "cannot start " << DG_CLI;
  if (rc != 0) return r;
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = close_stdout ? "" : read_all(out);
  r.err = read_all(err);
  return r;
}

}  // namespace dg::testing
