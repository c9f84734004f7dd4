#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "seqpar/bench/attention_engine_table.hpp"

namespace seqpar::bench {
namespace {

struct Timing {
  double time_s = 0, tflops = 0;
};

struct Shape {
  nlohmann::json key;  // the fields that name the shape
  std::optional<Timing> seqpar, cudnn;
};

std::optional<Timing> timing_of(const nlohmann::json& row) {
  if (row.contains("error") || !row.contains("time_s") || !row.contains("tflops")) return std::nullopt;
  if (!row["time_s"].is_number() || !row["tflops"].is_number()) return std::nullopt;
  return Timing{row["time_s"].get<double>(), row["tflops"].get<double>()};
}

std::string cell(const std::optional<Timing>& t) {
  return t ? fmt::format("{:>10.3f} {:>9.1f}", t->time_s * 1e3, t->tflops) : fmt::format("{:>10} {:>9}", "-", "-");
}

}  // namespace

std::string attention_engine_table(const nlohmann::json& results) {
  std::vector<Shape> shapes;
  for (const nlohmann::json& row : results) {
    if (!row.is_object() || !row.contains("attention_engine") || !row["attention_engine"].is_string()) continue;
    nlohmann::json key = nlohmann::json::object();
    for (const char* f : {"op", "dtype", "head_dim", "causal", "seq_len", "batch", "heads", "kv_heads"})
      key[f] = row.value(f, nlohmann::json());
    auto it = std::find_if(shapes.begin(), shapes.end(), [&](const Shape& s) { return s.key == key; });
    if (it == shapes.end()) it = shapes.insert(shapes.end(), Shape{key, std::nullopt, std::nullopt});
    const std::string engine = row["attention_engine"].get<std::string>();
    if (engine == "seqpar") it->seqpar = timing_of(row);
    else if (engine == "cudnn") it->cudnn = timing_of(row);
  }
  std::string out = fmt::format("# attention engines side by side (ratio = seqpar time / cudnn time)\n"
                                "{:<4} {:<5} {:>4} {:<6} {:>8} {:>10} {:>9} {:>10} {:>9} {:>12}\n",
                                "op", "dtype", "d", "mask", "seq_len", "seqpar_ms", "seqpar_TF", "cudnn_ms",
                                "cudnn_TF", "cudnn/seqpar");
  for (const Shape& s : shapes) {
    const nlohmann::json& k = s.key;
    const std::string ratio = s.seqpar && s.cudnn && s.cudnn->time_s > 0
                                  ? fmt::format("{:>11.2f}x", s.seqpar->time_s / s.cudnn->time_s)
                                  : fmt::format("{:>12}", "-");
    out += fmt::format("{:<4} {:<5} {:>4} {:<6} {:>8} {} {} {}\n", k["op"].is_string() ? k["op"].get<std::string>() : "?",
                       k["dtype"].is_string() ? k["dtype"].get<std::string>() : "?", k["head_dim"].dump(),
                       k["causal"].is_boolean() ? (k["causal"].get<bool>() ? "causal" : "full") : "?",
                       k["seq_len"].dump(), cell(s.seqpar), cell(s.cudnn), ratio);
  }
  return out;
}

}  // namespace seqpar::bench
