// `dyngen run FILE --bind SYMBOL=VALUE ... [--seed N] [--cache-dir DIR]`: runs the compiled graph
// on random inputs under host emulation and compares every output with the reference evaluator.
#include <cstdio>
#include <iostream>

#include "frontends/cli/commands.h"
#include "frontends/cli/compile_flags.h"
#include "runtime/host_run.h"

namespace dg {

namespace {
constexpr const char* kUsage =
    "run FILE --bind SYMBOL=VALUE ... [--arch host|sm_90a] [--seed N] [--cache-dir DIR] "
    "[--emit DIR] [--disable-pass NAME]";
}

int run_run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CompileFlags flags;
  if (!parse_compile_flags(args, kUsage, /*allow_bind=*/true, &flags, err))
    return kExitInvalidInput;
  if (flags.help) {
    out << "usage: dyngen " << kUsage << "\n"
        << "Runs the graph on random inputs under host emulation and compares it with the\n"
           "reference evaluator; exits 4 when an output is outside its dtype's tolerance (its\n"
           "absolute part relative to the output's largest magnitude, since fused kernels round\n"
           "where the graph did not), or\n"
           "when the shared-memory race detector (DYNGEN_EMU_RACECHECK=1) reports a race.\n"
           "--arch sm_90a runs the sm_90a source (wgmma and TMA kernels) under the emulation.\n"
           "DYNGEN_EMU_SCHED=fifo|random, DYNGEN_EMU_ASYNC=wait|issue|random and\n"
           "DYNGEN_EMU_SEED=N choose the emulation's schedule and cp.async timing;\n"
           "DYNGEN_EMU_SMEM_OFFSET=N places dynamic shared memory at shared address N.\n"
           "DYNGEN_DEVICE_DEBUG=1 compiles the kernels in device debug mode: a wait that\n"
           "does not complete, or misaligned dynamic shared memory, fails the launch with\n"
           "a message naming the wait or check, the block and the thread.\n";
    return kExitOk;
  }
  auto graph = load_or_report(flags.file, err);
  if (!graph) return kExitInvalidInput;
  // --arch names the source's arch; it always runs under the host emulation.
  if (!flags.arch.empty() && flags.arch != "host" && flags.arch.rfind("sm_", 0) != 0) {
    err << "dyngen: " << flags.file << ": run --arch " << flags.arch
        << ": expected host or an sm_ arch such as sm_90a (its kernels run under host emulation)\n";
    return kExitInvalidInput;
  }
  CompileRequest req = flags.request();
  req.target = "host";
  req.source_arch = flags.arch.empty() ? "host" : flags.arch;
  int exit_code = kExitOk;
  auto compiled = compile_or_report(*graph, req, flags.file, err, &exit_code);
  if (!compiled) return exit_code;
  const CompileOutcome& o = *compiled;
  auto inputs = make_random_inputs(*graph, flags.bindings, flags.seed);
  if (!inputs.ok()) {
    err << "dyngen: " << flags.file << ": " << inputs.message() << " (use --bind)\n";
    return kExitInvalidInput;
  }
  // Fused kernels round where the graph did not (Note [Tolerance at the tensor's scale]).
  auto checks = check_against_reference(*graph, *o.executable, inputs.value(), 1.0, {},
                                        ToleranceMode::kTensorScale);
  if (!checks.ok()) {
    err << "dyngen: " << flags.file << ": " << checks.message() << "\n";
    // A race found by DYNGEN_EMU_RACECHECK=1 is a wrong kernel, like a mismatch.
    if (checks.message().find("shared-memory race") != std::string::npos) return 4;
    return kExitInvalidInput;
  }
  bool all_ok = true;
  for (const OutputCheck& c : checks.value()) {
    char line[256];
    // The largest reference value beside the errors: the absolute tolerance is at its scale.
    std::snprintf(line, sizeof(line),
                  "%s: max abs err %.3g (largest |reference| %.3g), max rel err %.3g: %s",
                  c.what.c_str(), c.max_abs_err, c.largest_reference, c.max_rel_err,
                  c.ok ? "ok" : "MISMATCH");
    out << line << (c.ok ? "" : " (" + c.message + ")") << "\n";
    all_ok = all_ok && c.ok;
  }
  return all_ok ? kExitOk : 4;
}

}  // namespace dg
