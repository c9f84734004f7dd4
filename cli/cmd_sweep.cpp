// seqpar sweep: a grid of sequence lengths x GPU counts x SP degrees x methods x systems ->
// one point per (method, SP degree) of each cell (the memory options advise would choose, or why it
// fails) and the chosen plan per (system, GPUs, length), written as DIR/sweep.json and
// DIR/sweep.csv. The search is sim::run_sweep (the advisor's ranking); this file parses the
// options and writes the output.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "app.hpp"
#include "commands.hpp"
#include "documents.hpp"
#include "options.hpp"
#include "rejected_list.hpp"
#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/progress.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/limits.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/sweep.hpp"
#include "seqpar/sim/validity.hpp"
#include "table.hpp"

namespace seqpar::cli {

namespace {

template <typename T, typename F>
std::vector<T> parse_list(const std::string& text, const char* field, F convert) {
  std::vector<T> out;
  for (const std::string& item : split_list(text, field)) out.push_back(convert(item));
  return out;
}

// A GPU count or SP degree: a count of at most sim::limits::kMaxGpus.
int parse_int(const std::string& s, const char* field) {
  const std::int64_t v = parse_count(s, field);
  require_range(field, v, 1, sim::limits::kMaxGpus);
  return int(v);
}

// Every list of a sweep names each value once: a repeat would duplicate every point of the grid.
// `args` are the items as the user wrote them, for the message ("1K" and "1024" are one length).
template <typename T>
void refuse_duplicates(const std::vector<T>& items, const std::vector<std::string>& args, const char* field) {
  for (std::size_t i = 0; i < items.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (items[i] == items[k]) {
        if (args[i] == args[k]) throw Error(fmt::format("{}: '{}' is listed twice; list each value once", field, args[i]));
        throw Error(fmt::format("{}: '{}' and '{}' are the same value; list each value once", field, args[k], args[i]));
      }
}

std::string csv_row(const sim::SweepPoint& pt) {
  const sim::Result& r = pt.result;
  const seqpar::Plan& p = r.plan;
  std::string err;
  for (const auto& e : r.errors) err += (err.empty() ? "" : "; ") + e;
  for (char& c : err)
    if (c == '"') c = '\'';
  auto num = [&](double v) { return r.valid ? fmt::format("{:.6g}", v) : std::string(); };
  // Under documents: the point's load balancer and its layout's counts (empty without documents).
  const std::optional<sim::DocumentCosts>& d = pt.documents;
  auto doc = [&](double v) { return d ? fmt::format("{:.6g}", v) : std::string(); };
  const std::string documents =
      fmt::format("{},{},{},{},{}", !r.balancer ? std::string() : p.sp == 1 ? std::string("-")
                                    : p.ring_degree > 1                ? to_string(*r.balancer)
                                                                       : std::string("heads"),
                  doc(d ? d->work.imbalance_tiles_mean : 0), doc(d ? d->work.imbalance_tiles_p95 : 0),
                  doc(d ? d->work_ratio : 0), doc(d ? d->token_factor : 0));
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n", pt.system, p.gpus,
                     p.seq_len, to_string(p.method), p.sp, p.tp, p.ulysses_degree, p.ring_degree, p.micro_batch,
                     p.grad_accum_steps, p.mem.zero,
                     to_string(p.mem.checkpoint), int(p.mem.offload_checkpoints), int(p.mem.offload_optimizer),
                     int(p.mem.tiled_mlp), int(p.mem.tiled_loss), int(r.valid), int(r.valid && r.fits),
                     num(r.step_time_s), num(r.tokens_per_s_per_gpu), num(r.tflops_per_gpu), num(r.mfu),
                     num(r.peak_memory_bytes()), num(r.time.exposed_comm), documents, err);
}

struct Opts {
  std::string model = "llama3-8b", systems = "dgx-h100", gpus = "8", seq_lens, sps, tps, eps, methods = method_names(",");
  std::string out, attention_kernel, framework;
  std::optional<int> ulysses_degree;
  std::optional<int> micro_batch;
  BatchOptions batch;
  bool json = false;
  MemoryFlags mem;
  DocumentOptions docs;  // --balancer: a comma-separated list here
  seqpar::PrecisionFlags precision;  // --fp8, --fp8-recipe: one precision for every point
  int rejected = 15;                  // reasons printed when no point of the grid is valid
};

// The grid the options name, each list checked for repeats.
struct Grid {
  sim::Model model;
  std::vector<sim::System> systems;
  std::vector<int> gpus;
  std::vector<std::int64_t> seq_lens;
  sim::SearchSpace space;
  std::optional<sim::SweepDocuments> documents;
};

std::vector<sim::System> parse_systems(const std::string& text, const std::string& attention_kernel,
                                       const std::string& framework) {
  const auto args = split_list(text, "system");
  const auto systems = parse_list<sim::System>(
      text, "system", [&](const std::string& s) { return load_system(CommonOptions{"", s, attention_kernel, false, framework}); });
  // Points are keyed by system name, so two inputs naming one system would be mixed up.
  for (std::size_t i = 0; i < systems.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (systems[i].name == systems[k].name)
        throw Error(args[i] == args[k] ? fmt::format("system: '{}' is listed twice; list each system once", args[i])
                                       : fmt::format("system: '{}' and '{}' both name the system '{}'; give each its own \"name\"",
                                                     args[k], args[i], systems[i].name));
  return systems;
}

Grid parse_grid(const Opts& o) {
  Grid g;
  g.model = sim::load_model(o.model);
  g.systems = parse_systems(o.systems, o.attention_kernel, o.framework);
  for (const sim::System& s : g.systems)
    if (std::string why = sim::profile_mismatch(g.model, s); !why.empty()) throw Error(why);
  g.gpus = parse_list<int>(o.gpus, "gpus", [](const std::string& s) { return parse_int(s, "gpus"); });
  refuse_duplicates(g.gpus, split_list(o.gpus, "gpus"), "gpus");
  g.seq_lens = parse_list<std::int64_t>(o.seq_lens, "seq_len", [](const std::string& s) { return parse_seq_len(s); });
  refuse_duplicates(g.seq_lens, split_list(o.seq_lens, "seq_len"), "seq_len");
  g.space.methods = parse_list<seqpar::Method>(o.methods, "method", [](const std::string& s) { return seqpar::parse_method(s); });
  refuse_duplicates(g.space.methods, split_list(o.methods, "method"), "method");
  if (!o.sps.empty()) {
    g.space.sp = parse_list<int>(o.sps, "sp", [](const std::string& s) { return parse_int(s, "sp"); });
    refuse_duplicates(g.space.sp, split_list(o.sps, "sp"), "sp");
  }
  if (!o.tps.empty()) {
    g.space.tp = parse_list<int>(o.tps, "tp", [](const std::string& s) { return parse_int(s, "tp"); });
    refuse_duplicates(g.space.tp, split_list(o.tps, "tp"), "tp");
  }
  if (!o.eps.empty()) {
    g.space.ep = parse_list<int>(o.eps, "ep", [](const std::string& s) { return parse_int(s, "ep"); });
    refuse_duplicates(g.space.ep, split_list(o.eps, "ep"), "ep");
  }
  g.space.ulysses_degree = o.ulysses_degree;
  g.space.memory = o.mem.fixed_over(sim::default_memory_options(g.systems.front().profile));
  g.space.micro_batch = o.micro_batch;
  g.space.global_batch = global_batch(o.batch);
  g.space.precisions = {o.precision.precision()};
  // --balancer is a list here, read below; without --documents it is refused with the others.
  if (std::optional<Workload> w = o.docs.workload()) {
    g.documents = sim::SweepDocuments{std::move(*w), {}};
    if (!o.docs.balancer.empty()) {
      g.documents->only = parse_list<Balancer>(o.docs.balancer, "balancer",
                                               [](const std::string& b) { return parse_balancer(b); });
      refuse_duplicates(g.documents->only, split_list(o.docs.balancer, "balancer"), "balancer");
    }
  }
  return g;
}

const sim::System& system_named(const Grid& g, const std::string& name) {
  return *std::find_if(g.systems.begin(), g.systems.end(), [&](const sim::System& x) { return x.name == name; });
}

nlohmann::json best_json(const sim::SweepCell& c) {
  nlohmann::json b = {{"system", c.system}, {"gpus", c.gpus}, {"seq_len", c.seq_len}};
  if (!c.best) {
    b["plan"] = nullptr;
    b["reason"] = "no plan is valid and fits";
    return b;
  }
  const sim::Result& r = c.best->result;
  b["plan"] = sim::to_json(r.plan);
  if (r.balancer && r.plan.ring_degree > 1) b["plan"]["balancer"] = to_string(*r.balancer);  // Ulysses: by heads
  b["step_time_s"] = r.step_time_s;  // one optimizer step (all its micro-steps)
  b["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  b["mfu"] = r.mfu;
  b["peak_memory_bytes"] = r.peak_memory_bytes();
  return b;
}

// A point's document counts: its layout's imbalance, the work the mask leaves, the fullest rank's
// tokens and each ring rank's attention tiles over the mean (the report's per-rank plot).
nlohmann::json point_documents_json(const sim::SweepPoint& pt) {
  const sim::DocumentCosts& d = *pt.documents;
  return {{"balancer", to_string(d.balancer)},
          {"imbalance", {{"mean", d.work.imbalance_tiles_mean}, {"p95", d.work.imbalance_tiles_p95}}},
          {"work_ratio", d.work_ratio},
          {"token_factor", d.token_factor},
          {"rank_work", rank_work(d)},
          {"one_sequence", pt.one_sequence ? nlohmann::json{{"step_time_s", pt.one_sequence->step_time_s},
                                                            {"tokens_per_s_per_gpu", pt.one_sequence->tokens_per_s_per_gpu},
                                                            {"fits", pt.one_sequence->fits}}
                                           : nlohmann::json(nullptr)}};
}

nlohmann::json point_json(const Grid& g, const sim::SweepPoint& pt) {
  nlohmann::json r = sim::to_json(g.model, system_named(g, pt.system), pt.result);
  if (pt.documents) r["documents"] = point_documents_json(pt);
  return r;
}

// The sweep document without its points: "results" is an empty list, which SweepWriter fills.
nlohmann::json sweep_head_json(const Grid& g, const sim::Sweep& sw, const DocumentOptions& docs) {
  nlohmann::json doc = document("seqpar sweep");
  doc["model"] = sim::to_json(g.model);
  doc["global_batch"] = batch_json(g.space.global_batch, 0);
  doc["systems"] = nlohmann::json::array();
  for (const auto& s : g.systems) doc["systems"].push_back(sim::to_json(s, 0));
  doc["results"] = nlohmann::json::array();
  if (g.documents) {
    // The workload at each length: what was drawn and packed, and the work the mask leaves.
    doc["workloads"] = nlohmann::json::array();
    for (const SampledWorkload& w : sw.workloads) {
      nlohmann::json j = workload_summary_json(docs, w);
      j["seq_len"] = w.seq_len;
      doc["workloads"].push_back(std::move(j));
    }
  }
  doc["best"] = nlohmann::json::array();
  for (const sim::SweepCell& c : sw.cells) doc["best"].push_back(best_json(c));
  return doc;
}

constexpr const char* kSweepCsvHeader =
    "system,gpus,seq_len,method,sp,tp,ulysses_degree,ring_degree,micro_batch,grad_accum_steps,zero,checkpoint,"
    "offload_checkpoints,"
    "offload_optimizer,tiled_mlp,tiled_loss,valid,fits,step_time_s,tokens_per_s_per_gpu,tflops_per_gpu,mfu,"
    "peak_memory_bytes,exposed_comm_s,balancer,imbalance_mean,imbalance_p95,work_ratio,token_factor,errors\n";

// DIR/sweep.csv and DIR/sweep.json written while the grid is searched, so that no grid's points are
// ever in memory together (a 1,000-cell grid's points are about 1 GB of JSON text). Each point's
// CSV row goes to DIR/sweep.csv.part as it comes. sweep.json's head (which lists each cell's chosen
// plan, and sorts before "results") is known only at the end, so the points' JSON goes to
// DIR/sweep.json.part first and is copied into the head's empty "results" list: sweep.json is byte
// for byte dump_json of the whole document, each point dumped as dump_json does at that depth (two
// levels in: every line 4 spaces further). The files are opened with the first point (a grid
// refused before any work writes nothing) and take their names at the end (a search that fails
// midway leaves no partial sweep.csv beside an older sweep.json).
class SweepWriter {
 public:
  SweepWriter(const Grid& g, const std::string& dir) : g_(g), dir_(dir) {}
  SweepWriter(const SweepWriter&) = delete;
  SweepWriter& operator=(const SweepWriter&) = delete;
  ~SweepWriter() {
    std::error_code ec;  // also when the search threw
    std::filesystem::remove(path("sweep.json.part"), ec);
    std::filesystem::remove(path("sweep.csv.part"), ec);
  }

  void add(const sim::SweepPoint& pt) {
    start();
    csv_ << csv_row(pt);
    points_ << (count_ ? ",\n    " : "\n    ");
    for (char c : dump_json(point_json(g_, pt))) {
      points_.put(c);
      if (c == '\n') points_ << "    ";
    }
    ++count_;
    if (!csv_ || !points_) throw Error(fmt::format("out: cannot write to '{}'", dir_));
  }

  std::size_t points() const { return count_; }

  // Writes sweep.json around the points, and returns its path.
  std::string finish(const nlohmann::json& head_doc) {
    start();
    close(csv_, "sweep.csv.part");
    close(points_, "sweep.json.part");
    const std::string head = dump_json(head_doc);
    const std::string slot = "\n  \"results\": []";
    const std::size_t at = head.find(slot);
    if (at == std::string::npos || head.find(slot, at + 1) != std::string::npos)
      throw Error("sweep: internal error: the document's results slot is not where sweep.json expects it");
    std::ofstream out;
    open(out, "sweep.json");
    out << head.substr(0, at) << "\n  \"results\": [";
    {
      std::ifstream in(path("sweep.json.part"), std::ios::binary);
      if (count_ && !(out << in.rdbuf())) throw Error(fmt::format("out: cannot copy '{}'", path("sweep.json.part")));
    }
    out << (count_ ? "\n  ]" : "]") << head.substr(at + slot.size()) << "\n";
    close(out, "sweep.json");
    std::error_code ec;
    std::filesystem::rename(path("sweep.csv.part"), path("sweep.csv"), ec);
    if (ec) throw Error(fmt::format("out: cannot write '{}': {}", path("sweep.csv"), ec.message()));
    return path("sweep.json");
  }

 private:
  void start() {
    if (started_) return;
    started_ = true;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw Error(fmt::format("out: cannot create directory '{}': {}", dir_, ec.message()));
    open(csv_, "sweep.csv.part");
    open(points_, "sweep.json.part");
    csv_ << kSweepCsvHeader;
  }
  std::string path(const char* name) const { return (std::filesystem::path(dir_) / name).string(); }
  void open(std::ofstream& f, const char* name) {
    f.open(path(name), std::ios::binary | std::ios::trunc);
    if (!f) throw Error(fmt::format("out: cannot write '{}'", path(name)));
  }
  void close(std::ofstream& f, const char* name) {
    f.close();
    if (!f) throw Error(fmt::format("out: cannot write '{}'", path(name)));
  }

  const Grid& g_;
  std::string dir_;
  std::ofstream csv_, points_;
  std::size_t count_ = 0;
  bool started_ = false;
};

// One table per system: a row per length, a column per GPU count, each cell the chosen plan.
void print_tables(const Grid& g, const sim::Sweep& sw) {
  // The cells indexed once by (system, GPUs, length), the first of each kept as a search would find
  // it: a search per table cell was a million comparisons at 1,000 cells.
  std::map<std::tuple<std::string_view, int, std::int64_t>, const sim::SweepCell*> cells;
  for (const sim::SweepCell& c : sw.cells) cells.try_emplace({c.system, c.gpus, c.seq_len}, &c);
  for (const sim::System& s : g.systems) {
    std::vector<std::string> header{"seq len"};
    for (int n : g.gpus) header.push_back(fmt::format("{} GPUs", n));
    Table t(header);
    for (std::int64_t n : g.seq_lens) {
      std::vector<std::string> row{format_count(n)};
      for (int gp : g.gpus) {
        const auto it = cells.find({s.name, gp, n});
        const sim::SweepCell* c = it == cells.end() ? nullptr : it->second;
        const sim::Result* w = c && c->best ? &c->best->result : nullptr;
        // No best: some plan is valid but none fits, or (a constraint such as --sp 3 on 8 GPUs) none is valid.
        const bool any_valid = c && c->any_valid;
        std::string batch;  // with a global batch: how the plan fills it, and its optimizer step
        if (w && g.space.global_batch)
          batch = fmt::format(" dp{}xmb{}xga{}, step {},", w->plan.dp(), w->plan.micro_batch, w->plan.grad_accum_steps,
                              seconds(w->step_time_s));
        const std::string balancer =
            w && w->balancer && w->plan.ring_degree > 1 ? " " + to_string(*w->balancer) : std::string();
        row.push_back(w ? fmt::format("{}{} {},{} {} tok/s", seqpar::describe_structure(w->plan), balancer,
                                      to_string(w->plan.mem.checkpoint), batch, format_rate(w->tokens_per_s_per_gpu))
                        : any_valid ? "does not fit" : "no valid plan");
      }
      t.add(row);
    }
    fmt::print("{} on {}{}: advised plan (method degree, checkpointing, {}tokens/s per GPU)\n{}\n", g.model.name, s.name,
               batch_text(g.space.global_batch, 0),
               g.space.global_batch ? "dp x micro-batch x accumulation, optimizer step, " : "", t.str());
  }
}

// The invalid points' reasons, for exit 2 to say why (as advise does) when no point of the grid is
// valid, instead of a table of "no valid plan" alone. Bounded: the first kKept invalid points hold
// the reasons a constraint breaks (the grid's points repeat them at every length and count).
class InvalidPoints {
 public:
  void add(const sim::SweepPoint& pt) {
    if (!pt.result.valid && rejected_.size() < kKept) rejected_.push_back({pt.result.plan, pt.result.errors, false});
  }
  const std::vector<sim::Rejection>& rejected() const { return rejected_; }

 private:
  static constexpr std::size_t kKept = 4096;
  std::vector<sim::Rejection> rejected_;
};

// No cell with an advised plan: 2 when no point is valid (with the reasons on stderr), 1 when some
// is but none fits.
void exit_status(const sim::Sweep& sw, const InvalidPoints& invalid, int limit) {
  if (std::any_of(sw.cells.begin(), sw.cells.end(), [](const sim::SweepCell& c) { return c.best.has_value(); })) return;
  const bool some_valid = std::any_of(sw.cells.begin(), sw.cells.end(), [](const sim::SweepCell& c) { return c.any_valid; });
  if (!some_valid && !capturing())  // the module's caller has the document's errors
    fmt::print(stderr, "seqpar: sweep: no point of the grid is a valid plan (every point's errors are in sweep.json){}",
               rejected_text(invalid.rejected(), std::size_t(limit), "--rejected"));
  no_answer(some_valid);
}

void run(const Opts& o) {
  const Grid g = parse_grid(o);
  // A line on the terminal for a long grid (nothing in a pipe or a log): cells done, time left.
  seqpar::Progress progress("sweep", static_cast<std::int64_t>(g.systems.size() * g.gpus.size() * g.seq_lens.size()));
  SweepWriter writer(g, o.out);
  InvalidPoints invalid;
  const sim::Sweep sw = sim::run_sweep(
      g.model, g.systems, g.gpus, g.seq_lens, g.space, g.documents ? &*g.documents : nullptr,
      [&](std::size_t done, std::size_t) { progress.update(static_cast<std::int64_t>(done)); },
      [&](const sim::SweepPoint& pt) {
        writer.add(pt);
        invalid.add(pt);
      });
  const std::string json_path = writer.finish(sweep_head_json(g, sw, o.docs));
  if (o.json) {  // the document just written, byte for byte (the Python module: as its result)
    print_json_file(json_path);
    exit_status(sw, invalid, o.rejected);
    return;
  }
  for (const SampledWorkload& w : sw.workloads) print_workload_summary(o.docs, w);
  if (!sw.workloads.empty()) fmt::print("\n");
  print_tables(g, sw);
  fmt::print("{} points -> {}/sweep.json, {}/sweep.csv\n", writer.points(), o.out, o.out);
  exit_status(sw, invalid, o.rejected);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("sweep", "A grid of sequence lengths x GPUs x SP sizes x methods x systems -> CSV and JSON");
  cmd->add_option("--model", o->model, "Model preset name or path to a model JSON file")->capture_default_str();
  cmd->add_option("--system", o->systems, "Systems: comma-separated presets or JSON paths")->capture_default_str();
  add_attention_kernel(cmd, o->attention_kernel);
  add_framework(cmd, o->framework);
  cmd->add_option("--gpus", o->gpus, "GPU counts, comma-separated")->capture_default_str();
  cmd->add_option("--seq-len", o->seq_lens, "Sequence lengths, comma-separated (e.g. 32K,128K,1M)")->required();
  cmd->add_option("--sp", o->sps, "SP degrees, comma-separated (default: every divisor of each GPU count)");
  cmd->add_option("--tp", o->tps,
                  "Tensor-parallel degrees, comma-separated (default: 1, 2, 4, 8, ... up to the GPUs of a node, each "
                  "dividing the GPUs, the heads and the MLP width)");
  cmd->add_option("--ep", o->eps,
                  "Expert-parallel degrees, comma-separated (default: a MoE model tries 1 and every power of two "
                  "dividing its experts and the data x sequence parallel ranks; a dense model 1)");
  cmd->add_option("--method", o->methods, "Methods, comma-separated")->capture_default_str();
  cmd->add_option("--ulysses-degree", o->ulysses_degree,
                  "Hybrid: only this Ulysses degree (default: the best one); needs hybrid among --method")
      ->transform(at_most("ulysses_degree", sim::limits::kMaxGpus));
  cmd->add_option("--micro-batch", o->micro_batch,
                  "Sequences per SP group per micro-step (default: 1, or with a global batch every one that fills it)")
      ->transform(at_most("micro_batch", sim::limits::kMaxMicroBatch));
  add_batch(cmd, o->batch);
  cmd->add_option("--out", o->out, "Output directory for sweep.json and sweep.csv")->required();
  cmd->add_flag("--json", o->json, "Also print the sweep JSON on stdout");
  add_memory(cmd, o->mem);
  seqpar::add_precision_flags(cmd, o->precision, false);
  add_documents(cmd, o->docs);
  add_rejected_limit(cmd, o->rejected);
  cmd->footer("Memory options given on the command line are fixed; otherwise each point takes " +
              sim::memory_choice_rule() + ". With --documents the workload is sampled at each length and every "
              "structure runs with each load balancer worth comparing (--balancer: a comma-separated list of them), "
              "one point each.");
  cmd->callback([o] {
    guarded(o->json, "seqpar sweep", [&] {
      require_range("rejected", o->rejected, 0, std::numeric_limits<int>::max());
      run(*o);
    });
  });
}

}  // namespace seqpar::cli
