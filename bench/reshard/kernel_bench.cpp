// seqpar-bench-reshard without --comm: the Ulysses reshards (pack/unpack around the all-to-alls, both
// directions, single tensors and fused q,k,v) in GB/s, beside cudaMemcpy device-to-device of the same
// bytes measured in the same run. Modes are rows of one table.
#include "kernel_bench.hpp"

#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "seqpar/bench/device_memory.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/bench/gbench_harness.hpp"
#include "seqpar/bench/gpu_timer.hpp"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/kernels/fill.cuh"
#include "seqpar/kernels/reshard.cuh"
#include "seqpar/kernels/reshard_layout.hpp"

namespace seqpar::bench {
namespace {

using kernels::DType;

// One rank's view: per-rank tokens n = seq_len / P of a [batch, seq_len, heads, head_dim] activation.
struct Shape {
  int P = 1, batch = 1, n = 0, heads = 0, kv_heads = 0, d = 0;
  DType t = DType::bf16;
  std::size_t elems(int h) const { return std::size_t(batch) * n * h * d; }
  std::size_t bytes(int h) const { return elems(h) * kernels::dtype_size(t); }
};

// A mode: the bytes it moves (counted once: the size of what is copied) and how to launch it from the
// source tensors (`inputs` of them, sized as the mode's input) into one destination of `bytes`.
// A new mode (the all-to-all itself) is one more row in modes().
struct Mode {
  const char* name;
  const char* help;
  std::function<std::size_t(const Shape&)> bytes;
  std::function<void(const Shape&, const std::vector<void*>& src, void* dst)> launch;
  int inputs = 1;  // source tensors (3 for the unfused q, k, v inputs of the fused packs)
};

std::vector<Mode> modes() {
  auto single = [](auto fn) {
    return [fn](const Shape& s, const std::vector<void*>& src, void* dst) {
      fn(s.P, s.batch, s.n, s.heads, s.d, s.t, src[0], dst, nullptr);
    };
  };
  auto one = [](const Shape& s) { return s.bytes(s.heads); };
  auto qkv = [](const Shape& s) { return s.bytes(s.heads) + 2 * s.bytes(s.kv_heads); };
  return {
      {"pack", "[b,n,H,d] -> [P][b,n,H/P,d] before the forward all-to-all", one, single(kernels::ulysses_pack)},
      {"unpack", "[P][b,n,H/P,d] -> [b,P*n,H/P,d] after it", one, single(kernels::ulysses_unpack)},
      {"pack_reverse", "[b,P*n,H/P,d] -> [P][b,n,H/P,d] before the output all-to-all", one,
       single(kernels::ulysses_pack_reverse)},
      {"unpack_reverse", "[P][b,n,H/P,d] -> [b,n,H,d] after it", one, single(kernels::ulysses_unpack_reverse)},
      {"pack_qkv", "q, k, v -> one send buffer (kv_heads % P == 0)", qkv,
       [](const Shape& s, const std::vector<void*>& src, void* dst) {
         kernels::ulysses_pack_qkv(s.P, s.batch, s.n, s.heads, s.kv_heads, s.d, s.t, src[0], src[1], src[2], dst);
       },
       3},
      {"pack_qkv_reverse", "dq, dk, dv [b,P*n,H/P,d] -> one send buffer for the backward all-to-all", qkv,
       [](const Shape& s, const std::vector<void*>& src, void* dst) {
         kernels::ulysses_pack_qkv_reverse(s.P, s.batch, s.n, s.heads, s.kv_heads, s.d, s.t, src[0], src[1], src[2],
                                           dst);
       },
       3},
      {"memcpy", "cudaMemcpyAsync device-to-device of the single-tensor bytes (the peer)", one,
       [](const Shape& s, const std::vector<void*>& src, void* dst) {
         SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dst, src[0], s.bytes(s.heads), cudaMemcpyDeviceToDevice, nullptr));
       }},
  };
}

void register_all(const ReshardOptions& opt, const TimingOptions& timing, Recorder& rec) {
  const DType t = kernels::parse_dtype(opt.dtype.empty() ? "bf16" : opt.dtype, "--dtype");
  const std::int64_t seq = parse_count(opt.seq_len, "--seq-len");
  const std::vector<Mode> table = modes();
  for (const std::string& mode_name : split_list(opt.modes, "--modes")) {
    const Mode* mode = nullptr;
    for (const Mode& m : table)
      if (mode_name == m.name) mode = &m;
    if (!mode) throw Error(fmt::format("--modes: unknown mode '{}' (see --help)", mode_name));
    for (const std::string& ptext : split_list(opt.sp.empty() ? "2,4,8" : opt.sp, "--sp")) {
      const auto P = parse_count(ptext, "--sp");
      if (P <= 0 || seq % P != 0)
        throw Error(fmt::format("--seq-len {} must be divisible by every --sp value ({} is not a divisor)", seq, P));
      Shape s;
      s.P = static_cast<int>(P);
      s.batch = opt.batch;
      s.n = static_cast<int>(seq / P);
      s.heads = opt.heads;
      s.kv_heads = opt.kv_heads;
      s.d = opt.head_dim;
      s.t = t;
      reshard::check_ulysses_args(s.P, s.batch, s.n, s.heads, s.d, "--heads");
      if (mode->inputs == 3) reshard::check_ulysses_args(s.P, s.batch, s.n, s.kv_heads, s.d, "--kv-heads");
      const std::size_t bytes = mode->bytes(s);
      const std::string name = fmt::format("reshard_{}/{}/P{}/seq{}/h{}/d{}", mode->name, kernels::to_string(t), P,
                                           seq, s.heads, s.d);
      const nlohmann::json fields = {{"op", mode->name}, {"dtype", kernels::to_string(t)}, {"sp", P},
                                     {"seq_len", seq},   {"tokens_per_rank", s.n},         {"batch", s.batch},
                                     {"heads", s.heads}, {"kv_heads", s.kv_heads},         {"head_dim", s.d},
                                     {"bytes", bytes}};
      const Mode m = *mode;
      auto setup = [s, m, bytes, fields]() {
        struct Set {
          std::vector<DeviceMemory> src;
          DeviceMemory dst;
        };
        auto sets = std::make_shared<std::vector<Set>>();
        const int copies = rotation_copies(2 * bytes);
        for (int c = 0; c < copies; ++c) {
          Set set;
          const int sizes[3] = {s.heads, s.kv_heads, s.kv_heads};
          for (int i = 0; i < m.inputs; ++i) {
            set.src.emplace_back(s.bytes(sizes[i]));
            kernels::fill_uniform(s.t, set.src.back().get(), s.elems(sizes[i]), 100u * c + i);
          }
          set.dst = DeviceMemory(bytes);
          sets->push_back(std::move(set));
        }
        SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
        nlohmann::json f = fields;
        f["rotated_copies"] = copies;
        Recorder::Launch launch = [s, m, sets](int rep) {
          const Set& set = (*sets)[static_cast<std::size_t>(rep) % sets->size()];
          std::vector<void*> src;
          for (const auto& b : set.src) src.push_back(b.get());
          m.launch(s, src, set.dst.get());
        };
        return Recorder::Prepared{launch, f};
      };
      // algbw: bytes copied / time; mem: bytes read + written / time (what the DRAM sees).
      auto rates = [bytes](double median_s) {
        return nlohmann::json{{"algbw_gbps", double(bytes) / median_s / 1e9},
                              {"mem_gbps", 2.0 * double(bytes) / median_s / 1e9}};
      };
      rec.add(name, setup, rates, timing);
    }
  }
}


}  // namespace

std::string kernel_modes_help() {
  std::string help = "Comma-separated rows of the kernel-only mode:";
  for (const Mode& m : modes()) help += fmt::format("\n  {}: {}", m.name, m.help);
  return help;
}

int run_kernel_bench(const ReshardOptions& opt, const std::vector<std::string>& gbench_args, int argc,
                     char** argv) {
  if (opt.iters <= 0 || opt.warmup < 0) throw Error("--iters must be positive and --warmup non-negative");
  std::string why;
  if (!comm::cuda_device_available(&why)) throw Error(fmt::format("no usable CUDA device: {}", why));
  const TimingOptions timing{opt.warmup, opt.iters};
  Recorder rec(gpu_timers());
  register_all(opt, timing, rec);
  run_registered_benchmarks(gbench_args, argv[0]);
  if (!opt.json_path.empty()) {
    const nlohmann::json config = {{"sp", opt.sp.empty() ? "2,4,8" : opt.sp},
                                   {"seq_len", opt.seq_len},
                                   {"modes", opt.modes},
                                   {"dtype", opt.dtype.empty() ? "bf16" : opt.dtype},
                                   {"batch", opt.batch},
                                   {"heads", opt.heads},
                                   {"kv_heads", opt.kv_heads},
                                   {"head_dim", opt.head_dim},
                                   {"warmup", opt.warmup},
                                   {"iterations", opt.iters}};
    write_measurement(opt.json_path, argc, argv, "seqpar-bench-reshard", seqpar::Mode::real_ranks, config,
                      rec.results());
  }
  return 0;
}

}  // namespace seqpar::bench
