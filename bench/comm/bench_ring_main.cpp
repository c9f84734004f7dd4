// seqpar-bench-ring-step: the Ring Attention communication step alone. Every rank of each ring
// group sends its K and V blocks to the next rank and receives the previous rank's, double
// buffered, for a full rotation (ring degree - 1 steps); reports the time of one step and the
// effective GB/s per rank. With a Ulysses degree U, blocks hold kv_heads/U heads and N/R tokens.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
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
#include "seqpar/core/stats.hpp"

namespace seqpar::comm {
namespace {

struct Options {
  std::string seq_lens = "128K", dtype = "bf16", comm = "mpi", deprecated_backend;
  int batch = 1, kv_heads = 8, head_dim = 128, ulysses = 1, ring = 0;
  int warmup = 5, iters = 20, check = 1;
  bool inject_fault = false;
  std::string json;
  std::optional<double> comm_timeout;
};

// Block elements per tensor (K or V) held by one ring rank.
std::size_t block_elements(const Options& o, std::int64_t seq_len, const RankLayout& l) {
  if (seq_len % l.ring != 0)
    throw Error(fmt::format("--seq-len {} is not divisible by the ring degree {}", seq_len, l.ring));
  if (o.kv_heads % l.ulysses != 0)
    throw Error(fmt::format("--kv-heads {} is not divisible by the Ulysses degree {}", o.kv_heads,
                            l.ulysses));
  return static_cast<std::size_t>(o.batch) * static_cast<std::size_t>(seq_len / l.ring) *
         static_cast<std::size_t>(o.kv_heads / l.ulysses) * static_cast<std::size_t>(o.head_dim);
}

// The value sent, rounded to the element type.
double load_expected(DType dt, int seed, std::size_t i) {
  unsigned char tmp[8];
  store(tmp, 0, dt, pattern_value(seed, i, dt));
  return load(tmp, 0, dt);
}

// K of ring rank r carries pattern r, V pattern r + R, so a swapped tensor shows too.
int tensor_seed(int ring_rank, int tensor, int R) { return ring_rank + tensor * R; }

void add_options(CLI::App& app, Options& o) {
  app.add_option("--seq-len", o.seq_lens, "full sequence length(s), comma-separated (K/M)")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "sequences per step")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-heads", o.kv_heads, "key/value heads of the model")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--head-dim", o.head_dim, "head dimension")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ulysses-degree", o.ulysses, "Ulysses degree (adjacent ranks)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--ring-degree", o.ring, "ring degree (default: ranks / Ulysses degree)")
      ->check(CLI::PositiveNumber);
  app.add_option("-d,--datatype", o.dtype, "element type of K and V")->capture_default_str();
  app.add_option("--comm", o.comm, "mpi (host memory) or nccl (device memory)")->capture_default_str();
  // The flag's old name; --backend means the compute back end (cpu|cuda) in the other programs.
  app.add_option("--backend", o.deprecated_backend, "deprecated spelling of --comm")->group("");
  app.add_option("-w,--warmup_iters", o.warmup, "untimed rotations")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-n,--iters", o.iters, "timed rotations")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-c,--check", o.check, "check every received block (0: no, 1: yes)")
      ->capture_default_str()->check(CLI::Range(0, 1));
  app.add_flag("--inject-fault", o.inject_fault, "corrupt one K element on rank 0 before the check");
  app.add_option("-J,--json", o.json, "write the measurement JSON to this file");
  app.add_option("--comm-timeout", o.comm_timeout, kCommTimeoutHelp);
}

// Everything the options decide, validated before any communication.
struct Setup {
  DType dt;
  Backend backend;
  RankLayout layout;
  std::vector<std::int64_t> seq_lens;
  std::vector<std::size_t> elems;  // K (or V) block elements per row
};

// Checks the options the same way on every rank, and that every rank was given the same ones.
Setup check_options(const Options& o) {
  const DType dt = parse_dtype(o.dtype);
  const Backend backend = bench::benchmark_backend(o.comm, o.deprecated_backend, "seqpar-bench-ring-step");
  if (o.inject_fault && o.check == 0) throw Error("--inject-fault needs the data check (-c 1)");
  const int world = bench::world_size();
  const int ring = o.ring > 0 ? o.ring : (world % o.ulysses == 0 ? world / o.ulysses : 0);
  if (ring == 0)
    throw Error(fmt::format("--ulysses-degree {} does not divide the {} ranks", o.ulysses, world));
  const RankLayout layout = RankLayout::make(world, o.ulysses, ring);
  if (layout.ring < 2)
    throw Error("the ring degree is 1: there is no ring step to measure (run 2 or more ranks)");
  std::vector<std::int64_t> seq_lens;
  std::vector<std::size_t> elems;
  for (const auto& s : split_list(o.seq_lens, "--seq-len")) {
    seq_lens.push_back(parse_count(s, "--seq-len"));
    elems.push_back(block_elements(o, seq_lens.back(), layout));
  }
  // Parsed values; left out: -J (only rank 0 writes it) and --comm-timeout (each rank's own).
  verify_same_options({{"--seq-len", seq_lens},
                       {"--batch", o.batch},
                       {"--kv-heads", o.kv_heads},
                       {"--head-dim", o.head_dim},
                       {"--ulysses-degree", layout.ulysses},
                       {"--ring-degree", layout.ring},
                       {"-d,--datatype", to_string(dt)},
                       {"--comm", to_string(backend)},
                       {"-w,--warmup_iters", o.warmup},
                       {"-n,--iters", o.iters},
                       {"-c,--check", o.check},
                       {"--inject-fault", o.inject_fault}});
  return {dt, backend, layout, std::move(seq_lens), std::move(elems)};

}

nlohmann::json config_json(const Setup& u, const Options& o) {
  return {{"datatype", to_string(u.dt)}, {"comm", to_string(u.backend)},
          {"batch", o.batch},            {"kv_heads", o.kv_heads},
          {"head_dim", o.head_dim},      {"seq_lens", u.seq_lens},
          {"warmup_iters", o.warmup},    {"iters", o.iters},
          {"check", o.check != 0},       {"inject_fault", o.inject_fault}};
}

void print_header(const Setup& u, int R, bool gpu) {
  const RankLayout& layout = u.layout;
  std::printf("# seqpar-bench-ring-step: K,V blocks, %s, comm %s (%s memory)\n",
              to_string(u.dt), to_string(u.backend).data(), gpu ? "device" : "host");
  std::printf("# layout: %d ranks = dp %d x sp %d (ulysses %d x ring %d); %d steps per rotation\n",
              layout.world, layout.dp, layout.sp, layout.ulysses, layout.ring, R - 1);
  std::printf("#\n# %10s %14s %12s %12s %10s %7s\n", "seq_len", "block (K+V)", "step", "rotation",
              "effective", "#wrong");
  std::printf("# %10s %14s %12s %12s %10s %7s\n", "(tokens)", "(B)", "(us)", "(us)", "(GB/s)", "");
}

// One row: per-step seconds of each timed rotation, and (with -c) the wrong elements.
struct Row {
  std::vector<double> step;
  nlohmann::json wrong;
};

Row run_size(const Setup& u, const Options& o, std::size_t row, const std::string& name, Communicator& world_comm,
             Communicator& c, int world_rank) {
  const DType dt = u.dt;
  const int R = c.size(), r = c.rank(), next = (r + 1) % R, prev = (r - 1 + R) % R;
  const bool gpu = c.device_memory();
  const std::size_t n = u.elems[row], bytes = n * dtype_size(dt);
  // [tensor K/V][buffer 0/1]: send from one buffer while the next block lands in the other.
  bench::Buffer k0(bytes, gpu), k1(bytes, gpu), v0(bytes, gpu), v1(bytes, gpu);
  bench::Buffer* buf[2][2] = {{&k0, &k1}, {&v0, &v1}};
  std::vector<unsigned char> host(bytes);
  // Own K and V blocks in buffer 0, buffer 1 poisoned; `fault`: rank 0's first K element off by 3.
  auto load_own_blocks = [&](bool fault) {
    for (int t = 0; t < 2; ++t) {
      for (std::size_t i = 0; i < n; ++i) store(host.data(), i, dt, pattern_value(tensor_seed(r, t, R), i, dt));
      if (t == 0 && fault && world_rank == 0)
        store(host.data(), 0, dt, pattern_value(tensor_seed(r, 0, R), 0, dt) + 3);
      buf[t][0]->upload(host.data(), bytes);
      buf[t][1]->fill(0xA5);
    }
  };
  // One rotation; after_step(step, landed) sees the buffer index each step filled.
  auto rotate = [&](const std::function<void(int, int)>& after_step) {
    for (int step = 1; step < R; ++step) {
      const int cur = (step - 1) % 2, nxt = step % 2;
      Request rk = c.send_recv_async(buf[0][cur]->data(), next, buf[0][nxt]->data(), prev, n, dt);
      Request rv = c.send_recv_async(buf[1][cur]->data(), next, buf[1][nxt]->data(), prev, n, dt);
      c.wait(rk);
      c.wait(rv);
      if (after_step) after_step(step, nxt);
    }
  };
  load_own_blocks(false);  // timed rotations use clean data
  std::vector<double> rotation;
  {
    bench::NvtxRange range(name);
    rotation = bench::time_iterations(world_comm, c, o.warmup, o.iters, [&] { rotate({}); });
  }
  nlohmann::json wrong = nullptr;
  if (o.check) {
    load_own_blocks(o.inject_fault);
    std::size_t w = 0;
    rotate([&](int step, int landed) {
      c.synchronize();
      const int src = ((r - step) % R + R) % R;
      for (int t = 0; t < 2; ++t) {
        buf[t][landed]->download(host.data(), bytes);
        for (std::size_t i = 0; i < n; ++i)
          if (load(host.data(), i, dt) != load_expected(dt, tensor_seed(src, t, R), i)) ++w;
      }
      c.barrier();  // the peer may refill the buffer it sent from only after the check
    });
    wrong = bench::world_sum(w);
  }
  std::vector<double> step(rotation.size());
  for (std::size_t i = 0; i < step.size(); ++i) step[i] = rotation[i] / (R - 1);
  return {std::move(step), std::move(wrong)};
}

int run(int argc, char** argv, int world_rank, bool& started) {
  Options o;
  CLI::App app{"Ring Attention step: K,V block send/recv around the ring (one rank per GPU)",
               "seqpar-bench-ring-step"};
  add_options(app, o);
  if (int rc = bench::parse_options(app, argc, argv, world_rank); rc >= 0) return rc;
  configure_comm_timeout(o.comm_timeout);
  const Setup u = check_options(o);
  const DType dt = u.dt;
  const RankLayout& layout = u.layout;

  started = true;
  auto world_comm = u.backend == Backend::mpi ? make_mpi_world() : make_nccl_world();
  Groups groups = make_groups(*world_comm, layout.ulysses, layout.ring);
  Communicator& c = *groups.ring;
  const bool gpu = c.device_memory();
  const int R = c.size();

  auto doc = bench::measurement_doc(argc, argv, "seqpar-bench-ring-step", Mode::real_ranks, gpu, config_json(u, o));
  doc["layout"] = {{"world", layout.world},  {"sp", layout.sp}, {"ulysses_degree", layout.ulysses},
                   {"ring_degree", layout.ring}, {"dp", layout.dp}, {"group", "ring"}};
  doc["layout"].update(bench::placement_json(layout.ring_group(0)));
  const bool root = world_rank == 0;
  if (root) print_header(u, R, gpu);

  std::size_t total_wrong = 0;
  for (std::size_t row = 0; row < u.seq_lens.size(); ++row) {
    const std::size_t n = u.elems[row], bytes = n * dtype_size(dt);
    const std::string name =
        fmt::format("ring_step/{}/seq{}/kv{}/d{}/u{}/r{}", to_string(dt), u.seq_lens[row],
                    o.kv_heads, o.head_dim, layout.ulysses, layout.ring);
    const Row res = run_size(u, o, row, name, *world_comm, c, world_rank);
    const std::vector<double>& step = res.step;
    const nlohmann::json& wrong = res.wrong;
    if (o.check) total_wrong += wrong.get<std::size_t>();
    const Stats st = summarize(step);
    const double gbps = 2.0 * static_cast<double>(bytes) / st.median / 1e9;
    if (root) {
      std::printf("  %10lld %14zu %12.2f %12.2f %10.3f %7s\n", static_cast<long long>(u.seq_lens[row]),
                  2 * bytes, st.median * 1e6, st.median * (R - 1) * 1e6, gbps,
                  o.check ? std::to_string(wrong.get<std::size_t>()).c_str() : "N/A");
      std::fflush(stdout);
    }
    doc["results"].push_back({{"name", name},
                              {"seq_len", u.seq_lens[row]},
                              {"block_elements", n},
                              {"block_bytes", 2 * bytes},
                              {"type", to_string(dt)},
                              {"ring_degree", R},
                              {"time_s", st.median},
                              {"samples_s", step},
                              {"stats", to_json(st, "_s")},
                              {"rotation_time_s", st.median * (R - 1)},
                              {"effective_gbps", gbps},
                              {"wrong", wrong}});
  }
  doc["wrong_total"] = o.check ? nlohmann::json(total_wrong) : nlohmann::json(nullptr);
  if (root) {
    if (o.check)
      std::printf("# Out of bounds values : %zu %s\n#\n", total_wrong, total_wrong ? "FAILED" : "OK");
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
