// seqpar comm: the modelled time of one collective on a system, in nccl-tests terms
// (time, algbw, busbw), for one size or a range of sizes (-b/-e/-f as in nccl-tests).
#include <fmt/format.h>

#include "commands.hpp"
#include "options.hpp"
#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/limits.hpp"
#include "table.hpp"

namespace seqpar::cli {

void add_comm_command(CLI::App& app) {
  struct Opts {
    CommonOptions common;
    std::string op = "alltoall", size, minbytes, maxbytes;
    int gpus = 8;
    double factor = 2;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("comm", "One collective on a system -> time, algbw, busbw (modelled)");
  cmd->add_option("--system", o->common.system, "System preset name or path to a system/profile JSON file")->capture_default_str();
  cmd->add_flag("--json", o->common.json, "Print JSON instead of a table");
  cmd->add_option("--op", o->op, "alltoall | sendrecv | allgather | reducescatter | allreduce")->capture_default_str();
  cmd->add_option("--gpus", o->gpus, "Ranks in the group (consecutive GPUs, filling nodes in order)")
      ->capture_default_str()
      ->transform(at_most("gpus", sim::limits::kMaxGpus));
  cmd->add_option("--size", o->size, "Bytes, nccl-tests convention (e.g. 256M); or use -b/-e/-f");
  cmd->add_option("-b,--minbytes", o->minbytes, "Smallest size of a range");
  cmd->add_option("-e,--maxbytes", o->maxbytes, "Largest size of a range");
  cmd->add_option("-f,--stepfactor", o->factor, "Multiplier between sizes of a range")->capture_default_str();
  cmd->callback([o] {
    guarded(o->common.json, "seqpar comm", [&] {
      const sim::System s = load_system(o->common.system);
      const sim::Collective op = sim::parse_collective(o->op);
      // Checked first: the node count below divides by it and a wrapped sum would print nonsense.
      require_range("gpus", o->gpus, 1, sim::limits::kMaxGpus);
      std::vector<std::int64_t> sizes;
      if (!o->size.empty()) {
        if (!o->minbytes.empty() || !o->maxbytes.empty()) throw Error("size: give either --size or -b/-e, not both");
        sizes.push_back(parse_count(o->size, "size"));
      } else {
        if (o->minbytes.empty() || o->maxbytes.empty()) throw Error("size: give --size, or both -b and -e");
        sizes = sim::size_range(parse_count(o->minbytes, "-b"), parse_count(o->maxbytes, "-e"), o->factor, 0);
      }
      const sim::Placement pl = sim::place_group(s, o->gpus, 1, o->gpus);
      nlohmann::json rows = nlohmann::json::array();
      Table t({"size (B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)"});
      for (const std::int64_t bytes : sizes) {
        const sim::CommEstimate e = sim::estimate_collective(s, op, double(bytes), o->gpus);
        rows.push_back({{"op", o->op}, {"bytes", bytes}, {"ranks", o->gpus}, {"time_s", e.time_s},
                        {"algbw_gbps", e.algbw_gbps}, {"busbw_gbps", e.busbw_gbps}});
        t.add({std::to_string(bytes), fmt::format("{:.2f}", e.time_s * 1e6), fmt::format("{:.2f}", e.algbw_gbps),
               fmt::format("{:.2f}", e.busbw_gbps)});
      }
      if (o->common.json) {
        nlohmann::json j = document("seqpar comm");
        j["system"] = s.name;
        j["op"] = o->op;
        j["gpus"] = o->gpus;
        j["nodes"] = pl.nodes;
        j["results"] = rows;
        if (rows.size() == 1)
          for (const char* k : {"time_s", "algbw_gbps", "busbw_gbps", "bytes"}) j[k] = rows[0][k];
        print_json(j);
      } else {
        fmt::print("{} over {} GPUs of {} ({} node(s)), modelled\n{}", o->op, o->gpus, s.name, pl.nodes, t.str());
      }
    });
  });
}

}  // namespace seqpar::cli
