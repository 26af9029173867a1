// Where the tests' inputs live in the source tree: any file by its path from the repository root,
// and the shared graph fixtures of tests/fixtures. (No IR here: a test that links libdyngen.so can
// use it without a second, static copy of the IR library.)
#pragma once
#include <string>

namespace dg::testing {

// An absolute path in the source tree: repo_path("tests/cli/lora_mlp.dgir").
std::string repo_path(const std::string& relative);
// tests/fixtures/NAME, and its bytes.
std::string fixture_path(const std::string& name);
std::string fixture_text(const std::string& name);

}  // namespace dg::testing
