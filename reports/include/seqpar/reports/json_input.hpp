// Reading the JSON documents that reports, calibrate and gate consume: parse errors name the file,
// field errors name the file and the field path, so bad input never surfaces as a crash.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace seqpar::reports {

// Reads and parses a JSON file; throws seqpar::Error "<path>: cannot open ..." or
// "<path>: malformed JSON: ...".
nlohmann::json load_json_file(const std::string& path);

// load_json_file for `seqpar report`: the simulator's per-term and per-phase memory breakdowns
// ("memory_terms", "memory_phases"), which no report table or figure reads, are left out while
// the file is parsed (they are about a third of a sweep point's JSON), and a prediction's points
// ("results", read one by one) keep of their model, system and group objects the fields the
// report reads: a 1 GB sweep's points are held in a third of the memory.
nlohmann::json load_report_json_file(const std::string& path);

// What a document is: "prediction", "measurement", "collection" (gathered by scripts/sweep.py)
// or "google-benchmark" (Google Benchmark's --benchmark_out format, which carries no "kind").
// Anything else throws, naming `where` and the field.
std::string document_kind(const nlohmann::json& doc, std::string_view where);

// Field access for objects; `where` names the object ("a.json: results[3]"). Missing fields and
// wrong types throw seqpar::Error naming where, the key and the expected type.
const nlohmann::json& require(const nlohmann::json& obj, std::string_view key, std::string_view where);
double require_number(const nlohmann::json& obj, std::string_view key, std::string_view where);
std::string require_string(const nlohmann::json& obj, std::string_view key, std::string_view where);
const nlohmann::json& require_array(const nlohmann::json& obj, std::string_view key, std::string_view where);
// Missing or null -> nullopt; present with the wrong type -> throws.
std::optional<double> optional_number(const nlohmann::json& obj, std::string_view key, std::string_view where);
std::optional<std::string> optional_string(const nlohmann::json& obj, std::string_view key, std::string_view where);

// Whether two copies of one figure a document writes twice (a summary and its result, a value and
// what it is derived from) agree within a relative tolerance; NaN agrees with nothing.
bool figures_agree(double a, double b, double relative);

// Lenient readers of documents the report itself wrote (report-data rows): the field's value, or the
// fallback when the document is not an object or the field is absent or of another type.
double number_or(const nlohmann::json& obj, const char* key, double fallback = 0);
std::string string_or(const nlohmann::json& obj, const char* key, std::string fallback = "");

// The argv of this process (from /proc/self/cmdline), for run_info() in subcommand callbacks
// that are not handed argc/argv. Falls back to {"seqpar"} where /proc is unavailable.
nlohmann::json run_info_of_this_process();

}  // namespace seqpar::reports
