#include "seqpar/reports/json_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/run_info.hpp"

namespace seqpar::reports {

using nlohmann::json;

json load_json_file(const std::string& path) { return read_json_file(path); }

namespace {

// Of a simulator's point, what the report reads (report_data.cpp's add_prediction_point and
// document_comparison.cpp): the model's and system's names and the system's placement fields, the
// placement's label. The whole model, system and group objects are over half of a point's values,
// and a sweep holds hundreds of thousands of points.
void keep_what_the_report_reads(json& point) {
  if (!point.is_object()) return;
  auto keep_only = [&](const char* field, std::initializer_list<const char*> keys) {
    auto it = point.find(field);
    if (it == point.end() || !it->is_object()) return;  // malformed: left for the reader to name
    json kept = json::object();
    for (const char* k : keys)
      if (auto v = it->find(k); v != it->end()) kept[k] = std::move(*v);
    *it = std::move(kept);
  };
  keep_only("model", {"name"});
  keep_only("system", {"name", "gpu", "intra_link", "nodes", "gpus_per_node", "memory_capacity_bytes"});
  keep_only("groups", {"label"});
}

}  // namespace

json load_report_json_file(const std::string& path) {
  // A prediction's "results" (a sweep's points) are read one by one and kept in part; any other
  // document's whole. The simulator's per-term and per-phase memory breakdowns are never read.
  json results = json::array();
  json doc = read_json_file_streaming(
      path, "results",
      [&](json&& point, std::size_t, const json& head) {
        if (head.is_object() && head.value("kind", json()) == "prediction") keep_what_the_report_reads(point);
        results.push_back(std::move(point));
      },
      {"memory_terms", "memory_phases"});
  if (auto it = doc.find("results"); it != doc.end() && it->is_array() && it->empty()) *it = std::move(results);
  return doc;
}

std::string document_kind(const json& doc, std::string_view where) {
  if (!doc.is_object()) throw Error(fmt::format("{}: the document must be a JSON object", where));
  // Every version this seqpar has written reads (the oldest documents carry none); a newer one may
  // mean fields this reader would misread, so it is refused rather than half shown.
  if (auto v = doc.find("schema_version"); v != doc.end()) {
    if (!v->is_number_integer() || v->get<std::int64_t>() < 1)
      throw Error(fmt::format("{}: field 'schema_version' must be a whole number from 1, got {}", where,
                              dump_json(*v, -1)));
    if (v->get<std::int64_t>() > kSchemaVersion)
      throw Error(fmt::format("{}: schema_version {} is newer than this seqpar reads (1 to {}): a newer seqpar "
                              "wrote it; read it with that version", where, v->get<std::int64_t>(), kSchemaVersion));
  }
  if (!doc.contains("kind")) {
    if (doc.contains("benchmarks") && doc.contains("context")) return "google-benchmark";
    throw Error(fmt::format(
        "{}: missing field 'kind' (expected \"prediction\", \"measurement\" or \"collection\", or a "
        "Google Benchmark document with 'context' and 'benchmarks')", where));
  }
  const json& k = doc["kind"];
  if (!k.is_string()) throw Error(fmt::format("{}: field 'kind' must be a string", where));
  std::string kind = k.get<std::string>();
  if (kind != "prediction" && kind != "measurement" && kind != "collection")
    throw Error(fmt::format("{}: unknown kind '{}' (expected \"prediction\", \"measurement\" or \"collection\")",
                            where, kind));
  return kind;
}

const json& require(const json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) throw Error(fmt::format("{}: expected a JSON object", where));
  auto it = obj.find(key);
  if (it == obj.end()) throw Error(fmt::format("{}: missing field '{}'", where, key));
  return *it;
}

double require_number(const json& obj, std::string_view key, std::string_view where) {
  const json& v = require(obj, key, where);
  if (!v.is_number()) throw Error(fmt::format("{}: field '{}' must be a number, got {}", where, key, dump_json(v, -1)));
  return v.get<double>();
}

std::string require_string(const json& obj, std::string_view key, std::string_view where) {
  const json& v = require(obj, key, where);
  if (!v.is_string()) throw Error(fmt::format("{}: field '{}' must be a string, got {}", where, key, dump_json(v, -1)));
  return v.get<std::string>();
}

const json& require_array(const json& obj, std::string_view key, std::string_view where) {
  const json& v = require(obj, key, where);
  if (!v.is_array()) throw Error(fmt::format("{}: field '{}' must be an array", where, key));
  return v;
}

std::optional<double> optional_number(const json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) throw Error(fmt::format("{}: expected a JSON object", where));
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw Error(fmt::format("{}: field '{}' must be a number or null, got {}", where, key, dump_json(*it, -1)));
  return it->get<double>();
}

std::optional<std::string> optional_string(const json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) throw Error(fmt::format("{}: expected a JSON object", where));
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw Error(fmt::format("{}: field '{}' must be a string or null, got {}", where, key, dump_json(*it, -1)));
  return it->get<std::string>();
}

json run_info_of_this_process() {
  std::vector<std::string> args;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  if (args.empty()) args.emplace_back("seqpar");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return run_info(static_cast<int>(argv.size()), argv.data());
}

bool figures_agree(double a, double b, double relative) {
  return std::fabs(a - b) <= relative * std::max(std::fabs(a), std::fabs(b));
}

double number_or(const json& obj, const char* key, double fallback) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number() ? obj[key].get<double>() : fallback;
}

std::string string_or(const json& obj, const char* key, std::string fallback) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : fallback;
}

}  // namespace seqpar::reports
