#include "full_reshard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <thread>

#include "bench_driver.hpp"
#include "paths.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/comm/element.hpp"
#include "seqpar/comm/same_options.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/stats.hpp"

namespace seqpar::bench {
namespace {

using comm::Backend;
using comm::Communicator;
using namespace reshard_full;

constexpr std::array<Variant, 2> kVariants = {Variant::fused, Variant::naive};
enum Part { pack_part, exchange_part, unpack_part, total_part, part_count };
constexpr std::array<const char*, part_count> kPartKeys = {"pack", "all_to_all", "unpack", "total"};

// Everything one rank needs to run the paths.
struct Setup {
  Shape shape;
  kernels::DType dtype = kernels::DType::fp32;
  bool gpu = false, loopback = false;
  int warmup = 0, iters = 1;
  bool check = true, inject_fault = false;
};

// One rank's timings: samples[variant][path][iteration][part], and the wrong elements per row.
struct RankResult {
  std::vector<std::vector<std::vector<std::array<double, part_count>>>> samples;
  std::vector<std::vector<std::size_t>> wrong;
};

// Buffers of one path in the communicator's memory, with host staging in the element type.
class PathBuffers {
 public:
  PathBuffers(const Path& p, std::size_t esize, bool gpu) : esize_(esize) {
    auto make = [&](const std::vector<std::size_t>& sizes, std::vector<std::unique_ptr<comm::bench::Buffer>>& out,
                    std::vector<void*>& ptrs) {
      for (std::size_t n : sizes) {
        out.push_back(std::make_unique<comm::bench::Buffer>(n * esize, gpu));
        ptrs.push_back(out.back()->data());
      }
    };
    make(p.in, in_, view_.in);
    make(p.tmp, tmp_, view_.tmp);
    make(p.send, send_, view_.send);
    make(p.send, recv_, view_.recv);
    make(p.out, out_, view_.out);
  }
  const Buffers& view() const { return view_; }

  void fill_inputs(int path_index, int rank, comm::DType cdt, bool fault) {
    for (std::size_t t = 0; t < in_.size(); ++t) {
      const std::size_t n = in_[t]->bytes() / esize_;
      staging_.resize(in_[t]->bytes());
      for (std::size_t i = 0; i < n; ++i) comm::store(staging_.data(), i, cdt, fill_value(path_index, int(t), rank, i));
      if (fault && t == 0) comm::store(staging_.data(), 0, cdt, fill_value(path_index, 0, rank, 0) + 1000);
      in_[t]->upload(staging_.data(), in_[t]->bytes());
    }
  }
  // 0xFF bytes are NaN in every float type: an output the path did not write never compares equal.
  void poison_outputs() {
    for (auto& b : out_) b->fill(0xFF);
  }
  std::size_t count_wrong(const std::vector<std::vector<float>>& expected, comm::DType cdt) {
    std::size_t wrong = 0;
    std::vector<unsigned char> rounded(8);
    for (std::size_t t = 0; t < out_.size(); ++t) {
      staging_.resize(out_[t]->bytes());
      out_[t]->download(staging_.data(), out_[t]->bytes());
      for (std::size_t i = 0; i < expected[t].size(); ++i) {
        comm::store(rounded.data(), 0, cdt, expected[t][i]);  // a sum of replicas rounds like the kernel's
        if (!(comm::load(staging_.data(), i, cdt) == comm::load(rounded.data(), 0, cdt))) ++wrong;
      }
    }
    return wrong;
  }

 private:
  std::size_t esize_;
  std::vector<std::unique_ptr<comm::bench::Buffer>> in_, tmp_, send_, recv_, out_;
  std::vector<unsigned char> staging_;
  Buffers view_;
};

RankResult run_rank(Communicator& c, Communicator& sync, const Setup& st) {
  const Shape& s = st.shape;
  const DType cdt = st.dtype;  // kernels and the communicator share core's DType
  const std::size_t esize = kernels::dtype_size(st.dtype);
  std::shared_ptr<void> stream;
  std::unique_ptr<Clock> clock;
  if (st.gpu) {
    stream = make_gpu_stream();
    c.set_stream(stream.get());
    clock = make_gpu_clock(stream.get());
  } else {
    clock = make_host_clock();
  }
  const std::vector<Path> paths = make_paths(s);
  RankResult r;
  r.samples.resize(kVariants.size(), std::vector<std::vector<std::array<double, part_count>>>(paths.size()));
  r.wrong.resize(kVariants.size(), std::vector<std::size_t>(paths.size(), 0));
  for (std::size_t pi = 0; pi < paths.size(); ++pi) {
    const Path& p = paths[pi];
    PathBuffers bufs(p, esize, st.gpu);
    const Buffers& b = bufs.view();
    bufs.fill_inputs(int(pi), c.rank(), cdt, false);  // timed runs move real data, never zeros
    if (st.gpu) sync_gpu_stream(nullptr);            // uploads go through the legacy stream
    std::vector<std::vector<float>> expected;
    if (st.check) expected = expected_outputs(p, int(pi), s, c.rank(), st.loopback);
    for (std::size_t vi = 0; vi < kVariants.size(); ++vi) {
      const auto mover = st.gpu ? make_gpu_mover(kVariants[vi], st.dtype, stream.get()) : make_host_mover(kVariants[vi]);
      auto iteration = [&] {
        clock->mark();
        p.pack(*mover, s, b);
        clock->mark();
        for (std::size_t i = 0; i < b.send.size(); ++i)
          c.all_to_all(b.send[i], b.recv[i], p.send[i] / std::size_t(s.P), cdt);
        clock->mark();
        p.unpack(*mover, s, b);
        clock->mark();
        const std::vector<double> t = clock->read();
        return std::array<double, part_count>{t[0], t[1], t[2], t[0] + t[1] + t[2]};
      };
      for (int w = 0; w < st.warmup; ++w) iteration();
      auto& samples = r.samples[vi][pi];
      for (int it = 0; it < st.iters; ++it) {
        sync.barrier();  // every rank starts the iteration together
        samples.push_back(iteration());
      }
      if (st.check) {
        bufs.fill_inputs(int(pi), c.rank(), cdt, st.inject_fault && c.rank() == 0);
        bufs.poison_outputs();
        if (st.gpu) sync_gpu_stream(nullptr);
        sync.barrier();
        iteration();
        r.wrong[vi][pi] = bufs.count_wrong(expected, cdt);
        sync.barrier();  // no rank refills its send buffers while a peer may still read them
      }
    }
  }
  return r;
}

// Flattens the samples for a cross-rank reduction and back.
std::vector<double> flatten(const RankResult& r) {
  std::vector<double> v;
  for (const auto& per_variant : r.samples)
    for (const auto& per_path : per_variant)
      for (const auto& it : per_path) v.insert(v.end(), it.begin(), it.end());
  return v;
}
void unflatten(const std::vector<double>& v, RankResult& r) {
  std::size_t k = 0;
  for (auto& per_variant : r.samples)
    for (auto& per_path : per_variant)
      for (auto& it : per_path)
        for (double& x : it) x = v[k++];
}
std::size_t total_wrong(const RankResult& r) {
  std::size_t w = 0;
  for (const auto& per_variant : r.wrong)
    for (std::size_t x : per_variant) w += x;
  return w;
}

// An iteration (and each stage) is done when its slowest rank is; wrong counts add up.
void combine_world(RankResult& r) {
  std::vector<double> v = flatten(r);
  comm::bench::world_max(v, "the all-reduce of the stage times");
  unflatten(v, r);
  for (auto& per_variant : r.wrong)
    for (std::size_t& x : per_variant) x = comm::bench::world_sum(x);
}

void combine_threads(std::vector<RankResult>& all) {
  RankResult& r = all[0];
  std::vector<double> v = flatten(r);
  for (std::size_t q = 1; q < all.size(); ++q) {
    const std::vector<double> o = flatten(all[q]);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::max(v[i], o[i]);
    for (std::size_t a = 0; a < r.wrong.size(); ++a)
      for (std::size_t b = 0; b < r.wrong[a].size(); ++b) r.wrong[a][b] += all[q].wrong[a][b];
  }
  unflatten(v, r);
}

// Runs the P virtual ranks, one thread each. A failure on one thread would leave its peers waiting in
// a rendezvous, so it ends the process (like MPI_Abort on real ranks).
RankResult run_virtual(const Setup& st) {
  auto comms = comm::make_virtual_world(st.shape.P, st.gpu);
  std::vector<RankResult> results(comms.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        results[r] = run_rank(*comms[r], *comms[r], st);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error on virtual rank %zu: %s\n", r, e.what());
        std::fflush(stderr);
        std::_Exit(3);
      }
    });
  for (auto& t : threads) t.join();
  combine_threads(results);
  return std::move(results[0]);
}

Backend parse_comm(const std::string& text) {
  try {
    return comm::parse_backend(text);
  } catch (const Error& e) {
    throw Error(fmt::format("--comm {}: {}", text, e.what()));
  }
}

const char* mode_of(Backend b) {
  return to_string(comm::measurement_mode(b));
}

// --device, --dtype and the loop options, checked against the backend; the shape is filled in later.
Setup checked_setup(const ReshardOptions& o, Backend backend, std::string& device) {
  device = o.device.empty() ? (backend == Backend::mpi ? "cpu" : "gpu") : o.device;
  if (device != "gpu" && device != "cpu") throw Error(fmt::format("--device {}: accepted values are gpu, cpu", device));
  if (backend == Backend::mpi && device == "gpu")
    throw Error("--device gpu: --comm mpi moves host memory (use nccl, virtual or loopback on the GPU)");
  if (backend == Backend::nccl && device == "cpu")
    throw Error("--device cpu: --comm nccl moves device memory (use mpi, virtual or loopback on the host)");
  Setup st;
  st.gpu = device == "gpu";
  st.loopback = backend == Backend::loopback;
  st.dtype = kernels::parse_dtype(o.dtype.empty() ? (st.gpu ? "bf16" : "fp32") : o.dtype, "--dtype");
  if (!st.gpu && st.dtype != kernels::DType::fp32)
    throw Error(fmt::format("--dtype {}: on the host the reshard runs the CPU reference, which moves fp32",
                            kernels::to_string(st.dtype)));
  if (o.iters <= 0) throw Error(fmt::format("--iters {}: must be positive", o.iters));
  if (o.warmup < 0) throw Error(fmt::format("--warmup {}: must not be negative", o.warmup));
  if (o.check != 0 && o.check != 1) throw Error(fmt::format("-c {}: accepted values are 0, 1", o.check));
  if (o.inject_fault && o.check == 0) throw Error("--inject-fault needs the data check (-c 1)");
  st.warmup = o.warmup;
  st.iters = o.iters;
  st.check = o.check == 1;
  st.inject_fault = o.inject_fault;
  return st;
}

// The Ulysses degree P: --sp, or the MPI world on real ranks when --sp is not given.
int ulysses_degree(const ReshardOptions& o, bool real_ranks, int world) {
  if (o.sp.empty()) {
    if (!real_ranks) throw Error(fmt::format("--sp: give the Ulysses degree P to emulate with --comm {}", o.comm));
    return world;
  }
  const auto list = split_list(o.sp, "--sp");
  if (list.size() != 1) throw Error(fmt::format("--sp {}: the full reshard takes one degree P", o.sp));
  const std::int64_t p = parse_count(list[0], "--sp");
  if (p <= 0 || p > 1 << 20) throw Error(fmt::format("--sp {}: must be a positive rank count", o.sp));
  return static_cast<int>(p);
}

// Every rank must have parsed the same values. Left out: -J (only rank 0 writes it) and
// --comm-timeout (each rank's own).
void verify_same_options_on_ranks(const ReshardOptions& o, const std::string& device, const Setup& st) {
  const Shape& s = st.shape;
  comm::verify_same_options({{"--comm", o.comm},
                             {"--device", device},
                             {"--dtype", kernels::to_string(st.dtype)},
                             {"--sp", s.P},
                             {"--batch", s.batch},
                             {"--seq-len", s.seq_len},
                             {"--heads", s.heads},
                             {"--kv-heads", s.kv_heads},
                             {"--head-dim", s.head_dim},
                             {"--warmup", o.warmup},
                             {"--iters", o.iters},
                             {"-c,--check", o.check},
                             {"--inject-fault", o.inject_fault}});
}

// Runs the paths on the chosen communicator; on real ranks the result is already the slowest rank's.
RankResult run_on(Backend backend, const Setup& st) {
  const int P = st.shape.P;
  if (backend == Backend::mpi || backend == Backend::nccl) {
    auto world_comm = backend == Backend::mpi ? comm::make_mpi_world() : comm::make_nccl_world();
    comm::Groups groups = comm::make_groups(*world_comm, P, 1);
    RankResult result = run_rank(*groups.ulysses, *world_comm, st);
    combine_world(result);
    return result;
  }
  if (backend == Backend::virtual_ranks) return run_virtual(st);
  auto c = comm::make_loopback(P, 0, st.gpu);
  return run_rank(*c, *c, st);
}

// The measurement document without its results: configuration and rank layout.
nlohmann::json document_head(const ReshardOptions& o, int argc, char** argv, Backend backend, const Setup& st,
                             const comm::RankLayout& layout) {
  const Shape& s = st.shape;
  nlohmann::json config = {{"comm", o.comm},         {"dtype", kernels::to_string(st.dtype)},
                           {"batch", s.batch},       {"seq_len", s.seq_len},
                           {"tokens_per_rank", s.n}, {"heads", s.heads},
                           {"kv_heads", s.kv_heads}, {"kv_replication", s.rep},
                           {"head_dim", s.head_dim}, {"sp", s.P},
                           {"warmup", o.warmup},     {"iters", o.iters},
                           {"check", st.check},      {"inject_fault", o.inject_fault}};
  auto doc = comm::bench::measurement_doc(argc, argv, "seqpar-bench-reshard", comm::measurement_mode(backend), st.gpu, config);
  doc["layout"] = {{"world", layout.world}, {"sp", layout.sp}, {"ulysses_degree", layout.ulysses},
                   {"ring_degree", layout.ring}, {"dp", layout.dp}, {"group", "ulysses"}};
  if (st.loopback) doc["layout"]["proxy_rank"] = 0;
  return doc;
}

void print_table_header(const ReshardOptions& o, Backend backend, const Setup& st, const comm::RankLayout& layout) {
  const Shape& s = st.shape;
  std::printf("# seqpar-bench-reshard: full Ulysses reshard, --comm %s (%s, %s memory), %s\n", o.comm.c_str(),
              mode_of(backend), st.gpu ? "device" : "host", kernels::to_string(st.dtype));
  std::printf("# shape: batch %d, seq_len %lld (%d per rank), heads %d, kv_heads %d (%s), head_dim %d, P %d; "
              "%d ranks = dp %d x sp %d\n",
              s.batch, static_cast<long long>(s.seq_len), s.n, s.heads, s.kv_heads,
              s.rep > 1 ? fmt::format("replicated x{}", s.rep).c_str() : "split", s.head_dim, s.P, layout.world,
              layout.dp, layout.sp);
  std::printf("# times: median over %d iterations of the slowest rank; GB/s: bytes each rank sends + receives\n#\n",
              o.iters);
  std::printf("# %-7s %-16s %4s %13s %10s %10s %10s %10s %10s %7s\n", "variant", "path", "a2a", "bytes/rank", "pack",
              "all2all", "unpack", "total", "effective", "#wrong");
  std::printf("# %-7s %-16s %4s %13s %10s %10s %10s %10s %10s %7s\n", "", "", "", "(B)", "(us)", "(us)", "(us)", "(us)",
              "(GB/s)", "");
}

// One (variant, path) row: its JSON result, and its table line on the root rank.
nlohmann::json result_row(const Setup& st, const Path& p, Variant variant_kind,
                          const std::vector<std::array<double, part_count>>& samples, std::size_t wrong, bool print) {
  const Shape& s = st.shape;
  const char* dtype = kernels::to_string(st.dtype);
  std::size_t bytes = 0;
  for (std::size_t n : p.send) bytes += n * kernels::dtype_size(st.dtype);
  // The own chunk stays put: a rank sends (P-1)/P of its buffer and receives as much.
  const std::size_t moved = bytes / std::size_t(s.P) * std::size_t(s.P - 1);
  std::array<std::vector<double>, part_count> parts;
  for (const auto& it : samples)
    for (int k = 0; k < part_count; ++k) parts[std::size_t(k)].push_back(it[std::size_t(k)]);
  std::array<double, part_count> median{};
  for (int k = 0; k < part_count; ++k) median[std::size_t(k)] = summarize(parts[std::size_t(k)]).median;
  const double total = median[total_part];
  const double gbps = 2.0 * double(moved) / total / 1e9;
  const std::string variant{to_string(variant_kind)};
  const std::string name = fmt::format("reshard_full/{}/{}/{}/P{}/seq{}/b{}/h{}/kv{}/d{}", variant, p.name, dtype, s.P,
                                       s.seq_len, s.batch, s.heads, s.kv_heads, s.head_dim);
  nlohmann::json row = {{"name", name},
                        {"variant", variant},
                        {"path", p.name},
                        {"direction", p.direction},
                        {"tensors", p.tensors},
                        {"all_to_alls", p.send.size()},
                        {"bytes", bytes},
                        {"sent_bytes", moved},
                        {"received_bytes", moved},
                        {"time_s", total},
                        {"samples_s", parts[total_part]},
                        {"stats", to_json(summarize(parts[total_part]), "_s")},
                        {"effective_gbps", gbps},
                        {"all_to_all_gbps", 2.0 * double(moved) / median[exchange_part] / 1e9},
                        {"wrong", st.check ? nlohmann::json(wrong) : nlohmann::json(nullptr)}};
  for (int k = 0; k < total_part; ++k) {
    row[fmt::format("{}_time_s", kPartKeys[std::size_t(k)])] = median[std::size_t(k)];
    row[fmt::format("{}_samples_s", kPartKeys[std::size_t(k)])] = parts[std::size_t(k)];
  }
  if (print)
    std::printf("  %-7s %-16s %4zu %13zu %10.2f %10.2f %10.2f %10.2f %10.3f %7s\n", variant.c_str(), p.name.c_str(),
                p.send.size(), bytes, median[pack_part] * 1e6, median[exchange_part] * 1e6, median[unpack_part] * 1e6,
                total * 1e6, gbps, st.check ? std::to_string(wrong).c_str() : "N/A");
  return row;
}

}  // namespace

int run_full_reshard(const ReshardOptions& o, int argc, char** argv, int world_rank, bool& started) {
  const Backend backend = parse_comm(o.comm);
  const bool real_ranks = backend == Backend::mpi || backend == Backend::nccl;
  std::string device;
  Setup st = checked_setup(o, backend, device);

  std::string why;
  if (!comm::backend_available(backend, &why)) throw Error(fmt::format("--comm {}: {}", o.comm, why));
  if (st.gpu && !comm::cuda_device_available(&why)) throw Error(fmt::format("no usable CUDA device: {}", why));
  const int world = comm::bench::world_size();
  if (!real_ranks && world != 1)
    throw Error(fmt::format("--comm {} runs in one process: launch it without mpirun ({} MPI ranks found)", o.comm,
                            world));
  const int P = ulysses_degree(o, real_ranks, world);
  if (real_ranks && world % P != 0)
    throw Error(fmt::format("--sp {} does not divide the {} MPI ranks (ranks = dp x sp)", P, world));
  st.shape = make_shape(P, o.batch, parse_count(o.seq_len, "--seq-len"), o.heads, o.kv_heads, o.head_dim);
  comm::configure_comm_timeout(o.comm_timeout);
  if (real_ranks) verify_same_options_on_ranks(o, device, st);

  started = true;
  const RankResult result = run_on(backend, st);

  const comm::RankLayout layout = comm::RankLayout::make(real_ranks ? world : P, P, 1);
  nlohmann::json doc = document_head(o, argc, argv, backend, st, layout);
  const bool root = world_rank == 0;
  if (root) print_table_header(o, backend, st, layout);
  const std::vector<Path> paths = make_paths(st.shape);
  for (std::size_t pi = 0; pi < paths.size(); ++pi)
    for (std::size_t vi = 0; vi < kVariants.size(); ++vi)
      doc["results"].push_back(
          result_row(st, paths[pi], kVariants[vi], result.samples[vi][pi], result.wrong[vi][pi], root));
  const std::size_t wrong = total_wrong(result);
  doc["wrong_total"] = st.check ? nlohmann::json(wrong) : nlohmann::json(nullptr);
  if (root) {
    if (st.check) std::printf("# Out of bounds values : %zu %s\n#\n", wrong, wrong ? "FAILED" : "OK");
    std::fflush(stdout);
    if (!o.json_path.empty()) seqpar::write_json_file(o.json_path, doc);
  }
  return wrong ? 1 : 0;
}

}  // namespace seqpar::bench
