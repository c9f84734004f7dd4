#include "seqpar/reports/document_comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report_data.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

// The workload section a sweep (per length) or simulate document writes (cli/documents.cpp).
json workload_of(const json& w, std::string_view where) {
  const json& drawn = require(w, "drawn", where);
  const json& work = require(w, "work_ratio", where);
  const std::string d = fmt::format("{}: drawn", where), r = fmt::format("{}: work_ratio", where);
  return {{"documents", require_string(w, "documents", where)},
          {"packing", string_or(w, "packing", "")},
          {"drawn_count", require_number(drawn, "count", d)},
          {"drawn_mean", require_number(drawn, "mean", d)},
          {"drawn_std", require_number(drawn, "std", d)},
          {"pieces_per_sequence", require_number(w, "pieces_per_sequence", where)},
          {"work_ratio_mean", require_number(work, "mean", r)},
          {"work_ratio_min", require_number(work, "min", r)},
          {"work_ratio_max", require_number(work, "max", r)}};
}

// A figure of the input, or null (a missing field is no number, a wrong type an error).
json rate_or_null(const json& obj, const char* key, std::string_view where) {
  const std::optional<double> v = optional_number(obj, key, where);
  return v ? json(*v) : json();
}

// Ranks 1, 2, ... by a rate (higher first; equal rates share a rank) over the rows that fit, or
// over every row with a rate where none fits (simulate's memory options as given: its own table
// ranks them so); 0 where a row is not ranked.
void rank_by(json& rows, const char* rate, const char* fits, const char* rank) {
  const bool any_fits = std::any_of(rows.begin(), rows.end(), [&](const json& r) { return r[rate].is_number() && r[fits].get<bool>(); });
  auto ranked = [&](const json& r) { return r[rate].is_number() && (r[fits].get<bool>() || !any_fits); };
  for (json& r : rows) {
    if (!ranked(r)) {
      r[rank] = 0;
      continue;
    }
    int k = 1;
    for (const json& o : rows) k += ranked(o) && o[rate].get<double>() > r[rate].get<double>();
    r[rank] = k;
  }
}

std::string row_label(const json& r) {
  const std::string b = r["balancer"].get<std::string>();
  return b.empty() || b == "-" ? r["structure"].get<std::string>() : fmt::format("{} ({})", r["structure"].get<std::string>(), b);
}

// Ranks both ways, orders the rows by the workload's rank and writes the one-line answer.
void finish(json& e) {
  json& rows = e["rows"];
  rank_by(rows, "tokens_per_s_per_gpu", "fits", "rank");
  rank_by(rows, "one_sequence_tokens_per_s_per_gpu", "one_sequence_fits", "one_sequence_rank");
  std::vector<json> sorted(rows.begin(), rows.end());
  auto key = [](const json& r) { const int k = r["rank"].get<int>(); return k == 0 ? 1 << 30 : k; };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const json& a, const json& b) { return key(a) < key(b); });
  rows = sorted;
  const json* best = nullptr;
  const json* best_one = nullptr;
  for (const json& r : rows) {
    if (r["rank"] == 1 && !best) best = &r;
    if (r["one_sequence_rank"] == 1 && !best_one) best_one = &r;
  }
  const std::string where = fmt::format("{} on {} GPUs", format_count(e["seq_len"].get<std::int64_t>()), e["gpus"].get<int>());
  // Fitting plans are ranked where any fits; else the plans as given (simulate's memory options).
  const bool fit = best && (*best)["fits"].get<bool>();
  const std::string none = fit ? "" : " (none fits at these memory options)";
  if (!best) {
    e["answer"] = fmt::format("{}: no plan has numbers under the workload", where);
  } else if (!best_one) {
    e["answer"] = fmt::format("{}: under the workload {} is fastest{}; no plan has numbers on one causal sequence{}",
                              where, row_label(*best), none,
                              e.value("one_sequence_from", "") == "advise"
                                  ? " (give the same advise without --documents beside it for that ranking)"
                                  : "");
  } else if (best == best_one) {
    e["answer"] = fmt::format("{}: {} is fastest both under the workload and on one causal sequence{}", where,
                              row_label(*best), none);
  } else {
    e["answer"] = fmt::format("{}: the ranking turns over: under the workload {} is fastest ({} on one causal sequence); "
                              "on one causal sequence {} ({} under the workload)",
                              where, row_label(*best), (*best)["one_sequence_rank"].get<int>() == 0
                                                           ? std::string("does not fit")
                                                           : fmt::format("#{}", (*best)["one_sequence_rank"].get<int>()),
                              row_label(*best_one),
                              (*best_one)["rank"].get<int>() == 0 ? std::string("does not fit")
                                                                  : fmt::format("#{}", (*best_one)["rank"].get<int>()));
  }
}

std::string system_name(const json& j, std::string_view where) {
  const json& s = require(j, "system", where);
  return s.is_object() ? require_string(s, "name", fmt::format("{}: system", where)) : s.get<std::string>();
}
std::string model_of(const json& j) {
  if (!j.contains("model")) return "";
  return j["model"].is_string() ? j["model"].get<std::string>() : string_or(j["model"], "name", "");
}

// `seqpar sweep --documents`: the results grouped by (system, GPUs, length), each point's counts
// under "documents", the workload per length under "workloads".
json from_sweep(const json& doc, std::string_view where, const std::string& src) {
  std::map<std::int64_t, json> workloads;
  const json& ws = require_array(doc, "workloads", where);
  for (std::size_t i = 0; i < ws.size(); ++i) {
    const std::string w = fmt::format("{}: workloads[{}]", where, i);
    workloads[static_cast<std::int64_t>(require_number(ws[i], "seq_len", w))] = workload_of(ws[i], w);
  }
  json out = json::array();
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::size_t> cell;
  const json& results = require_array(doc, "results", where);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string w = fmt::format("{}: results[{}]", where, i);
    const json& r = results[i];
    if (!r.contains("documents")) continue;
    const json& plan = require(r, "plan", w);
    const json& d = require(r, "documents", w);
    const std::string dw = w + ": documents";
    const std::string system = system_name(r, w);
    const auto gpus = static_cast<std::int64_t>(require_number(plan, "gpus", w + ": plan"));
    const auto seq = static_cast<std::int64_t>(require_number(plan, "seq_len", w + ": plan"));
    auto [it, added] = cell.try_emplace({system, gpus, seq}, out.size());
    if (added) {
      if (!workloads.count(seq)) throw Error(fmt::format("{}: no entry of 'workloads' has seq_len {}", where, seq));
      out.push_back({{"source", src}, {"system", system}, {"model", model_of(r)}, {"gpus", gpus}, {"seq_len", seq},
                     {"workload", workloads[seq]}, {"rows", json::array()}});
    }
    const bool fits = r.value("valid", false) && r.value("fits", false);
    const json& one = d.contains("one_sequence") ? d["one_sequence"] : json();
    const bool one_fits = one.is_object() && one.value("fits", false);
    const json& imb = require(d, "imbalance", dw);
    out[it->second]["rows"].push_back(
        {{"structure", structure_label(plan)},
         {"balancer", plan.value("sp", 1) == 1                ? "-"
                      : plan.value("ring_degree", 1) > 1 ? require_string(d, "balancer", dw)
                                                         : "heads"},
         {"ring_degree", plan.value("ring_degree", 1)},
         {"tokens_per_s_per_gpu", r.value("valid", false) ? rate_or_null(r, "tokens_per_s_per_gpu", w) : json()},
         {"fits", fits},
         {"one_sequence_tokens_per_s_per_gpu", one.is_object() ? rate_or_null(one, "tokens_per_s_per_gpu", dw) : json()},
         {"one_sequence_fits", one_fits},
         {"imbalance_mean", require_number(imb, "mean", dw)},
         {"imbalance_p95", require_number(imb, "p95", dw)},
         {"rank_work", d.contains("rank_work") ? d["rank_work"] : json::array()}});
  }
  return out;
}

// `seqpar simulate --documents`: one cell, its methods x balancers table under "document_table".
json from_simulate(const json& doc, std::string_view where, const std::string& src) {
  const json& plan = require(doc, "plan", where);
  json e = {{"source", src}, {"system", system_name(doc, where)}, {"model", model_of(doc)},
            {"gpus", static_cast<std::int64_t>(require_number(plan, "gpus", fmt::format("{}: plan", where)))},
            {"seq_len", static_cast<std::int64_t>(require_number(plan, "seq_len", fmt::format("{}: plan", where)))},
            {"workload", workload_of(require(doc, "workload", where), fmt::format("{}: workload", where))},
            {"rows", json::array()}};
  const json& table = require_array(doc, "document_table", where);
  for (std::size_t i = 0; i < table.size(); ++i) {
    const std::string w = fmt::format("{}: document_table[{}]", where, i);
    const json& r = table[i];
    if (r.contains("refused")) continue;  // a plan or balancer rule: no numbers to rank
    const json& imb = require(r, "imbalance", w);
    const std::string structure = require_string(r, "plan", w);
    const bool fits = r.value("fits", true), one_fits = r.value("one_sequence_fits", true);
    e["rows"].push_back({{"structure", structure},
                         {"balancer", require_string(r, "balancer", w)},
                         {"ring_degree", r.value("ring_degree", 1)},
                         {"tokens_per_s_per_gpu", rate_or_null(r, "tokens_per_s_per_gpu", w)},
                         {"fits", fits},
                         {"one_sequence_tokens_per_s_per_gpu", rate_or_null(r, "one_sequence_tokens_per_s_per_gpu", w)},
                         {"one_sequence_fits", one_fits},
                         {"imbalance_mean", require_number(imb, "mean", w + ": imbalance")},
                         {"imbalance_p95", require_number(imb, "p95", w + ": imbalance")},
                         {"rank_work", r.contains("rank_work") ? r["rank_work"] : json::array()}});
  }
  return json::array({e});
}

// `seqpar advise --documents`: its ranked plans under the workload; the one-sequence figures come
// from an advise without --documents among the inputs (pair_one_sequence).
json from_advise(const json& doc, std::string_view where, const std::string& src) {
  json e = {{"source", src}, {"system", system_name(doc, where)}, {"model", model_of(doc)},
            {"gpus", static_cast<std::int64_t>(require_number(doc, "gpus", where))},
            {"seq_len", static_cast<std::int64_t>(require_number(doc, "seq_len", where))},
            {"workload", workload_of(require(doc, "workload", where), fmt::format("{}: workload", where))},
            {"one_sequence_from", "advise"},
            {"rows", json::array()}};
  const json& ranked = require_array(doc, "ranked", where);
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const std::string w = fmt::format("{}: ranked[{}]", where, i);
    const json& r = ranked[i];
    const json& plan = require(r, "plan", w);
    const int ring = plan.value("ring_degree", 1);
    e["rows"].push_back({{"structure", structure_label(plan)},
                         {"balancer", plan.value("sp", 1) == 1 ? "-" : ring > 1 ? string_or(r, "balancer", "-") : "heads"},
                         {"ring_degree", ring},
                         {"tokens_per_s_per_gpu", rate_or_null(r, "tokens_per_s_per_gpu", w)},
                         {"fits", r.value("fits", true)},
                         {"one_sequence_tokens_per_s_per_gpu", json()},
                         {"one_sequence_fits", false},
                         {"imbalance_mean", json()},  // advise's rows carry no per-rank counts
                         {"imbalance_p95", json()},
                         {"rank_work", json::array()}});
  }
  return e;
}

}  // namespace

void pair_one_sequence(json& entries, const json& points) {
  for (json& e : entries) {
    if (e.value("one_sequence_from", "") != "advise") continue;
    // Each structure's fastest fitting plan among the predictions without a workload, same cell.
    std::map<std::string, double> best;
    for (const json& p : points) {
      if (p.value("origin", "") != "prediction" || !p.value("balancer", std::string()).empty()) continue;
      if (p["system"] != e["system"] || p["model"] != e["model"] || !p["valid"].get<bool>() || !p["fits"].get<bool>() ||
          !p["tokens_per_s_per_gpu"].is_number())
        continue;
      if (number_or(p["plan"], "gpus") != e["gpus"].get<double>() || number_or(p["plan"], "seq_len") != e["seq_len"].get<double>())
        continue;
      double& b = best[structure_label(p["plan"])];
      b = std::max(b, p["tokens_per_s_per_gpu"].get<double>());
    }
    for (json& r : e["rows"]) {
      const auto it = best.find(r["structure"].get<std::string>());
      r["one_sequence_tokens_per_s_per_gpu"] = it == best.end() ? json() : json(it->second);
      r["one_sequence_fits"] = it != best.end();
    }
    finish(e);
  }
}

json document_comparisons(const json& doc, std::string_view where, const std::string& src) {
  json out = doc.contains("workloads")                                 ? from_sweep(doc, where, src)
             : doc.contains("document_table") && doc.contains("workload") ? from_simulate(doc, where, src)
             : doc.contains("ranked") && doc.contains("workload")         ? json::array({from_advise(doc, where, src)})
                                                                          : json::array();
  for (json& e : out) finish(e);
  return out;
}

}  // namespace seqpar::reports
