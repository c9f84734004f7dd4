// Runs the real seqpar program (SEQPAR_CLI) as a user would, capturing exit code and output, for
// the CLI contract tests and the fuzzer's end-to-end runs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace seqpar::testing {

struct CliRun {
  int code = -1;  // exit status; 128 + signal when the program was killed (a crash)
  std::string out, err;
  nlohmann::json json() const { return nlohmann::json::parse(out); }
};

std::string slurp(const std::string& path);

// `args` is pasted into a shell command line after the program: quote what needs quoting.
CliRun seqpar(const std::string& args);

}  // namespace seqpar::testing
