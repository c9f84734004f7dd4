// The seqpar application: every subcommand on one CLI11 app, run from argv. The `seqpar` program
// and the Python module (cli/python) both call run(), so the flags, their checks, the error
// messages and the JSON documents are the same code whichever way a user comes in.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace seqpar::cli {

// What a run produced when the caller captures it instead of printing (the Python module): the
// last JSON document the subcommand wrote (print_json) and, for a failure reported outside a
// JSON document (a bad flag, an error before --json was seen), its message.
struct Captured {
  std::optional<nlohmann::json> document;
  std::string error;
  // The document is an error report (bad input under --json: valid false and the message), not an
  // answer; an invalid plan's own document (exit 2 too) is an answer.
  bool error_document = false;
};

// Parses argv (argv[0] is the program name) and runs the subcommand. Returns the exit status:
// 0 an answer, 1 a valid question without an answer (nothing fits), 2 input that can never be
// valid (an invalid plan, reported in its document, or bad input), 3 an internal error. With `capture`, JSON
// documents and error messages go there instead of stdout/stderr (human tables still print).
int run(int argc, const char* const* argv, Captured* capture = nullptr);

// What `option` ("--gpus") of subcommand `command` takes: nothing (a flag), a value, or it does not
// exist. The Python module asks, so True/False go only to flags and a value never becomes a flag.
enum class OptionKind { flag, value, unknown };
OptionKind option_kind(const std::string& command, const std::string& option);

// For print_json: true when a run() is capturing, which then holds `j` as its document.
bool capture_json(const nlohmann::json& j);
// Whether a run() is capturing (the Python module): a document is then handed over, not printed.
bool capturing();
// Marks the captured document as an error report (options.cpp's guarded).
void capture_is_error();

}  // namespace seqpar::cli
