// seqpar-bench-comm: one collective over a range of message sizes, in the conventions of
// nccl-tests (-b/-e/-f/-i sizes, -w/-n iterations, -c data check, time/algbw/busbw/#wrong
// columns, average bus bandwidth), on MPI host memory or NCCL device memory, over the world or
// one group of the SP x DP layout. Runs under mpirun or srun, one rank per GPU.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "bench_driver.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/comm/collective.hpp"
#include "seqpar/comm/element.hpp"
#include "seqpar/comm/same_options.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/progress.hpp"
#include "seqpar/core/stats.hpp"
#include "seqpar/sim/comm_cost.hpp"

namespace seqpar::comm {
namespace {

struct Options {
  std::string min_bytes = "32K", max_bytes = "32M", step_bytes;
  std::int64_t factor = 2;
  int warmup = 5, iters = 20, check = 1;
  std::string op = "alltoall", dtype = "f32", comm = "mpi", deprecated_backend, group = "world";
  int sp = 0, ulysses = 0, ring = 0;
  bool inject_fault = false;
  std::string json;
  std::optional<double> comm_timeout;
};

// SP degrees from the flags: with none given the SP group is the world and all of it Ulysses.
RankLayout layout_from(const Options& o, int world) {
  int sp = o.sp > 0 ? o.sp : 0;
  int u = o.ulysses, r = o.ring;
  if (sp == 0) sp = (u > 0 && r > 0) ? u * r : (u > 0 ? u : (r > 0 ? r : world));
  if (u == 0 && r == 0) u = sp, r = 1;
  if (u == 0) {
    if (r < 1 || sp % r != 0)
      throw Error(fmt::format("--ring-degree {} does not divide --sp {}", r, sp));
    u = sp / r;
  }
  if (r == 0) {
    if (u < 1 || sp % u != 0)
      throw Error(fmt::format("--ulysses-degree {} does not divide --sp {}", u, sp));
    r = sp / u;
  }
  if (u * r != sp)
    throw Error(fmt::format("--sp {} is not --ulysses-degree {} x --ring-degree {}", sp, u, r));
  return RankLayout::make(world, u, r);
}

int group_size(const RankLayout& l, const std::string& group) {
  if (group == "world") return l.world;
  if (group == "sp") return l.sp;
  if (group == "ulysses") return l.ulysses;
  if (group == "ring") return l.ring;
  if (group == "dp") return l.dp;
  throw Error(fmt::format("--group {}: use world, sp, ulysses, ring or dp", group));
}

// World ranks of rank 0's group: the group every row of the table describes.
std::vector<int> group_members(const RankLayout& l, const std::string& group) {
  if (group == "sp") return l.sp_group(0);
  if (group == "ulysses") return l.ulysses_group(0);
  if (group == "ring") return l.ring_group(0);
  if (group == "dp") return l.dp_group(0);
  std::vector<int> all(std::size_t(l.world));
  for (int w = 0; w < l.world; ++w) all[std::size_t(w)] = w;
  return all;
}

Communicator& pick_group(Communicator& world, Groups& g, const std::string& group) {
  if (group == "sp") return *g.sp;
  if (group == "ulysses") return *g.ulysses;
  if (group == "ring") return *g.ring;
  if (group == "dp") return *g.dp;
  return world;
}

nlohmann::json layout_json(const RankLayout& l, const std::string& group) {
  return {{"world", l.world},     {"sp", l.sp},  {"ulysses_degree", l.ulysses},
          {"ring_degree", l.ring}, {"dp", l.dp}, {"group", group},
          {"group_size", group_size(l, group)},
          {"rule", "dp index = rank / sp; ulysses index = (rank % sp) % ulysses; "
                   "ring index = (rank % sp) / ulysses"}};
}

void add_options(CLI::App& app, Options& o) {
  app.add_option("-b,--minbytes", o.min_bytes, "smallest message size, bytes (K/M/G)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", o.max_bytes, "largest message size, bytes (K/M/G)")
      ->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "multiply the size by this between rows")
      ->capture_default_str();
  app.add_option("-i,--stepbytes", o.step_bytes, "add this many bytes between rows instead of -f");
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations per size")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-n,--iters", o.iters, "timed iterations per size (each timed alone)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("-c,--check", o.check, "check the received data (0: no, 1: yes)")
      ->capture_default_str()->check(CLI::Range(0, 1));
  app.add_option("-o,--op", o.op, "alltoall, sendrecv (ring step), allgather, reducescatter, allreduce")
      ->capture_default_str();
  app.add_option("-d,--datatype", o.dtype, "f32|float, f64|double, bf16|bfloat16, f16|half, i32, i64, u8")
      ->capture_default_str();
  app.add_option("--comm", o.comm, "mpi (host memory) or nccl (device memory)")->capture_default_str();
  // The flag's old name; --backend means the compute back end (cpu|cuda) in the other programs.
  app.add_option("--backend", o.deprecated_backend, "deprecated spelling of --comm")->group("");
  app.add_option("--group", o.group, "world, or one group of the layout: sp, ulysses, ring, dp")
      ->capture_default_str();
  app.add_option("--sp", o.sp, "sequence-parallel degree (default: all ranks)");
  app.add_option("--ulysses-degree", o.ulysses, "Ulysses group size (adjacent ranks)");
  app.add_option("--ring-degree", o.ring, "ring group size");
  app.add_flag("--inject-fault", o.inject_fault,
               "corrupt one input element on rank 0 before the check (tests the check)");
  app.add_option("-J,--json", o.json, "write the measurement JSON to this file");
  app.add_option("--comm-timeout", o.comm_timeout, kCommTimeoutHelp);
}

// Everything the options decide, validated before any communication.
struct Setup {
  Collective op;
  DType dt;
  Backend backend;
  RankLayout layout;
  int ranks;  // in the measured group
  std::vector<std::int64_t> sizes;
  std::vector<Shape> shapes;
};

// Checks the options the same way on every rank, so a bad argument is one message and a clean
// exit everywhere, and that every rank was given the same ones.
Setup check_options(const Options& o) {
  const Collective op = parse_collective(o.op);
  const DType dt = parse_dtype(o.dtype);
  const Backend backend = bench::benchmark_backend(o.comm, o.deprecated_backend, "seqpar-bench-comm");
  if (o.inject_fault && o.check == 0) throw Error("--inject-fault needs the data check (-c 1)");
  const RankLayout layout = layout_from(o, bench::world_size());
  const int ranks = group_size(layout, o.group);
  // The simulator's range (seqpar comm uses it too): at most limits::kMaxSizeRows rows.
  const auto sizes = sim::size_range(parse_count(o.min_bytes, "-b"), parse_count(o.max_bytes, "-e"),
                                     static_cast<double>(o.factor),
                                     o.step_bytes.empty() ? 0 : parse_count(o.step_bytes, "-i"));
  std::vector<Shape> shapes;
  for (auto bytes : sizes) shapes.push_back(make_shape(op, bytes, dt, ranks));
  // Parsed values, so "-b 1K" and "-b 1024" agree. Left out: -J (only rank 0 writes it) and
  // --comm-timeout (each rank's own watchdog).
  verify_same_options({{"-o,--op", to_string(op)},
                       {"-d,--datatype", to_string(dt)},
                       {"--comm", to_string(backend)},
                       {"-b,--minbytes", sizes.front()},
                       {"-e,--maxbytes", parse_count(o.max_bytes, "-e")},
                       {"-f,--stepfactor", o.factor},
                       {"-i,--stepbytes", o.step_bytes.empty() ? 0 : parse_count(o.step_bytes, "-i")},
                       {"-w,--warmup_iters", o.warmup},
                       {"-n,--iters", o.iters},
                       {"-c,--check", o.check},
                       {"--inject-fault", o.inject_fault},
                       {"--group", o.group},
                       {"--sp", layout.sp},
                       {"--ulysses-degree", layout.ulysses},
                       {"--ring-degree", layout.ring}});
  return {op, dt, backend, layout, ranks, sizes, std::move(shapes)};
}

void print_header(const Setup& u, const Options& o, bool gpu) {
  const RankLayout& layout = u.layout;
  std::printf("# seqpar-bench-comm: %s, %s, comm %s (%s memory)\n", to_string(u.op).data(),
              to_string(u.dt), to_string(u.backend).data(), gpu ? "device" : "host");
  std::printf("# layout: %d ranks = dp %d x sp %d (ulysses %d x ring %d); group %s of %d ranks\n",
              layout.world, layout.dp, layout.sp, layout.ulysses, layout.ring, o.group.c_str(),
              u.ranks);
  std::printf("#\n# %10s %12s %6s %10s %8s %8s %7s\n", "size", "count", "type", "time",
              "algbw", "busbw", "#wrong");
  std::printf("# %10s %12s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "(us)", "(GB/s)",
              "(GB/s)", "");
}

// The buffers of every row: device or host as the communicator wants, plus host staging.
struct Buffers {
  bench::Buffer send, recv;
  std::vector<unsigned char> host_send, host_recv;
};

// The row's name in the JSON and in Nsight timelines: op/type/group/sizeB.
std::string row_name(const Setup& u, const Options& o, const Shape& s) {
  return fmt::format("{}/{}/{}/{}B", to_string(u.op), to_string(u.dt), o.group, s.bytes);
}

// One row: the timed iterations, then (with -c) one checked call. `wrong` is null without -c.
struct Row {
  std::vector<double> samples;
  nlohmann::json wrong;
};

Row run_size(const Setup& u, const Options& o, const Shape& s, Communicator& world, Communicator& c, Buffers& b,
             int world_rank) {
  const Collective op = u.op;
  const DType dt = u.dt;
  fill_send(op, b.host_send.data(), s, dt, c.rank(), c.size());
  b.send.upload(b.host_send.data(), s.send_count * dtype_size(dt));
  Row row;
  {
    bench::NvtxRange range(row_name(u, o, s));
    row.samples = bench::time_iterations(world, c, o.warmup, o.iters,
                                         [&] { run_collective(op, c, b.send.data(), b.recv.data(), s, dt); });
  }
  if (!o.check) return row;
  // Fresh input, poisoned output, one more call: the data of this row, not a leftover.
  if (o.inject_fault && world_rank == 0) {
    store(b.host_send.data(), 0, dt, pattern_value(c.rank(), 0, dt) + 3);
    b.send.upload(b.host_send.data(), dtype_size(dt));
  }
  b.recv.fill(0xA5);
  run_collective(op, c, b.send.data(), b.recv.data(), s, dt);
  c.synchronize();
  b.recv.download(b.host_recv.data(), s.recv_count * dtype_size(dt));
  row.wrong = bench::world_sum(count_wrong(op, b.host_recv.data(), s, dt, c.rank(), c.size()));
  return row;
}

nlohmann::json config_json(const Setup& u, const Options& o) {
  return {{"op", to_string(u.op)},          {"datatype", to_string(u.dt)},
          {"comm", to_string(u.backend)}, {"min_bytes", u.sizes.front()},
          {"max_bytes", u.sizes.back()},    {"step_factor", o.factor},
          {"warmup_iters", o.warmup},       {"iters", o.iters},
          {"check", o.check != 0},          {"inject_fault", o.inject_fault},
          {"ranks", u.ranks},               {"group", o.group}};
}

// A row's bandwidths from its median time, in nccl-tests terms.
struct Bandwidth {
  Stats st;
  double algbw, busbw;
};
Bandwidth bandwidth(const Setup& u, const Shape& s, const Row& row) {
  const Stats st = summarize(row.samples);
  const double algbw = static_cast<double>(s.bytes) / st.median / 1e9;
  return {st, algbw, algbw * bus_factor(u.op, u.ranks)};
}

void print_row(const Setup& u, const Options& o, const Shape& s, const Row& row, const Bandwidth& bw) {
  std::printf("  %10zu %12zu %6s %10.2f %8.3f %8.3f %7s\n", s.bytes, s.count, to_string(u.dt),
              bw.st.median * 1e6, bw.algbw, bw.busbw,
              o.check ? std::to_string(row.wrong.get<std::size_t>()).c_str() : "N/A");
  std::fflush(stdout);
}

nlohmann::json row_json(const Setup& u, const Options& o, const Shape& s, const Row& row, const Bandwidth& bw) {
  return {{"name", row_name(u, o, s)},
          {"op", to_string(u.op)},
          {"size_bytes", s.bytes},
          {"count", s.count},
          {"type", to_string(u.dt)},
          {"group", o.group},
          {"ranks", u.ranks},
          {"time_s", bw.st.median},
          {"samples_s", row.samples},
          {"stats", to_json(bw.st, "_s")},
          {"algbw_gbps", bw.algbw},
          {"busbw_gbps", bw.busbw},
          {"wrong", row.wrong}};
}

// Send and receive buffers large enough for every row.
Buffers make_buffers(const Setup& u, bool gpu) {
  std::size_t max_send = 0, max_recv = 0;
  for (const auto& s : u.shapes) {
    max_send = std::max(max_send, s.send_count * dtype_size(u.dt));
    max_recv = std::max(max_recv, s.recv_count * dtype_size(u.dt));
  }
  return {bench::Buffer(max_send, gpu), bench::Buffer(max_recv, gpu), std::vector<unsigned char>(max_send),
          std::vector<unsigned char>(max_recv)};
}

int run(int argc, char** argv, int world_rank, bool& started) {
  Options o;
  CLI::App app{"Collective microbenchmark in the style of nccl-tests (one rank per GPU)",
               "seqpar-bench-comm"};
  add_options(app, o);
  if (int rc = bench::parse_options(app, argc, argv, world_rank); rc >= 0) return rc;
  configure_comm_timeout(o.comm_timeout);
  const Setup u = check_options(o);

  started = true;
  auto world = u.backend == Backend::mpi ? make_mpi_world() : make_nccl_world();
  Groups groups;
  if (o.group != "world") groups = make_groups(*world, u.layout.ulysses, u.layout.ring);
  Communicator& c = pick_group(*world, groups, o.group);
  const bool gpu = c.device_memory();
  Buffers buffers = make_buffers(u, gpu);

  auto doc = bench::measurement_doc(argc, argv, "seqpar-bench-comm", Mode::real_ranks, gpu, config_json(u, o));
  doc["layout"] = layout_json(u.layout, o.group);
  doc["layout"].update(bench::placement_json(group_members(u.layout, o.group)));

  const bool root = world_rank == 0;
  if (root) print_header(u, o, gpu);
  std::size_t total_wrong = 0;
  double busbw_sum = 0;
  // Up to 1000 sizes: how far, and how long is left (rank 0, on a terminal only).
  seqpar::Progress progress("seqpar-bench-comm: sizes", static_cast<std::int64_t>(u.shapes.size()), root ? stderr : nullptr);
  std::int64_t done = 0;
  for (const Shape& s : u.shapes) {
    const Row row = run_size(u, o, s, *world, c, buffers, world_rank);
    progress.update(++done);
    if (o.check) total_wrong += row.wrong.get<std::size_t>();
    const Bandwidth bw = bandwidth(u, s, row);
    busbw_sum += bw.busbw;
    if (root) print_row(u, o, s, row, bw);
    doc["results"].push_back(row_json(u, o, s, row, bw));
  }
  const double avg_busbw = busbw_sum / static_cast<double>(u.shapes.size());
  doc["avg_busbw_gbps"] = avg_busbw;
  doc["wrong_total"] = o.check ? nlohmann::json(total_wrong) : nlohmann::json(nullptr);
  if (root) {
    if (o.check)
      std::printf("# Out of bounds values : %zu %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g\n#\n", avg_busbw);
    if (!o.json.empty()) seqpar::write_json_file(o.json, doc);
  }
  return total_wrong ? 1 : 0;
}

}  // namespace
}  // namespace seqpar::comm

int main(int argc, char** argv) {
  return seqpar::comm::bench::guarded_main(
      argc, argv, [&](int rank, bool& started) { return seqpar::comm::run(argc, argv, rank, started); });
}
