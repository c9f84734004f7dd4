// The `seqpar` Python module: each function runs the matching `seqpar` subcommand through the
// CLI's run() with --json, keyword arguments spelled as the flags (seq_len= is --seq-len), and
// returns the JSON document as a dict with the same keys. Bad input raises seqpar.Error with the
// CLI's message; an invalid plan is a result (valid False, errors), as `--json` prints it.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "app.hpp"
#include "seqpar/core/json_io.hpp"

namespace nb = nanobind;

namespace {

// Raised in Python as seqpar.Error (a ValueError).
struct PyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A C string ends at NUL: "llama3-8b\0x" would silently become "llama3-8b".
std::string without_nul(std::string text, const std::string& key) {
  if (text.find('\0') != std::string::npos)
    throw PyError(key + ": contains a NUL character, which no command-line argument can hold");
  return text;
}

// One option value: str() of a scalar, a list or tuple joined by commas (the CLI's list syntax). A
// bool is never a value (str(True) is "True"), nor is a nested list.
std::string flag_value(const nb::handle& v, const std::string& key, bool in_list = false) {
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    if (in_list) throw PyError(key + ": a list inside a list has no command-line spelling; give one flat list");
    std::string out;
    for (nb::handle item : v) out += (out.empty() ? "" : ",") + flag_value(item, key, true);
    return out;
  }
  if (nb::isinstance<nb::bool_>(v))
    throw PyError(key + ": takes a value, not " + std::string(nb::cast<bool>(v) ? "True" : "False") +
                  " (True/False are for on/off flags such as tiled_mlp)");
  // str() of a dict or bytes would pass "{'a': 1}" or "b'64K'" on as if the user had typed it.
  if (!nb::isinstance<nb::str>(v) && !nb::isinstance<nb::int_>(v) && !nb::isinstance<nb::float_>(v) &&
      !nb::hasattr(v, "__fspath__"))
    throw PyError(key + ": a " + nb::cast<std::string>(nb::str(v.type().attr("__name__"))) +
                  " has no command-line spelling; give a string, a number, a path or a list of them");
  return without_nul(nb::cast<std::string>(nb::str(nb::hasattr(v, "__fspath__") ? v.attr("__fspath__")() : v)), key);
}

nb::object run_command(const char* command, const nb::kwargs& kwargs) {
  std::vector<std::string> args = {"seqpar", command};
  for (auto [key, value] : kwargs) {
    const std::string keyword = without_nul(nb::cast<std::string>(key), "keyword argument");
    if (keyword == "json") throw PyError("json: the results are always dicts (the --json document)");
    if (keyword == "help")
      throw PyError(fmt::format("help: the module returns documents, not help text; see help(seqpar.{}) or "
                                "`seqpar {} --help`", command, command));
    std::string name = keyword;
    for (char& c : name)
      if (c == '_') c = '-';
    if (value.is_none()) continue;  // not given, as on the command line
    const seqpar::cli::OptionKind kind = seqpar::cli::option_kind(command, "--" + name);
    if (nb::isinstance<nb::bool_>(value) && kind != seqpar::cli::OptionKind::value) {
      // A flag (or an unknown name, which the CLI then reports): True passes it, False leaves it out.
      if (nb::cast<bool>(value)) args.push_back("--" + name);
      continue;
    }
    if (kind == seqpar::cli::OptionKind::flag)
      throw PyError(fmt::format("{}: an on/off flag; give True or False, not a value", keyword));
    args.push_back("--" + name);
    args.push_back(flag_value(value, keyword));
  }
  args.push_back("--json");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());

  seqpar::cli::Captured captured;
  const int code = seqpar::cli::run(static_cast<int>(argv.size()), argv.data(), &captured);
  // An answer, an invalid plan's document (valid false, errors) or a search without an answer: the
  // document; bad input (an error report): seqpar.Error.
  if ((code == 0 || code == 1 || code == 2) && captured.document && !captured.error_document)
    return nb::module_::import_("json").attr("loads")(seqpar::dump_json(*captured.document, -1));
  std::string message = captured.error;
  if (captured.document) {
    if (auto e = captured.document->find("errors"); e != captured.document->end() && e->is_array())
      for (const auto& m : *e) message += (message.empty() ? "" : "; ") + (m.is_string() ? m.get<std::string>() : m.dump());
  }
  if (message.empty()) message = "seqpar " + std::string(command) + " exited with status " + std::to_string(code);
  throw PyError(message);
}

}  // namespace

NB_MODULE(seqpar, m) {
  m.doc() = "seqpar's simulator from Python: the `seqpar` subcommands with the same options "
            "(keyword arguments named as the flags, _ for -) and the `--json` documents as dicts.";
  nb::exception<PyError>(m, "Error", PyExc_ValueError);
  // Names and docstrings are literals: nanobind keeps the pointers.
  m.def("presets", [](const nb::kwargs& kw) { return run_command("presets", kw); },
        "seqpar presets --json: the built-in GPUs, systems and models with their sources (kind=...).");
  m.def("simulate", [](const nb::kwargs& kw) { return run_command("simulate", kw); },
        "seqpar simulate --json: one plan (model=, system=, gpus=, seq_len=, method=, sp=, ...); documents= "
        "(a packed-document workload: 'lognormal:7:1', 'hist:FILE.csv', ...), packing=, doc_seed=, doc_batches= and "
        "balancer= run it under a document mask.");
  m.def("advise", [](const nb::kwargs& kw) { return run_command("advise", kw); },
        "seqpar advise --json: the best plans for a model, system, GPU count and sequence length; documents= (with "
        "packing=, doc_seed=, doc_batches=) ranks every method and load balancer under that workload.");
  m.def("maxlen", [](const nb::kwargs& kw) { return run_command("maxlen", kw); },
        "seqpar maxlen --json: the longest sequence each plan fits; documents= (with packing=, doc_seed=, "
        "doc_batches=) searches each structure with every load balancer, the workload sampled at each length.");
  m.def("sweep", [](const nb::kwargs& kw) { return run_command("sweep", kw); },
        "seqpar sweep --json: a grid (lists for seq_len=, gpus=, sp=, method=, system=); out= is required; "
        "documents= (with packing=, doc_seed=, doc_batches=) samples the workload at each length, a point per load "
        "balancer (balancer=: a list of them).");
}
