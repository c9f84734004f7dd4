#include "app.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
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
  else std::fprintf(stderr, "seqpar: %s: %s\n", kind, printable(message).c_str());
  return code;
}

// With --json, the subcommands that answer in documents (options.hpp's guarded) report bad input as
// one (valid false, the message in errors) even when the parser refused it before they ran.
bool json_error_document(int argc, const char* const* argv, const std::string& message) {
  if (g_capture || argc < 3) return false;
  const std::string sub = argv[1];
  bool json = false;
  for (int i = 2; i < argc; ++i) json = json || std::string(argv[i]) == "--json";
  if (!json || (sub != "simulate" && sub != "advise" && sub != "maxlen" && sub != "comm" && sub != "sweep" &&
                sub != "presets" && sub != "published"))
    return false;
  nlohmann::json j = document("seqpar " + sub);
  j["valid"] = false;
  j["errors"] = {message};
  print_json(j);
  return true;
}

// An option given an empty value (`--framework ''`, `--gpus ''`) is bad input in every subcommand:
// the readers took it for "not given" (the default, silently) or for 0. One rule for every option
// that takes a value, positionals included, so an option added later is covered too.
void refuse_empty_values(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options([](CLI::Option* o) { return o->get_type_size_max() > 0; })) {
      std::string field = opt->get_positional() ? opt->get_name(true) : opt->get_name();
      field.erase(0, field.find_first_not_of('-'));
      std::replace(field.begin(), field.end(), '-', '_');
      opt->check(CLI::Validator(
          [field](const std::string& value) {
            if (value.find_first_not_of(" \t") == std::string::npos)
              throw Error(fmt::format("{}: empty value; give one, or leave the option out for its default", field));
            return std::string();
          },
          ""));
    }
    refuse_empty_values(*sub);
  }
}

// The application with every subcommand registered (their options bind to state each registration owns).
std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>(fmt::format(
      "seqpar {}: measures and predicts sequence-parallel attention (Ulysses, Ring, hybrid).\n"
      "Presets: `seqpar presets`. Every subcommand has --help and --json.",
      seqpar::tool_version()));
  app->set_version_flag("--version", std::string(seqpar::tool_version()));
  app->require_subcommand(1);
  add_presets_command(*app);
  add_simulate_command(*app);
  add_advise_command(*app);
  add_maxlen_command(*app);
  add_comm_command(*app);
  add_sweep_command(*app);
  add_report_command(*app);
  add_calibrate_command(*app);
  add_gate_command(*app);
  add_published_command(*app);
  refuse_empty_values(*app);
  return app;
}
}  // namespace

OptionKind option_kind(const std::string& command, const std::string& option) {
  const std::unique_ptr<CLI::App> app = make_app();
  CLI::App* sub = nullptr;
  try {
    sub = app->get_subcommand(command);
  } catch (const CLI::OptionNotFound&) {
    return OptionKind::unknown;
  }
  const CLI::Option* o = sub->get_option_no_throw(option);
  if (!o) return OptionKind::unknown;
  return o->get_expected_min() == 0 ? OptionKind::flag : OptionKind::value;
}

const Invocation& invocation() { return g_invocation; }

void capture_is_error() {
  if (g_capture) g_capture->error_document = true;
}

bool capturing() { return g_capture != nullptr; }

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
  const std::unique_ptr<CLI::App> owned = make_app();
  CLI::App& app = *owned;
  // CLI11 would say only "A subcommand is required" for a misspelt one.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) return fail(2, "error", fmt::format("unknown subcommand '{}'; the subcommands are {}", argv[1], names));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // The RuntimeError a subcommand throws carries its exit status (options.hpp's no_answer: 1 nothing
    // fits, 2 never valid)
    // and prints nothing; --help and --version exit 0 through app.exit.
    if (e.get_name() == "RuntimeError" || e.get_exit_code() == 0) return app.exit(e);
    // Every other parse error (an unknown flag or subcommand, a missing or malformed value) is a
    // usage error: exit 2 as the README says, not CLI11's own codes (104-109).
    if (capture) {
      if (!capture->document) capture->error = e.what();
      return 2;
    }
    if (!json_error_document(argc, argv, e.what())) app.exit(e);
    return 2;
  } catch (const seqpar::Error& e) {
    // Raised while parsing (a value above its limit, options.hpp's at_most); a subcommand's own
    // errors come through guarded().
    if (json_error_document(argc, argv, e.what())) return 2;
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
