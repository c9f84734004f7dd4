// seqpar sweep: a grid of sequence lengths x GPU counts x SP degrees x methods x systems ->
// one point per cell (its fastest fitting memory options, or why it fails), the best plan per
// (system, GPUs, length), written as DIR/sweep.json and DIR/sweep.csv.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "commands.hpp"
#include "options.hpp"
#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/limits.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
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

// "hybrid 8x2", "ulysses 8", "dp only": the plan's structure in a table cell.
std::string short_plan(const sim::Plan& p) {
  if (p.sp == 1) return "dp only";
  if (p.method == sim::Method::hybrid) return fmt::format("hybrid {}x{}", p.ulysses_degree, p.ring_degree);
  return fmt::format("{} {}", to_string(p.method), p.sp);
}

struct Point {
  std::string system;
  int gpus;
  std::int64_t seq_len;
  sim::Result result;  // best fitting, else closest to fitting, else invalid
};

std::string csv_row(const Point& pt) {
  const sim::Result& r = pt.result;
  const sim::Plan& p = r.plan;
  std::string err;
  for (const auto& e : r.errors) err += (err.empty() ? "" : "; ") + e;
  for (char& c : err)
    if (c == '"') c = '\'';
  auto num = [&](double v) { return r.valid ? fmt::format("{:.6g}", v) : std::string(); };
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n", pt.system, p.gpus,
                     p.seq_len, to_string(p.method), p.sp, p.ulysses_degree, p.ring_degree, p.mem.zero,
                     to_string(p.mem.checkpoint), int(p.mem.offload_checkpoints), int(p.mem.offload_optimizer),
                     int(p.mem.tiled_mlp), int(p.mem.tiled_loss), int(r.valid), int(r.valid && r.fits),
                     num(r.step_time_s), num(r.tokens_per_s_per_gpu), num(r.tflops_per_gpu), num(r.mfu),
                     num(r.peak_memory_bytes()), num(r.time.exposed_comm), err);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  struct Opts {
    std::string model = "llama3-8b", systems = "dgx-h100", gpus = "8", seq_lens, sps, methods = "ulysses,ring,ring-zigzag,hybrid";
    std::string out;
    std::optional<int> ulysses_degree;
    int micro_batch = 1;
    bool json = false;
    MemoryFlags mem;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("sweep", "A grid of sequence lengths x GPUs x SP sizes x methods x systems -> CSV and JSON");
  cmd->add_option("--model", o->model, "Model preset name or path to a model JSON file")->capture_default_str();
  cmd->add_option("--system", o->systems, "Systems: comma-separated presets or JSON paths")->capture_default_str();
  cmd->add_option("--gpus", o->gpus, "GPU counts, comma-separated")->capture_default_str();
  cmd->add_option("--seq-len", o->seq_lens, "Sequence lengths, comma-separated (e.g. 32K,128K,1M)")->required();
  cmd->add_option("--sp", o->sps, "SP degrees, comma-separated (default: every divisor of each GPU count)");
  cmd->add_option("--method", o->methods, "Methods, comma-separated")->capture_default_str();
  cmd->add_option("--ulysses-degree", o->ulysses_degree,
                  "Hybrid: only this Ulysses degree (default: the best one); needs hybrid among --method");
  cmd->add_option("--micro-batch", o->micro_batch, "Sequences per SP group per step")->capture_default_str();
  cmd->add_option("--out", o->out, "Output directory for sweep.json and sweep.csv")->required();
  cmd->add_flag("--json", o->json, "Also print the sweep JSON on stdout");
  add_memory(cmd, o->mem);
  cmd->footer("Memory options given on the command line are fixed; otherwise each point takes its fastest fitting set.");
  cmd->callback([o] {
    guarded(o->json, "seqpar sweep", [&] {
      const sim::Model m = sim::load_model(o->model);
      const auto system_args = split_list(o->systems, "system");
      const auto systems = parse_list<sim::System>(o->systems, "system", [](const std::string& s) { return load_system(s); });
      // Points are keyed by system name, so two inputs naming one system would be mixed up.
      for (std::size_t i = 0; i < systems.size(); ++i)
        for (std::size_t k = 0; k < i; ++k)
          if (systems[i].name == systems[k].name)
            throw Error(system_args[i] == system_args[k]
                            ? fmt::format("system: '{}' is listed twice; list each system once", system_args[i])
                            : fmt::format("system: '{}' and '{}' both name the system '{}'; give each its own \"name\"",
                                          system_args[k], system_args[i], systems[i].name));
      const auto gpus = parse_list<int>(o->gpus, "gpus", [](const std::string& s) { return parse_int(s, "gpus"); });
      refuse_duplicates(gpus, split_list(o->gpus, "gpus"), "gpus");
      const auto seqs = parse_list<std::int64_t>(o->seq_lens, "seq_len", [](const std::string& s) { return parse_seq_len(s); });
      refuse_duplicates(seqs, split_list(o->seq_lens, "seq_len"), "seq_len");
      const auto methods = parse_list<sim::Method>(o->methods, "method", [](const std::string& s) { return sim::parse_method(s); });
      refuse_duplicates(methods, split_list(o->methods, "method"), "method");
      std::vector<int> sps;
      if (!o->sps.empty()) {
        sps = parse_list<int>(o->sps, "sp", [](const std::string& s) { return parse_int(s, "sp"); });
        refuse_duplicates(sps, split_list(o->sps, "sp"), "sp");
      }
      sim::SearchSpace base;
      base.methods = methods;
      base.sp = sps;
      base.ulysses_degree = o->ulysses_degree;
      base.memory = o->mem.fixed();
      base.micro_batch = o->micro_batch;
      for (int g : gpus) sim::check_search(g, base);  // every constraint is honoured, or an error now

      std::vector<Point> points;
      for (const sim::System& s : systems)
        for (int g : gpus)
          for (std::int64_t n : seqs) {
            const sim::SearchSpace& space = base;
            // One point per (method, sp): hybrid keeps its best Ulysses x Ring split.
            std::map<std::pair<int, int>, std::size_t> slot;
            for (const sim::Plan& st : sim::structures(m, s, g, n, space)) {
              sim::StructureOutcome oc = sim::best_memory_options(m, s, st, space.memory);
              sim::Result r;
              if (oc.best) {
                r = std::move(*oc.best);
              } else if (oc.closest) {
                r = std::move(*oc.closest);
                r.errors = oc.reasons;
              } else {
                r.plan = st;
                if (space.memory) r.plan.mem = *space.memory;
                r.errors = oc.reasons;
                r.capacity_bytes = s.gpu.memory_bytes;
              }
              const auto key = std::make_pair(int(st.method), st.sp);
              auto it = slot.find(key);
              if (it == slot.end()) {
                slot[key] = points.size();
                points.push_back({s.name, g, n, std::move(r)});
              } else {
                sim::Result& held = points[it->second].result;
                const bool r_ok = r.valid && r.fits, held_ok = held.valid && held.fits;
                if ((r_ok && (!held_ok || r.tokens_per_s_per_gpu > held.tokens_per_s_per_gpu)) ||
                    (!r_ok && !held_ok && r.valid && (!held.valid || r.peak_memory_bytes() < held.peak_memory_bytes())))
                  held = std::move(r);
              }
            }
          }

      nlohmann::json doc = document("seqpar sweep");
      doc["model"] = sim::to_json(m);
      doc["systems"] = nlohmann::json::array();
      for (const auto& s : systems) doc["systems"].push_back(sim::to_json(s, 0));
      doc["results"] = nlohmann::json::array();
      nlohmann::json best = nlohmann::json::array();
      std::string csv =
          "system,gpus,seq_len,method,sp,ulysses_degree,ring_degree,zero,checkpoint,offload_checkpoints,"
          "offload_optimizer,tiled_mlp,tiled_loss,valid,fits,step_time_s,tokens_per_s_per_gpu,tflops_per_gpu,mfu,"
          "peak_memory_bytes,exposed_comm_s,errors\n";
      std::map<std::tuple<std::string, int, std::int64_t>, const Point*> winners;
      std::vector<std::tuple<std::string, int, std::int64_t>> order;
      for (const Point& pt : points) {
        const sim::System& s = *std::find_if(systems.begin(), systems.end(), [&](const sim::System& x) { return x.name == pt.system; });
        doc["results"].push_back(sim::to_json(m, s, pt.result));
        csv += csv_row(pt);
        const auto key = std::make_tuple(pt.system, pt.gpus, pt.seq_len);
        if (!winners.count(key)) {
          order.push_back(key);
          winners[key] = nullptr;
        }
        const sim::Result& r = pt.result;
        const Point*& w = winners[key];
        if (r.valid && r.fits && (!w || r.tokens_per_s_per_gpu > w->result.tokens_per_s_per_gpu)) w = &pt;
      }
      for (const auto& key : order) {
        const Point* w = winners[key];
        nlohmann::json b = {{"system", std::get<0>(key)}, {"gpus", std::get<1>(key)}, {"seq_len", std::get<2>(key)}};
        if (w) {
          b["plan"] = sim::to_json(w->result.plan);
          b["step_time_s"] = w->result.step_time_s;
          b["tokens_per_s_per_gpu"] = w->result.tokens_per_s_per_gpu;
          b["mfu"] = w->result.mfu;
          b["peak_memory_bytes"] = w->result.peak_memory_bytes();
        } else {
          b["plan"] = nullptr;
          b["reason"] = "no plan is valid and fits";
        }
        best.push_back(b);
      }
      doc["best"] = best;

      std::error_code ec;
      std::filesystem::create_directories(o->out, ec);
      if (ec) throw Error(fmt::format("out: cannot create directory '{}': {}", o->out, ec.message()));
      const auto write = [&](const std::string& name, const std::string& text) {
        const std::string path = (std::filesystem::path(o->out) / name).string();
        std::ofstream f(path);
        if (!(f << text)) throw Error(fmt::format("out: cannot write '{}'", path));
      };
      write("sweep.json", dump_json(doc) + "\n");
      write("sweep.csv", csv);

      if (o->json) {
        print_json(doc);
        return;
      }
      for (const sim::System& s : systems) {
        std::vector<std::string> header{"seq len"};
        for (int g : gpus) header.push_back(fmt::format("{} GPUs", g));
        Table t(header);
        for (std::int64_t n : seqs) {
          std::vector<std::string> row{format_count(n)};
          for (int g : gpus) {
            const Point* w = winners[std::make_tuple(s.name, g, n)];
            row.push_back(w ? fmt::format("{} {}, {:.0f} tok/s", short_plan(w->result.plan),
                                          to_string(w->result.plan.mem.checkpoint), w->result.tokens_per_s_per_gpu)
                            : "does not fit");
          }
          t.add(row);
        }
        fmt::print("{} on {}: advised plan (method degree, checkpointing, tokens/s per GPU)\n{}\n", m.name, s.name, t.str());
      }
      fmt::print("{} points -> {}/sweep.json, {}/sweep.csv\n", points.size(), o->out, o->out);
    });
  });
}

}  // namespace seqpar::cli
