// seqpar: predicts and reports sequence-parallel attention plans (see `seqpar --help`).
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/run_info.hpp"

namespace seqpar::cli {
namespace {
Invocation g_invocation;
}
const Invocation& invocation() { return g_invocation; }
}  // namespace seqpar::cli

int main(int argc, char** argv) {
  using namespace seqpar::cli;
  const_cast<Invocation&>(invocation()) = Invocation{argc, argv};
  CLI::App app{fmt::format(
      "seqpar {}: measures and predicts sequence-parallel attention (Ulysses, Ring, hybrid).\n"
      "Presets: `seqpar presets`. Every subcommand has --help and --json.",
      seqpar::tool_version())};
  app.set_version_flag("--version", std::string(seqpar::tool_version()));
  app.require_subcommand(1);
  add_presets_command(app);
  add_simulate_command(app);
  add_advise_command(app);
  add_maxlen_command(app);
  add_comm_command(app);
  add_sweep_command(app);
  add_report_command(app);
  add_calibrate_command(app);
  add_gate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const seqpar::Error& e) {
    std::fprintf(stderr, "seqpar: error: %s\n", e.what());
    return 2;
  } catch (const nlohmann::json::exception& e) {
    // The readers name file and field; this is the backstop that keeps any other JSON library
    // error (bad input all the same) from aborting the program.
    std::fprintf(stderr, "seqpar: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqpar: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
