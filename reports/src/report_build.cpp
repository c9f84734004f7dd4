#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/reports/figure_kinds.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/report_data.hpp"
#include "seqpar/reports/validation_verdict.hpp"

namespace seqpar::reports {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

std::int64_t int_of(const json& j, const char* key) { return static_cast<std::int64_t>(number_or(j, key)); }
std::string dash_if_empty(const std::string& s) { return s.empty() ? "-" : s; }

std::string fmt_seconds(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3g} s", s);
}
std::string fmt_gib(double b) { return fmt::format("{:.1f} GiB", b / (1024.0 * 1024 * 1024)); }
std::string fmt_seq(double n) { return format_count(static_cast<std::int64_t>(n)); }

bool plottable(const json& p) { return p["valid"].get<bool>() && p["fits"].get<bool>() && p["tokens_per_s_per_gpu"].is_number(); }

// Points grouped by (system, model, gpus), in first-seen order; the points are the caller's, not
// copies (a sweep holds hundreds of thousands).
using GroupKey = std::tuple<std::string, std::string, std::int64_t>;
using PointRefs = std::vector<const json*>;
std::vector<std::pair<GroupKey, PointRefs>> groups_of(const json& points) {
  std::vector<std::pair<GroupKey, PointRefs>> out;
  std::map<GroupKey, std::size_t> index;
  for (const auto& p : points) {
    GroupKey k{p["system"].get<std::string>(), p["model"].get<std::string>(), int_of(p["plan"], "gpus")};
    const auto [it, fresh] = index.try_emplace(std::move(k), out.size());
    if (fresh) out.push_back({it->first, {}});
    out[it->second].second.push_back(&p);
  }
  return out;
}

std::vector<json> values_of(const PointRefs& pts) {
  std::vector<json> out;
  out.reserve(pts.size());
  for (const json* p : pts) out.push_back(*p);
  return out;
}

std::string group_title(const GroupKey& k) {
  return fmt::format("{} on {}, {} GPUs", std::get<1>(k), std::get<0>(k), std::get<2>(k));
}

std::string sources_of(const std::vector<json>& pts) {
  std::set<std::string> ids;
  for (const auto& p : pts) ids.insert(p["source"].get<std::string>());
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out;
}

std::string modes_of(const std::vector<json>& pts) {
  std::set<std::string> modes;
  for (const auto& p : pts) modes.insert(p["mode"].get<std::string>());
  std::string out;
  for (const auto& m : modes) out += (out.empty() ? "" : "; ") + describe_mode(m);
  return out;
}

// The points of a group at its longest sequence with a time breakdown: the case where the plans differ most.
// The breakdowns are drawn at one sequence length per group: the one where the most plans fit
// (the longest of those), so the bars compare plans that can run rather than a row of OOMs.
PointRefs breakdown_selection(const PointRefs& pts, std::int64_t* seq_out) {
  std::map<std::int64_t, int> fitting;
  for (const json* p : pts)
    if ((*p)["valid"].get<bool>() && !(*p)["time"].empty())
      fitting[int_of((*p)["plan"], "seq_len")] += (*p)["fits"].get<bool>() ? 1 : 0;
  std::int64_t seq = -1;
  int most = -1;
  for (const auto& [len, n] : fitting)  // ascending lengths: ties go to the longer one
    if (n >= most) {
      most = n;
      seq = len;
    }
  PointRefs out;
  for (const json* p : pts)
    if ((*p)["valid"].get<bool>() && !(*p)["time"].empty() && int_of((*p)["plan"], "seq_len") == seq) out.push_back(p);
  *seq_out = seq;
  return out;
}

// Stacked parts of the step time; the simulator's step is compute + exposed comm + optimizer + exposed offload.
std::vector<std::pair<std::string, double>> time_parts(const json& p) {
  const json& t = p["time"];
  std::vector<std::pair<std::string, double>> parts;
  parts.push_back({"compute", number_or(t, "compute_s")});
  if (t.contains("exposed_attention_comm_s")) {
    parts.push_back({"exposed attention comm", number_or(t, "exposed_attention_comm_s")});
    parts.push_back({"exposed data-parallel comm", number_or(t, "exposed_dp_comm_s")});
  } else {
    parts.push_back({"exposed comm", number_or(t, "exposed_comm_s")});
  }
  parts.push_back({"optimizer", number_or(t, "optimizer_s")});
  parts.push_back({"exposed offload", number_or(t, "exposed_offload_s")});
  double sum = 0;
  for (auto& [k, v] : parts) sum += v;
  double step = number_or(p, "step_time_s");
  if (step - sum > 0.005 * step) parts.push_back({"other", step - sum});
  return parts;
}

std::string link_label(const json& p) {
  std::string link = string_or(p, "intra_link");
  std::string intra = link == "pcie" ? "PCIe" : (link == "nvswitch" || link == "nvlink") ? "NVLink" : link.empty() ? "link unknown" : link;
  double nodes = number_or(p, "nodes", 1);
  if (nodes > 1) return fmt::format("{} nodes: {} + InfiniBand", nodes, intra);
  return intra;
}

}  // namespace

namespace {

std::string group_file(const std::string& prefix, const GroupKey& key) {
  return prefix + slug(std::get<0>(key) + "-" + std::get<1>(key)) + fmt::format("-g{}.png", std::get<2>(key));
}

// Throughput against sequence length, a panel per SP size, a line per method; null when nothing fits.
json throughput_figure(const GroupKey& key, const std::vector<json>& pts) {
  std::map<std::int64_t, std::map<std::string, std::vector<std::pair<double, double>>>> panels;
  for (const auto& p : pts) {
    if (!plottable(p)) continue;
    // One line per method and split; each point carries its own fastest memory options.
    std::string label = structure_label(p["plan"]);
    if (p["origin"] == "measurement") label += " (measured)";
    panels[int_of(p["plan"], "sp")][label].push_back({number_or(p["plan"], "seq_len"), number_or(p, "tokens_per_s_per_gpu")});
  }
  if (panels.empty()) return nullptr;
  json fig = figure_spec(kLinesFigure, "throughput", group_file("throughput-", key));
  fig.update({{"title", "Throughput: " + group_title(key)}, {"xlabel", "sequence length (tokens)"},
              {"ylabel", "tokens/s per GPU"}, {"xscale", "log2"}, {"panels", json::array()},
              {"caption", fmt::format("Tokens/s per GPU against sequence length, {}; plans that do not fit in "
                                      "memory are left out. Sources: {} ({}).", group_title(key), sources_of(pts), modes_of(pts))}});
  for (auto& [sp, series] : panels) {
    json panel = {{"title", fmt::format("SP = {}", sp)}, {"series", json::array()}};
    for (auto& [label, xy] : series) {
      std::sort(xy.begin(), xy.end());
      json s = {{"label", label}, {"x", json::array()}, {"y", json::array()}};
      for (auto& [x, y] : xy) { s["x"].push_back(x); s["y"].push_back(y); }
      panel["series"].push_back(s);
    }
    fig["panels"].push_back(panel);
  }
  return fig;
}

// The bar labels of a breakdown: each plan, marked when it does not fit.
json breakdown_categories(const std::vector<json>& sel) {
  json cats = json::array();
  for (const auto& p : sel) cats.push_back(p["plan_label"].get<std::string>() + (p["fits"].get<bool>() ? "" : " (OOM)"));
  return cats;
}

json step_time_figure(const GroupKey& key, const std::vector<json>& sel, const std::string& where) {
  std::vector<std::vector<std::pair<std::string, double>>> parts;
  for (const auto& p : sel) parts.push_back(time_parts(p));
  std::vector<std::string> names;
  for (const auto& ps : parts) for (const auto& [n, v] : ps) if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  json tstacks = json::array();
  for (const auto& n : names) {
    json vals = json::array();
    for (const auto& ps : parts) {
      double v = 0;
      for (const auto& [k, x] : ps) if (k == n) v = x;
      vals.push_back(v);
    }
    tstacks.push_back({{"label", n}, {"values", vals}});
  }
  json fig = figure_spec(kStackedBarsFigure, "step_time", group_file("step-time-", key));
  fig.update({{"title", "Step time: " + where}, {"ylabel", "seconds per step"}, {"categories", breakdown_categories(sel)},
              {"stacks", tstacks},
              {"caption", fmt::format("Step-time breakdown, {}. Sources: {} ({}).", where, sources_of(sel), modes_of(sel))}});
  return fig;
}

// The parts of the peak memory against the device capacity; null when no point has memory parts.
json memory_figure(const GroupKey& key, const std::vector<json>& sel, const std::string& where) {
  std::vector<std::string> mnames;
  for (const auto& p : sel) for (auto& [k, v] : p["memory"].items()) if (std::find(mnames.begin(), mnames.end(), k) == mnames.end()) mnames.push_back(k);
  if (mnames.empty()) return nullptr;
  json mstacks = json::array();
  for (const auto& n : mnames) {
    json vals = json::array();
    for (const auto& p : sel) vals.push_back(number_or(p["memory"], n.c_str()) / (1024.0 * 1024 * 1024));
    std::string label = n.size() > 6 && n.ends_with("_bytes") ? n.substr(0, n.size() - 6) : n;
    std::replace(label.begin(), label.end(), '_', ' ');
    mstacks.push_back({{"label", label}, {"values", vals}});
  }
  json fig = figure_spec(kStackedBarsFigure, "memory", group_file("memory-", key));
  fig.update({{"title", "Memory per GPU: " + where}, {"ylabel", "GiB per GPU"}, {"categories", breakdown_categories(sel)},
              {"stacks", mstacks},
              {"caption", fmt::format("Peak memory per GPU by part against the device capacity, {}. Sources: {} ({}).",
                                      where, sources_of(sel), modes_of(sel))}});
  double cap = number_or(sel.front(), "memory_capacity_bytes");
  if (cap > 0) fig["hline"] = {{"y", cap / (1024.0 * 1024 * 1024)}, {"label", "device capacity"}};
  return fig;
}

// One line plot's panel for `gpus` GPUs: a series per (label, curve of x -> y), in the given order.
template <typename Lines>
json gpus_panel(std::int64_t gpus, const Lines& lines) {
  json panel = {{"title", fmt::format("{} GPUs", gpus)}, {"series", json::array()}};
  for (const auto& [label, curve] : lines) {
    json s = {{"label", label}, {"x", json::array()}, {"y", json::array()}};
    for (const auto& [x, y] : curve) { s["x"].push_back(x); s["y"].push_back(y); }
    panel["series"].push_back(s);
  }
  return panel;
}

// The same model on different systems: best plan's throughput per system, a panel per GPU count.
void add_systems_figures(const json& points, json& figs) {
  std::map<std::string, std::map<std::int64_t, std::map<std::string, std::map<double, double>>>> by_model;
  std::map<std::string, std::vector<json>> model_points;
  for (const auto& p : points) {
    if (p["origin"] != "prediction" || !plottable(p)) continue;
    std::string sys = p["system"].get<std::string>() + " (" + link_label(p) + ")";
    double& best = by_model[p["model"].get<std::string>()][int_of(p["plan"], "gpus")][sys][number_or(p["plan"], "seq_len")];
    best = std::max(best, number_or(p, "tokens_per_s_per_gpu"));
    model_points[p["model"].get<std::string>()].push_back(p);
  }
  for (const auto& [model, by_gpus] : by_model) {
    json panels = json::array();
    for (const auto& [gpus, systems] : by_gpus) {
      if (systems.size() < 2) continue;
      panels.push_back(gpus_panel(gpus, systems));
    }
    if (panels.empty()) continue;
    json fig = figure_spec(kLinesFigure, "systems", "systems-" + slug(model) + ".png");
    fig.update({{"title", "Systems side by side: " + model}, {"xlabel", "sequence length (tokens)"},
                {"ylabel", "best tokens/s per GPU"}, {"xscale", "log2"}, {"panels", panels},
                {"caption", fmt::format("{}: throughput of the best plan at each sequence length on each system "
                                        "(intra-node link; nodes). Sources: {} ({}).", model,
                                        sources_of(model_points[model]), modes_of(model_points[model]))}});
    figs.push_back(fig);
  }
}

// The method comparison's cells of each (system, model), in first-seen order.
std::vector<std::pair<std::pair<std::string, std::string>, std::vector<json>>> comparison_groups(const json& cells) {
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<json>>> out;
  for (const auto& c : cells) {
    const std::pair<std::string, std::string> k{c["system"].get<std::string>(), c["model"].get<std::string>()};
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == k; });
    if (it == out.end()) out.push_back({k, {c}});
    else it->second.push_back(c);
  }
  return out;
}

// A panel per GPU count, a line per method (in the comparison's method order): `y` of each method
// at each length where it has one.
json method_panels(const std::vector<json>& cells, const std::function<json(const json& method)>& y) {
  std::map<std::int64_t, std::vector<std::pair<std::string, std::map<double, double>>>> by_gpus;
  for (const auto& c : cells)
    for (const auto& m : c["methods"]) {
      const json v = y(m);
      if (!v.is_number()) continue;
      auto& lines = by_gpus[int_of(c, "gpus")];
      const std::string method = m["method"].get<std::string>();
      auto it = std::find_if(lines.begin(), lines.end(), [&](const auto& l) { return l.first == method; });
      if (it == lines.end()) it = lines.insert(lines.end(), {method, {}});
      it->second[number_or(c, "seq_len")] = v.get<double>();
    }
  json panels = json::array();
  for (const auto& [gpus, methods] : by_gpus) panels.push_back(gpus_panel(gpus, methods));
  return panels;
}

// What each method costs against the best plan, and where each stops fitting: per (system, model),
// throughput relative to the best plan at each length (the best is the line at 1.0) and peak memory
// against the capacity, on a log-scaled length axis.
void add_method_figures(const json& cells, json& figs) {
  for (const auto& [key, group] : comparison_groups(cells)) {
    const auto& [system, model] = key;
    const std::string where = fmt::format("{} on {}", model, system);
    std::set<std::string> srcs;
    for (const auto& c : group)
      for (const auto& m : c["methods"]) srcs.insert(m["source"].get<std::string>());
    std::string sources;
    for (const auto& id : srcs) sources += (sources.empty() ? "" : ", ") + id;
    json rel = method_panels(group, [](const json& m) { return m["relative"]; });
    if (!rel.empty()) {
      // The y range starts a little below the worst method shown, so small costs stay visible.
      double lowest = 1;
      for (const auto& c : group)
        for (const auto& m : c["methods"])
          if (m["relative"].is_number()) lowest = std::min(lowest, m["relative"].get<double>());
      const double floor = std::clamp(std::floor((lowest - 0.05) * 10) / 10, 0.0, 0.9);
      json fig = figure_spec(kLinesFigure, "relative", "relative-throughput-" + slug(system + "-" + model) + ".png");
      fig.update({{"title", "Throughput relative to the best plan: " + where}, {"xlabel", "sequence length (tokens)"},
                  {"ylabel", "tokens/s per GPU / best plan's"}, {"xscale", "log2"}, {"ylim", {floor, 1.02}},
                  {"hline", {{"y", 1.0}, {"label", "best plan at each length"}}}, {"panels", rel},
                  {"caption", fmt::format("{}: each method's fastest plan that fits (any SP degree and memory options), "
                                          "as a fraction of the fastest plan at that length; the best plan is the line at "
                                          "1.0 and a missing point means the method does not fit. Modelled by the "
                                          "simulator. Sources: {}.", where, sources.empty() ? "-" : sources)}});
      figs.push_back(fig);
    }
    json mem = method_panels(group, [](const json& m) {
      return m["peak_memory_bytes"].is_number() ? json(m["peak_memory_bytes"].get<double>() / (1024.0 * 1024 * 1024)) : json();
    });
    double cap = 0;
    for (const auto& c : group)
      for (const auto& m : c["methods"]) cap = std::max(cap, number_or(m, "memory_capacity_bytes"));
    if (mem.empty() || cap <= 0) continue;
    json fig = figure_spec(kLinesFigure, "memory_capacity", "memory-capacity-" + slug(system + "-" + model) + ".png");
    fig.update({{"title", "Peak memory against capacity: " + where}, {"xlabel", "sequence length (tokens)"},
                {"ylabel", "peak GiB per GPU"}, {"xscale", "log2"}, {"yscale", "log2"},
                {"hline", {{"y", cap / (1024.0 * 1024 * 1024)}, {"label", "device capacity: above it, no fit"}}},
                {"panels", mem},
                {"caption", fmt::format("{}: peak memory per GPU of each method's fastest plan that fits or, where none "
                                        "fits, of its leanest plan, against the device capacity ({}); a line crossing the "
                                        "capacity is where the method stops fitting. Modelled by the simulator. "
                                        "Sources: {}.", where, fmt_gib(cap), sources.empty() ? "-" : sources)}});
    figs.push_back(fig);
  }
}

json parity_figure(const json& comparisons) {
  json pts = json::array();
  std::vector<json> srcs;
  for (const auto& c : comparisons) {
    pts.push_back({{"x", c["predicted_step_time_s"]}, {"y", c["measured_step_time_s"]},
                   {"label", c["plan_label"].get<std::string>() + " " + fmt_seq(number_or(c, "seq_len"))}});
    srcs.push_back({{"source", c["prediction_source"]}, {"mode", to_string(Mode::modelled)}});
    srcs.push_back({{"source", c["measurement_source"]}, {"mode", c["measurement_mode"]}});
  }
  json fig = figure_spec(kParityFigure, "validation", "predicted-vs-measured.png");
  fig.update({{"title", "Predicted against measured step time"}, {"xlabel", "predicted step time (s)"},
              {"ylabel", "measured step time (s)"}, {"points", pts},
              {"caption", fmt::format("Each point is one plan; the diagonal is a perfect prediction. Sources: {} ({}).",
                                      sources_of(srcs), modes_of(srcs))}});
  return fig;
}

}  // namespace

namespace {

// Per ring rank attention work under a packed-document workload (document_comparison.hpp): for the
// fastest ring structure under the workload, and the fastest on one causal sequence where that is
// another, a line per load balancer over the ring ranks, each rank's work over the mean of the ranks.
void add_document_figures(const json& entries, json& figs) {
  int n = 0;
  for (const auto& e : entries) {
    std::vector<std::string> picked;
    for (const char* rank : {"rank", "one_sequence_rank"}) {
      const json* best = nullptr;
      for (const auto& r : e["rows"])
        if (number_or(r, "ring_degree", 1) > 1 && !r["rank_work"].empty() && r[rank].get<int>() > 0 &&
            (!best || r[rank].get<int>() < (*best)[rank].get<int>()))
          best = &r;
      if (best && std::find(picked.begin(), picked.end(), (*best)["structure"]) == picked.end())
        picked.push_back((*best)["structure"].get<std::string>());
    }
    if (picked.empty()) continue;
    json panels = json::array();
    std::string slowest;
    for (const std::string& structure : picked) {
      json series = json::array();
      for (const auto& r : e["rows"]) {
        if (r["structure"] != structure || r["rank_work"].empty()) continue;
        json x = json::array();
        for (std::size_t i = 0; i < r["rank_work"].size(); ++i) x.push_back(i);
        series.push_back({{"label", fmt::format("{} (slowest {:.2f}x)", r["balancer"].get<std::string>(),
                                                number_or(r, "imbalance_mean"))},
                          {"x", x},
                          {"y", r["rank_work"]}});
        slowest += fmt::format("{}{} {}: slowest rank {:.2f}x the mean (p95 over sequences {:.2f})",
                               slowest.empty() ? "" : "; ", structure, r["balancer"].get<std::string>(),
                               number_or(r, "imbalance_mean"), number_or(r, "imbalance_p95"));
      }
      panels.push_back({{"title", structure}, {"series", series}});
    }
    const std::string where = fmt::format("{} on {}, {} tokens, {} GPUs", e["model"].get<std::string>(),
                                          e["system"].get<std::string>(), fmt_seq(number_or(e, "seq_len")),
                                          int_of(e, "gpus"));
    json fig = figure_spec(kLinesFigure, "documents", fmt::format("per-rank-work-{}.png", ++n));
    fig.update({{"title", "Attention work per ring rank under the workload: " + where},
                {"xlabel", "ring rank"}, {"ylabel", "attention tiles / mean of the ranks"}, {"xscale", "linear"},
                {"xinteger", true},
                {"hline", {{"y", 1.0}, {"label", "mean of the ranks"}}}, {"panels", panels},
                {"caption", fmt::format("{} under --documents {}: each ring rank's attention work (kernel tiles under "
                                        "the document mask, mean over the sampled sequences) over the mean of the "
                                        "ranks, a line per load balancer; the step waits for the slowest rank of "
                                        "each sequence, which the mean over sequences hides, so each label gives "
                                        "the slowest rank over the mean, averaged over the sequences. {}. "
                                        "Modelled by the simulator (exact counts of the sampled batches). Source: {}.",
                                        where, e["workload"]["documents"].get<std::string>(), slowest,
                                        e["source"].get<std::string>())}});
    figs.push_back(fig);
  }
}

}  // namespace

namespace {

// A sweep may hold hundreds of GPU counts; a figure (or a panel) per count would not finish in
// seconds nor be read. Figures show at most kFigureGpuCounts counts: the smallest, the largest and
// counts evenly between; the tables keep every one, and the report says which are drawn.
constexpr std::size_t kFigureGpuCounts = 6;

std::vector<std::int64_t> all_gpu_counts(const json& data) {
  std::set<std::int64_t> counts;
  for (const auto& p : data["points"]) counts.insert(static_cast<std::int64_t>(number_or(p["plan"], "gpus")));
  if (data.contains("method_comparison"))
    for (const auto& c : data["method_comparison"]) counts.insert(c["gpus"].get<std::int64_t>());
  return {counts.begin(), counts.end()};
}

std::set<std::int64_t> figure_gpu_counts(const std::vector<std::int64_t>& all) {
  if (all.size() <= kFigureGpuCounts) return {all.begin(), all.end()};
  std::set<std::int64_t> shown;
  for (std::size_t i = 0; i < kFigureGpuCounts; ++i)
    shown.insert(all[i * (all.size() - 1) / (kFigureGpuCounts - 1)]);
  return shown;
}

// The data the figures are drawn from: the points, comparisons and workload entries of the shown GPU counts.
json figure_subset(const json& data) {
  const std::vector<std::int64_t> all = all_gpu_counts(data);
  if (all.size() <= kFigureGpuCounts) return data;
  const std::set<std::int64_t> shown = figure_gpu_counts(all);
  auto keep = [&](const json& list, auto gpus_of) {
    json out = json::array();
    for (const auto& e : list)
      if (shown.count(gpus_of(e))) out.push_back(e);
    return out;
  };
  json d = json::object();  // the rest as it is; the lists filtered (a copy of the whole would copy every point)
  for (const auto& [k, v] : data.items())
    if (k != "points" && k != "method_comparison" && k != "documents") d[k] = v;
  d["points"] = keep(data["points"], [](const json& p) { return static_cast<std::int64_t>(number_or(p["plan"], "gpus")); });
  for (const char* key : {"method_comparison", "documents"})
    if (data.contains(key)) d[key] = keep(data[key], [](const json& e) { return e["gpus"].get<std::int64_t>(); });
  return d;
}

}  // namespace

std::string figure_gpu_counts_text(const json& data) {
  const std::vector<std::int64_t> all = all_gpu_counts(data);
  if (all.size() <= kFigureGpuCounts) return "";
  std::string list;
  for (std::int64_t g : figure_gpu_counts(all)) list += (list.empty() ? "" : ", ") + std::to_string(g);
  return fmt::format("The figures show {} of the {} GPU counts ({}: the smallest, the largest and counts evenly "
                     "between); the tables hold every one.",
                     kFigureGpuCounts, all.size(), list);
}

json plan_figures(const json& all_data) {
  const json data = figure_subset(all_data);
  json figs = json::array();
  if (data.contains("documents")) add_document_figures(data["documents"], figs);
  if (data.contains("method_comparison")) add_method_figures(data["method_comparison"], figs);
  for (const auto& [key, refs] : groups_of(data["points"])) {
    const std::vector<json> pts = values_of(refs);
    if (json f = throughput_figure(key, pts); !f.is_null()) figs.push_back(f);
    std::int64_t seq = 0;
    const std::vector<json> sel = values_of(breakdown_selection(refs, &seq));
    if (sel.empty()) continue;
    std::string where = fmt::format("{} at sequence length {}", group_title(key), fmt_seq(static_cast<double>(seq)));
    figs.push_back(step_time_figure(key, sel, where));
    if (json f = memory_figure(key, sel, where); !f.is_null()) figs.push_back(f);
  }
  add_systems_figures(data["points"], figs);
  if (!data["comparisons"].empty()) figs.push_back(parity_figure(data["comparisons"]));
  return figs;
}

namespace {

int count_origin(const json& points, const char* origin) {
  return static_cast<int>(std::count_if(points.begin(), points.end(), [&](const json& p) { return p["origin"] == origin; }));
}

// The first screen: one line per length and GPU count, the best plan and what each other method's
// best costs against it (method_comparison.hpp).
Section answer_section(const json& data) {
  Section s;
  s.title = "Answer: the best plan at each length and GPU count";
  const json cells = data.contains("method_comparison") ? data["method_comparison"] : json::array();
  if (cells.empty()) {
    s.paragraph("No predictions in the inputs: no advice.");
    return s;
  }
  for (const auto& [key, group] : comparison_groups(cells)) {
    // At a glance: lengths down, GPU counts across; each cell the best plan, its tokens/s per GPU
    // and the runner-up method at its fraction of that (advice.txt's table, with the runner-up).
    std::set<std::int64_t> gpus;
    std::map<std::int64_t, std::map<std::int64_t, std::string>> at;
    for (const auto& c : group) {
      const std::int64_t g = c["gpus"].get<std::int64_t>(), n = static_cast<std::int64_t>(number_or(c, "seq_len"));
      gpus.insert(g);
      std::string text = "does not fit";
      if (!c["best"].is_null()) {
        const json& best = c["best"];
        text = fmt::format("{}, {} tok/s", best["plan_label"].get<std::string>(),
                           format_rate(number_or(best, "tokens_per_s_per_gpu")));
        const json* second = nullptr;
        for (const auto& m : c["methods"])
          if (m["relative"].is_number() && m["method"] != best["method"] &&
              (!second || m["relative"].get<double>() > (*second)["relative"].get<double>()))
            second = &m;
        if (second)
          text += fmt::format("; next {} {:.2f}", (*second)["method"].get<std::string>(), (*second)["relative"].get<double>());
      }
      at[n][g] = text;
    }
    s.paragraph(fmt::format("{} on {} (modelled by the simulator): the fastest plan that fits at each length and GPU "
                            "count, its tokens/s per GPU, and the next method's fastest plan as a fraction of it.",
                            key.second, key.first));
    Table t{{"length"}, {}};
    for (std::int64_t g : gpus) t.header.push_back(fmt::format("{} GPUs", g));
    for (const auto& [n, row] : at) {
      std::vector<std::string> r{fmt_seq(static_cast<double>(n))};
      for (std::int64_t g : gpus) r.push_back(row.count(g) ? row.at(g) : "-");
      t.rows.push_back(std::move(r));
    }
    s.add_table(std::move(t));
    s.paragraph("Each cell in full, every method at its fraction of the best (1.00 = the best):");
    std::vector<std::string> lines;
    for (const auto& c : group) lines.push_back(c["answer"].get<std::string>());
    s.list(lines);
  }
  return s;
}

Section inputs_section(const json& data) {
  Section intro;
  intro.title = "Inputs";
  const json& verdicts = data["validations"];
  const auto fails = std::count_if(verdicts.begin(), verdicts.end(), [](const json& v) { return !v["passed"].get<bool>(); });
  intro.paragraph(fmt::format("{} source documents, {} plan points ({} predicted, {} measured), {} benchmark rows, {} "
                              "validation verdicts ({} FAIL). Every table row names its source (S1, S2, ...); the "
                              "Sources section gives each source's command, versions and measurement mode.",
                              data["sources"].size(), data["points"].size(), count_origin(data["points"], "prediction"),
                              count_origin(data["points"], "measurement"), data["benchmarks"].size(), verdicts.size(),
                              fails));
  if (const std::string shown = figure_gpu_counts_text(data); !shown.empty()) intro.paragraph(shown);
  if (data.contains("skipped") && !data["skipped"].empty()) {
    std::string list;
    for (const auto& s : data["skipped"])
      list += fmt::format("{}{} ({})", list.empty() ? "" : "; ", s["file"].get<std::string>(), s["why"].get<std::string>());
    intro.paragraph(fmt::format("Read but not shown: {} file{} that hold no result: {}.", data["skipped"].size(),
                                data["skipped"].size() == 1 ? "" : "s", list));
  }
  return intro;
}

// Adds the figures of one report section (an image when drawn, else a note); returns how many.
int add_figures(Section& s, const json& figures, const std::set<std::string>& drawn, const std::string& section) {
  int n = 0;
  for (const auto& f : figures) {
    if (f["section"] != section) continue;
    ++n;
    std::string file = f["file"].get<std::string>();
    if (drawn.count(file)) s.image(file, f["caption"].get<std::string>());
    else s.paragraph(fmt::format("(Plot {} not drawn; see the warnings printed by seqpar report.) {}", file,
                                 f["caption"].get<std::string>()));
  }
  return n;
}

// A section holding only its figures, or `none` when it has none.
Section figure_section(const std::string& title, const json& figures, const std::set<std::string>& drawn,
                       const std::string& section, const std::string& none) {
  Section s;
  s.title = title;
  if (add_figures(s, figures, drawn, section) == 0) s.paragraph(none);
  return s;
}

// The step-time and memory breakdowns: figures, then one table row per plan of each group's selection.
std::pair<Section, Section> breakdown_sections(const json& data, const json& figures, const std::set<std::string>& drawn) {
  Section st;
  st.title = "Step-time breakdown";
  Section mem;
  mem.title = "Memory breakdown against device capacity";
  Table st_table{{"system", "model", "GPUs", "seq", "plan", "placement", "step", "compute", "exposed comm", "tokens/s/GPU",
                  "source", "mode"}, {}};
  Table mem_table{{"system", "model", "GPUs", "seq", "plan", "peak", "capacity", "fits", "source", "mode"}, {}};
  for (const auto& [key, pts] : groups_of(data["points"])) {
    std::int64_t seq = 0;
    for (const json* pp : breakdown_selection(pts, &seq)) {
      const json& p = *pp;
      const json& t = p["time"];
      st_table.rows.push_back({std::get<0>(key), std::get<1>(key), std::to_string(std::get<2>(key)), fmt_seq(static_cast<double>(seq)),
                               p["plan_label"], dash_if_empty(string_or(p, "placement")), fmt_seconds(number_or(p, "step_time_s")),
                               fmt_seconds(number_or(t, "compute_s")),
                               fmt_seconds(number_or(t, "exposed_comm_s")),
                               p["tokens_per_s_per_gpu"].is_number() ? format_rate(number_or(p, "tokens_per_s_per_gpu")) : "-",
                               p["source"], p["mode"]});
      if (p["peak_memory_bytes"].is_number())
        mem_table.rows.push_back({std::get<0>(key), std::get<1>(key), std::to_string(std::get<2>(key)), fmt_seq(static_cast<double>(seq)),
                                  p["plan_label"], fmt_gib(number_or(p, "peak_memory_bytes")),
                                  p["memory_capacity_bytes"].is_number() ? fmt_gib(number_or(p, "memory_capacity_bytes")) : "-",
                                  p["fits"].get<bool>() ? "yes" : "no", p["source"], p["mode"]});
    }
  }
  if (add_figures(st, figures, drawn, "step_time") == 0 && st_table.rows.empty()) st.paragraph("No point in the inputs carries a time breakdown.");
  if (!st_table.rows.empty()) st.add_table(st_table);
  if (add_figures(mem, figures, drawn, "memory") == 0 && mem_table.rows.empty()) mem.paragraph("No point in the inputs carries a memory breakdown.");
  if (!mem_table.rows.empty()) mem.add_table(mem_table);
  return {st, mem};
}

struct BestCell { std::string text; double rate = -1; };
using BestGrid = std::map<std::string, std::map<std::int64_t, std::map<std::int64_t, BestCell>>>;  // system/model -> seq -> gpus

// Best plan over (sequence length x GPU count) per system: the sweep's own choice when given,
// else the fastest valid plan that fits among the points.
BestGrid best_plan_grid(const json& data) {
  BestGrid grid;
  std::set<std::string> from_sweep;
  for (const auto& b : data["best"]) {
    std::string sys = b["system"].get<std::string>() + (string_or(b, "model").empty() ? "" : " / " + string_or(b, "model"));
    BestCell c;
    if (b["plan_label"].is_string())
      c = {fmt::format("{} ({} tok/s/GPU) [{}]", b["plan_label"].get<std::string>(),
                       b["tokens_per_s_per_gpu"].is_number() ? format_rate(number_or(b, "tokens_per_s_per_gpu")) : "-", b["source"].get<std::string>()),
           number_or(b, "tokens_per_s_per_gpu")};
    else
      c = {fmt::format("none fits{} [{}]", string_or(b, "reason").empty() ? "" : ": " + string_or(b, "reason"), b["source"].get<std::string>()), 0};
    grid[sys][int_of(b, "seq_len")][int_of(b, "gpus")] = c;
    from_sweep.insert(sys);
  }
  for (const auto& p : data["points"]) {
    if (p["origin"] != "prediction") continue;
    std::string sys = p["system"].get<std::string>() + " / " + p["model"].get<std::string>();
    std::string sys_plain = p["system"].get<std::string>();
    if (from_sweep.count(sys) || from_sweep.count(sys_plain)) continue;
    BestCell& c = grid[sys][int_of(p["plan"], "seq_len")][int_of(p["plan"], "gpus")];
    if (plottable(p) && number_or(p, "tokens_per_s_per_gpu") > c.rate)
      c = {fmt::format("{} ({} tok/s/GPU) [{}]", p["plan_label"].get<std::string>(), format_rate(number_or(p, "tokens_per_s_per_gpu")),
                       p["source"].get<std::string>()), number_or(p, "tokens_per_s_per_gpu")};
    else if (c.rate < 0)
      c = {"none fits [" + p["source"].get<std::string>() + "]", 0};
  }
  return grid;
}

Section best_plan_section(const json& data) {
  Section best;
  best.title = "Best plan over sequence length and GPU count";
  const BestGrid grid = best_plan_grid(data);
  for (const auto& [sys, rows] : grid) {
    std::set<std::int64_t> gpus;
    for (const auto& [seq, cells] : rows) for (const auto& [g, c] : cells) gpus.insert(g);
    Table t;
    t.header.push_back("seq \\ GPUs");
    for (auto g : gpus) t.header.push_back(std::to_string(g));
    for (const auto& [seq, cells] : rows) {
      std::vector<std::string> row{fmt_seq(static_cast<double>(seq))};
      for (auto g : gpus) row.push_back(cells.count(g) ? cells.at(g).text : "-");
      t.rows.push_back(row);
    }
    best.paragraph(sys + " (modelled by the simulator):");
    best.add_table(t);
  }
  if (grid.empty()) best.paragraph("No predictions in the inputs: no best-plan table.");
  return best;
}

Section validation_section(const json& data, const json& figures, const std::set<std::string>& drawn) {
  Section val;
  val.title = "Predicted against measured";
  if (data["comparisons"].empty()) {
    val.paragraph("No measurement in the inputs matches a predicted plan (same model and plan fields): no comparison.");
    return val;
  }
  add_figures(val, figures, drawn, "validation");
  Table t{{"model", "system", "plan", "GPUs", "seq", "predicted", "measured", "error", "prediction", "measurement", "measurement mode"}, {}};
  for (const auto& c : data["comparisons"])
    t.rows.push_back({c["model"], c["system"], c["plan_label"], std::to_string(int_of(c, "gpus")), fmt_seq(number_or(c, "seq_len")),
                      fmt_seconds(number_or(c, "predicted_step_time_s")), fmt_seconds(number_or(c, "measured_step_time_s")),
                      fmt::format("{:+.1f}%", number_or(c, "error") * 100), c["prediction_source"], c["measurement_source"],
                      describe_mode(c["measurement_mode"].get<std::string>())});
  val.add_table(t);
  val.paragraph("Error = predicted / measured - 1. Communication in a single-rank-proxy measurement runs over a loopback, "
                "so its step time does not validate the communication model.");
  return val;
}

Section benchmarks_section(const json& data) {
  Section bench;
  bench.title = "Benchmark measurements";
  if (data["benchmarks"].empty()) {
    bench.paragraph("No microbenchmark rows in the inputs.");
    return bench;
  }
  Table t{{"program", "benchmark", "time (median)", "reps", "figures", "device", "mode", "source"}, {}};
  for (const auto& b : data["benchmarks"]) {
    std::string figs;
    for (const char* k : {"tflops", "busbw_gbps", "algbw_gbps", "gbps", "tokens_per_s", "peak_memory_bytes"})
      if (b["fields"].contains(k) && b["fields"][k].is_number())
        figs += (figs.empty() ? "" : ", ") + fmt::format("{} {}", format_rate(b["fields"][k].get<double>()), k);
    t.rows.push_back({b["program"], b["name"], fmt_seconds(number_or(b, "time_s")),
                      b.contains("repetitions") ? std::to_string(int_of(b, "repetitions")) : "-", figs.empty() ? "-" : figs,
                      b["device"], b["mode"], b["source"]});
  }
  bench.add_table(t);
  return bench;
}

std::string percent_or_dash(const json& v) { return v.is_number() ? fmt::format("{:+.1f}%", v.get<double>() * 100) : "-"; }
std::string abs_percent_or_dash(const json& v) { return v.is_number() ? fmt::format("{:.1f}%", v.get<double>() * 100) : "-"; }

// Measured training steps beside the simulator's prediction on one system (step_comparison.hpp).
Section step_section(const json& data) {
  Section st;
  st.title = "Training steps: predicted against measured";
  if (!data.contains("step_comparisons") || data["step_comparisons"]["rows"].empty()) {
    st.paragraph("No measured training step in the inputs (seqpar-train, bench_torch_step or the minimal step format).");
    return st;
  }
  const json& sc = data["step_comparisons"];
  Table t{{"step", "model", "plan", "GPUs", "seq", "mode", "predicted step", "measured step", "time error",
           "predicted peak", "measured peak", "memory error", "source"}, {}};
  bool proxy = false, other_dtype = false, time_only = false;
  for (const auto& r : sc["rows"]) {
    proxy = proxy || string_or(r, "mode") == "single-rank-proxy";
    other_dtype = other_dtype || (string_or(r, "dtype") != "bf16" && string_or(r, "dtype") != "fp16");
    time_only = time_only || r["measured_peak_memory_bytes"].is_null();
    t.rows.push_back({r["name"], r["model"], r["plan_label"], std::to_string(int_of(r, "gpus")), fmt_seq(number_or(r, "seq_len")),
                      dash_if_empty(string_or(r, "mode")), fmt_seconds(number_or(r, "predicted_step_time_s")),
                      fmt_seconds(number_or(r, "measured_step_time_s")), percent_or_dash(r["time_error"]),
                      fmt_gib(number_or(r, "predicted_peak_memory_bytes")),
                      r["measured_peak_memory_bytes"].is_number() ? fmt_gib(number_or(r, "measured_peak_memory_bytes")) : "-",
                      percent_or_dash(r["memory_error"]), r["source"]});
  }
  st.add_table(t);
  st.paragraph(fmt::format("Predicted by the simulator on system '{}', per rank (step time and peak memory of one GPU); "
                           "error = predicted / measured - 1. Largest |error|: step time {}, peak memory {}.",
                           sc["system"].get<std::string>(), abs_percent_or_dash(sc["max_abs_time_error"]),
                           abs_percent_or_dash(sc["max_abs_memory_error"])));
  if (proxy)
    st.paragraph("A single-rank proxy runs rank 0 of the plan it stands for with loopback communication: it is predicted "
                 "as that plan's rank, so its time error includes the communication the proxy did not perform.");
  if (other_dtype)
    st.paragraph("Some steps ran in a dtype other than bf16/fp16; the simulator's rates are bf16/fp16 rates.");
  if (time_only) st.paragraph("'-': the measurement records no peak memory; only its time is compared.");
  return st;
}

// seqpar-train beside its PyTorch peer (peer_comparison.hpp): one row per pair, and one per run
// that has no peer in the inputs, so a missing measurement shows instead of vanishing.
Section peer_section(const json& data) {
  Section peer;
  peer.title = "seqpar-train against PyTorch";
  const json& rows = data["peer_comparisons"];
  if (rows.empty()) {
    peer.paragraph("No seqpar-train or bench_torch_step measurement in the inputs: no side-by-side.");
    return peer;
  }
  auto side = [](const json& r, const char* key, auto format) -> std::string {
    return r.is_object() && r[key].is_number() ? format(r[key].get<double>()) : "-";
  };
  auto ratio = [](const json& r, const char* key) -> std::string {
    return r[key].is_number() ? fmt::format("{:.2f}", r[key].get<double>()) : "-";
  };
  auto source = [](const json& r) -> std::string { return r.is_object() ? r["source"].get<std::string>() : "-"; };
  Table t{{"model", "plan", "seq", "GPU", "seqpar step", "PyTorch step", "step ratio", "seqpar TFLOP/s",
           "PyTorch TFLOP/s", "TFLOP/s ratio", "seqpar peak", "PyTorch peak", "memory ratio", "seqpar source",
           "PyTorch source"}, {}};
  int unmatched = 0;
  for (const auto& r : rows) {
    const json &sq = r["seqpar"], &pt = r["pytorch"];
    if (sq.is_null() || pt.is_null()) ++unmatched;
    t.rows.push_back({r["model"], r["plan_label"], fmt_seq(number_or(r, "seq_len")), dash_if_empty(string_or(r, "gpu")),
                      side(sq, "step_time_s", fmt_seconds), side(pt, "step_time_s", fmt_seconds), ratio(r, "step_time_ratio"),
                      side(sq, "tflops_per_gpu", format_rate), side(pt, "tflops_per_gpu", format_rate), ratio(r, "tflops_ratio"),
                      side(sq, "peak_memory_bytes", fmt_gib), side(pt, "peak_memory_bytes", fmt_gib),
                      ratio(r, "peak_memory_ratio"), source(sq), source(pt)});
  }
  peer.add_table(t);
  peer.paragraph("Ratios are seqpar / PyTorch (scripts/bench_torch_step.py: the same model, bf16 autocast, fused AdamW, "
                 "SDPA): a step ratio or memory ratio below 1 and a TFLOP/s ratio above 1 favour seqpar. Both count "
                 "TFLOP/s by seqpar's convention (no recomputation); PyTorch's peak is its allocator's maximum allocated.");
  if (unmatched > 0)
    peer.paragraph(fmt::format("{} run(s) above have no measurement of the other program with the same model shape, plan "
                               "(checkpointing included), sequence length and GPU: '-' marks the missing side.",
                               unmatched));
  return peer;
}

// The seqpar-train --validate verdicts (validation_verdict.hpp): any FAIL in the section's first
// lines with its worst check in words, then one row per run and what a verdict means.
Section verdict_section(const json& data) {
  Section s;
  s.title = "Validation verdicts (seqpar-train --validate)";
  const json& rows = data["validations"];
  if (rows.empty()) {
    s.paragraph("No seqpar-train --validate document in the inputs: no verdict.");
    return s;
  }
  auto error = [](const json& v) { return v.is_number() ? fmt::format("{:.3g}", v.get<double>()) : "not finite"; };
  std::vector<std::string> failed;
  std::set<std::string> rules;
  bool overridden = false;
  Table t{{"plan", "seq", "model", "arithmetic", "verdict", "failed checks", "steps validated", "closest check (step)",
           "sharded error", "allowed error", "allowance used", "source"}, {}};
  for (const auto& v : rows) {
    const json& c = v["closest"];
    const bool passed = v["passed"].get<bool>();
    const std::string overrides = string_or(v, "overrides");
    const std::string where = fmt::format("{} at {} [{}]", v["plan_label"].get<std::string>(),
                                          fmt_seq(number_or(v["plan"], "seq_len")), v["source"].get<std::string>());
    if (!passed)
      failed.push_back(fmt::format("{}: {} failed checks; worst: {}", where, int_of(v, "failures"),
                                   string_or(c, "explanation").empty() ? c["name"].get<std::string>() : string_or(c, "explanation")));
    overridden = overridden || !overrides.empty();
    rules.insert(v["rule"].get<std::string>());
    t.rows.push_back({v["plan_label"], fmt_seq(number_or(v["plan"], "seq_len")), v["model"], v["arithmetic"],
                      std::string(passed ? "PASS" : "FAIL") + (overrides.empty() ? "" : " (rule overridden: " + overrides + ")"),
                      std::to_string(int_of(v, "failures")), std::to_string(int_of(v, "steps")),
                      c["step"].is_number() ? fmt::format("{} ({})", c["name"].get<std::string>(), int_of(c, "step"))
                                            : c["name"].get<std::string>(),
                      error(c["sharded_error"]), error(c["allowed_error"]),
                      allowance_used_text(c),
                      v["source"]});
  }
  if (!failed.empty()) {
    s.paragraph(fmt::format("FAIL: {} of {} validated runs failed. Their sharded step is less accurate than the rule "
                            "allows: a sharding bug until shown otherwise.", failed.size(), rows.size()));
    s.list(failed);
  } else {
    s.paragraph(fmt::format("PASS: all {} validated runs passed.", rows.size()));
  }
  s.add_table(t);
  s.paragraph("Each validated step runs three ways from the same parameters: the sharded step (the plan), the "
              "unsharded step (SP = 1, same back end and precision) and an fp32 reference on the CPU (README, "
              "Validation). The loss and every gradient tensor are checked against the rule. PASS: every check of "
              "every step held, so the plan computes what the unsharded step computes, up to the rounding sharding "
              "may add. FAIL: at least one check went past its allowance, which that rounding does not explain (a "
              "planted sharding bug goes past it 2.4 to thousands of times). The closest check is the one that used "
              "the largest fraction of its allowance over the run (sharded error / allowed error; past 100% it "
              "failed).");
  for (const auto& rule : rules) s.paragraph("Rule: " + rule + ".");
  if (overridden)
    s.paragraph("'rule overridden': the run replaced the derived factor or floor (--error-factor, --error-atol), an "
                "experiment: a run that passes only with them is not validated.");
  s.paragraph("These runs time nothing (each step also ran the unsharded and reference steps): they are in no "
              "timing table or figure.");
  return s;
}

// Packed documents (document_comparison.hpp): per cell the workload, the ranking under it beside
// the ranking on one causal sequence of the same length, and the per-rank work figures. The table
// lists the first kDocumentRows under the workload and the first kDocumentRowsOneSequence on one
// sequence (where they moved is the point of the table).
constexpr int kDocumentRows = 10, kDocumentRowsOneSequence = 3;
Section documents_section(const json& data, const json& figures, const std::set<std::string>& drawn) {
  Section s;
  s.title = "Packed documents: the ranking under the workload against one causal sequence";
  const json entries = data.contains("documents") ? data["documents"] : json::array();
  if (entries.empty()) {
    s.paragraph("No input was run under a packed-document workload (--documents): every plan assumes one causal "
                "sequence filling the length.");
    return s;
  }
  s.paragraph("Each plan under the packed-document workload (document mask: a token sees earlier tokens of its own "
              "document) beside the same plan on one causal sequence of the same length, as seqpar ranks it without "
              "--documents. Rank 1 is the fastest (tokens/s per GPU) of the plans that fit (of all, where none fits: "
              "simulate's memory options as given); '-': not ranked. slowest/mean: the "
              "slowest ring rank's attention tiles over the mean of the ranks, the mean and p95 over the sampled "
              "sequences. Modelled by the simulator.");
  for (const auto& e : entries) {
    const json& w = e["workload"];
    s.paragraph(fmt::format(
        "{} on {}, {} tokens, {} GPUs [{}]. Workload --documents {} (packing {}): {:.0f} documents drawn, length mean "
        "{:.0f} tokens, std {:.0f}; {:.1f} pieces per sequence; attention work under the document mask {:.3f} of one "
        "full causal sequence (min {:.3f}, max {:.3f} over the sampled sequences).",
        e["model"].get<std::string>(), e["system"].get<std::string>(), fmt_seq(number_or(e, "seq_len")), int_of(e, "gpus"),
        e["source"].get<std::string>(), w["documents"].get<std::string>(), string_or(w, "packing", "-"),
        number_or(w, "drawn_count"), number_or(w, "drawn_mean"), number_or(w, "drawn_std"),
        number_or(w, "pieces_per_sequence"), number_or(w, "work_ratio_mean"), number_or(w, "work_ratio_min"),
        number_or(w, "work_ratio_max")));
    s.paragraph(e["answer"].get<std::string>() + ".");
    if (e.value("one_sequence_from", "") == "advise")
      s.paragraph("From advise: each plan's one-sequence figure is its structure's fastest plan in the advise without "
                  "--documents given beside it (memory options may differ); advise carries no per-rank counts.");
    Table t{{"rank", "plan (load balancer)", "tokens/s/GPU", "fits", "rank, one sequence",
             "tokens/s/GPU, one sequence", "slowest/mean", "p95"},
            {}};
    auto rate = [](const json& v) { return v.is_number() ? format_rate(v.get<double>()) : std::string("-"); };
    auto rank = [](const json& v) { return v.get<int>() > 0 ? std::to_string(v.get<int>()) : std::string("-"); };
    auto ratio = [](const json& v) { return v.is_number() ? fmt::format("{:.3f}", v.get<double>()) : std::string("-"); };
    // The top of both rankings: a sweep cell holds every structure x balancer, the rest are in the data.
    auto top = [](const json& v, int n) { return v.get<int>() > 0 && v.get<int>() <= n; };
    std::size_t left = 0;
    for (const auto& r : e["rows"]) {
      if (!top(r["rank"], kDocumentRows) && !top(r["one_sequence_rank"], kDocumentRowsOneSequence)) {
        ++left;
        continue;
      }
      const std::string b = r["balancer"].get<std::string>();
      t.rows.push_back({rank(r["rank"]), r["structure"].get<std::string>() + (b.empty() ? "" : " (" + b + ")"),
                        rate(r["tokens_per_s_per_gpu"]), r["fits"].get<bool>() ? "yes" : "no",
                        rank(r["one_sequence_rank"]), rate(r["one_sequence_tokens_per_s_per_gpu"]),
                        ratio(r["imbalance_mean"]), ratio(r["imbalance_p95"])});
    }
    s.add_table(t);
    if (left > 0)
      s.paragraph(fmt::format("{} more plans below the first {} under the workload and {} on one sequence: "
                              "report-data.json, \"documents\".", left, kDocumentRows, kDocumentRowsOneSequence));
  }
  add_figures(s, figures, drawn, "documents");
  return s;
}

Section sources_section(const json& data) {
  Section src;
  src.title = "Sources";
  src.paragraph("Each number above names one of these sources: the file, the exact command, the tool and library versions "
                "and the measurement mode (modelled, real ranks, virtual ranks or single-rank proxy).");
  Table t{{"id", "file", "kind", "program", "mode", "command", "tool version", "created (UTC)", "host", "GPU / driver / CUDA / NCCL / MPI"}, {}};
  for (const auto& s : data["sources"]) {
    const json& v = s["versions"];
    std::string versions = fmt::format("{} / {} / {} / {} / {}", dash_if_empty(string_or(v, "gpu")), dash_if_empty(string_or(v, "driver_version")),
                                       dash_if_empty(string_or(v, "cuda_runtime_version")), dash_if_empty(string_or(v, "nccl_version")),
                                       dash_if_empty(string_or(v, "mpi_version")));
    t.rows.push_back({s["id"], s["file"], s["kind"], s["program"], s["mode_description"], s["command"], s["tool_version"],
                      s["created_utc"], s["host"], versions});
  }
  src.add_table(t);
  return src;
}

}  // namespace

Document build_document(const json& data, const json& figures, const std::set<std::string>& drawn, const std::string& title) {
  Document doc;
  doc.title = title;
  doc.sections.push_back(answer_section(data));
  doc.sections.push_back(verdict_section(data));
  doc.sections.push_back(documents_section(data, figures, drawn));
  doc.sections.push_back(figure_section("What each method costs against the best plan", figures, drawn, "relative",
                                        "No valid plan that fits in memory in the inputs: nothing to plot."));
  doc.sections.push_back(figure_section("Peak memory against capacity", figures, drawn, "memory_capacity",
                                        "No predicted memory in the inputs: nothing to plot."));
  doc.sections.push_back(inputs_section(data));
  doc.sections.push_back(figure_section("Throughput against sequence length", figures, drawn, "throughput",
                                        "No valid plan that fits in memory in the inputs: nothing to plot."));
  auto [step_time, memory] = breakdown_sections(data, figures, drawn);
  doc.sections.push_back(step_time);
  doc.sections.push_back(memory);
  doc.sections.push_back(best_plan_section(data));
  doc.sections.push_back(figure_section("The same model on NVLink, PCIe and multi-node InfiniBand", figures, drawn, "systems",
                                        "The inputs hold each model on one system only (same GPU count): no side-by-side comparison."));
  doc.sections.push_back(validation_section(data, figures, drawn));
  doc.sections.push_back(step_section(data));
  doc.sections.push_back(peer_section(data));
  doc.sections.push_back(benchmarks_section(data));
  doc.sections.push_back(sources_section(data));
  return doc;
}

std::string resolve_plots_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("SEQPAR_PLOTS_DIR"); env && *env) return env;
  return std::string(SEQPAR_SOURCE_DIR) + "/reports/plots";
}

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  if (!out) throw Error(fmt::format("{}: cannot open for writing", p.string()));
  out << text;
  if (!out) throw Error(fmt::format("{}: write failed", p.string()));
}

}  // namespace

ReportOutput write_report(const std::vector<InputDocument>& inputs, const ReportOptions& opt) {
  if (inputs.empty()) throw Error("report: no input files");
  if (opt.out_dir.empty()) throw Error("report: --out DIR is required");
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) throw Error(fmt::format("--out {}: cannot create the directory: {}", opt.out_dir, ec.message()));

  json data = gather_report_data(inputs, opt.system, opt.framework);
  json figures = plan_figures(data);
  json doc = run_info_of_this_process();
  doc["kind"] = "report-data";
  // The data lent to the document while it is written, not copied (a sweep's points are gigabytes
  // as values), and taken back for the tables.
  for (auto& [k, v] : data.items()) doc[k] = std::move(v);
  doc["figures"] = figures;
  ReportOutput out;
  fs::path dir(opt.out_dir);
  out.data_path = (dir / "report-data.json").string();
  write_file(out.data_path, dump_json(doc) + "\n");
  for (auto& [k, v] : data.items()) v = std::move(doc[k]);
  out.peer_comparisons = data["peer_comparisons"];
  out.step_comparisons = data["step_comparisons"];
  out.validations = data["validations"];

  std::set<std::string> drawn;
  for (const auto& f : figures) fs::remove(dir / f["file"].get<std::string>(), ec);  // no stale plot passes as drawn
  if (opt.plots && !figures.empty()) {
    std::string script = resolve_plots_dir(opt.plots_dir) + "/render.py";
    if (!fs::exists(script)) {
      out.warnings.push_back(fmt::format("plots not drawn: {} not found (set SEQPAR_PLOTS_DIR to seqpar's reports/plots/ folder)", script));
    } else {
      std::string cmd = fmt::format("{} {} {} {}", shell_quote(opt.python), shell_quote(script), shell_quote(out.data_path),
                                    shell_quote(opt.out_dir));
      int rc = std::system(cmd.c_str());
      if (rc != 0) out.warnings.push_back(fmt::format("plots: `{}` exited with status {}; see its messages above", cmd, rc));
    }
    for (const auto& f : figures) {
      std::string file = f["file"].get<std::string>();
      if (fs::exists(dir / file) && fs::file_size(dir / file) > 0) {
        drawn.insert(file);
        out.images.push_back((dir / file).string());
      } else {
        out.warnings.push_back(fmt::format("plot {} was not drawn", file));
      }
    }
  }
  Document d = build_document(data, figures, drawn, opt.title);
  out.markdown_path = (dir / "report.md").string();
  out.html_path = (dir / "report.html").string();
  write_file(out.markdown_path, render_markdown(d));
  write_file(out.html_path, render_html(d, opt.out_dir));
  return out;
}

}  // namespace seqpar::reports
