#include "cli_runner.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace seqpar::testing {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

CliRun seqpar(const std::string& args) {
  const std::string base = "/tmp/seqpar_cli_test_" + std::to_string(getpid());
  const std::string cmd = std::string(SEQPAR_CLI) + " " + args + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  CliRun r;
  // The shell reports a child killed by a signal as 128 + signal in its own exit status.
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  return r;
}

}  // namespace seqpar::testing
