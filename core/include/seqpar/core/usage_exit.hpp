// A command line's parse error as the exit status the programs document: --help and --version exit
// 0 (CLI11 prints them), and every other parse error (an unknown flag, a malformed or missing value)
// is a usage error, exit 2, rather than CLI11's own 104-109.
#pragma once
#include <CLI/CLI.hpp>
#include <sstream>

namespace seqpar {

// `quiet`: print nothing (an MPI rank other than 0, whose rank 0 prints the message).
inline int usage_exit(const CLI::App& app, const CLI::ParseError& e, bool quiet = false) {
  std::ostringstream null_out, null_err;
  const int rc = quiet ? app.exit(e, null_out, null_err) : app.exit(e);
  return rc == 0 ? 0 : 2;
}

}  // namespace seqpar
