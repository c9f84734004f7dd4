#include "app.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "commands.hpp"
#include "options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/run_info.hpp"

namespace seqpar::cli {

namespace {
Invocation g_invocation;
Captured* g_capture = nullptr;

// Restores the previous capture on the way out, exceptions included.
struct CaptureScope {
  Captured* saved;
  explicit CaptureScope(Captured* c) : saved(g_capture) { g_capture = c; }
  ~CaptureScope() { g_capture = saved; }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

// `kind` is "error" or "internal error": the prefix of the printed line, not of the captured text.
int fail(int code, const char* kind, const std::string& message) {
  if (g_capture) g_capture->error = message;
  else std::fprintf(stderr, "seqpar: %s: %s\n", kind, message.c_str());
  return code;
}
}  // namespace

const Invocation& invocation() { return g_invocation; }

bool capture_json(const nlohmann::json& j) {
  if (!g_capture) return false;
  g_capture->document = j;
  return true;
}

int run(int argc, const char* const* argv, Captured* capture) {
  const CaptureScope scope(capture);
  const Invocation saved = g_invocation;
  g_invocation = Invocation{argc, argv};
  struct Restore {
    Invocation v;
    ~Restore() { g_invocation = v; }
  } restore{saved};
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
  add_published_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own exits (--help, a bad flag, and the RuntimeError a subcommand throws for its
    // exit status) print through app.exit; captured, a real parse error keeps its message.
    if (capture && e.get_exit_code() != 0 && e.get_name() != "RuntimeError" && !capture->document) {
      capture->error = e.what();
      return e.get_exit_code();
    }
    return app.exit(e);
  } catch (const seqpar::Error& e) {
    return fail(2, "error", e.what());
  } catch (const nlohmann::json::exception& e) {
    // The readers name file and field; this is the backstop that keeps any other JSON library
    // error (bad input all the same) from aborting the program.
    return fail(2, "error", e.what());
  } catch (const std::exception& e) {
    return fail(3, "internal error", e.what());
  }
  return 0;
}

}  // namespace seqpar::cli
