// The seqpar subcommands: each file cmd_<name>.cpp registers one on the application.
#pragma once
#include <CLI/CLI.hpp>

namespace seqpar::cli {

void add_presets_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_advise_command(CLI::App& app);
void add_maxlen_command(CLI::App& app);
void add_comm_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_gate_command(CLI::App& app);
void add_published_command(CLI::App& app);

// argc/argv of the process, for the "command" field of every JSON document.
struct Invocation {
  int argc = 0;
  const char* const* argv = nullptr;
};
const Invocation& invocation();

}  // namespace seqpar::cli
