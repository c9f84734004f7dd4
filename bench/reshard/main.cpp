// seqpar-bench-reshard: the Ulysses reshard. Without --comm, the reshard kernels alone in GB/s beside
// cudaMemcpy (Google Benchmark rows); with --comm, the whole reshard (pack + all-to-all + unpack, for
// q,k,v and the output, forward and backward; fused kernels beside naive copies) on real ranks,
// virtual ranks or the single-rank proxy, with the data check.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "bench_driver.hpp"
#include "full_reshard.hpp"
#include "options.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/usage_exit.hpp"

#ifdef SEQPAR_HAVE_CUDA
#include "kernel_bench.hpp"
#include "seqpar/bench/gbench_harness.hpp"
#endif

namespace seqpar::bench {
namespace {

constexpr const char* kFooter = R"(
Exit status: 0 success; 1 the data check (-c 1) found wrong elements; 2 bad arguments, or no usable
CUDA device for a GPU run (the message says why); 3 a failure while running.

Full reshard examples:
  mpirun -np 8 seqpar-bench-reshard --comm nccl --seq-len 128K --heads 32 --kv-heads 8
  seqpar-bench-reshard --comm loopback --sp 8 --seq-len 128K      (rank 0's shapes on one GPU)
  mpirun -np 4 seqpar-bench-reshard --comm mpi --seq-len 4K --heads 8 --kv-heads 2 --head-dim 32)";

int run(int argc, char** argv, int world_rank, bool& started) {
  std::vector<std::string> own, gbench;
#ifdef SEQPAR_HAVE_CUDA
  SplitArgs split = split_benchmark_args(argc, argv);
  own = std::move(split.own);
  gbench = std::move(split.gbench);
  const std::string kernel_help = kernel_modes_help();
#else
  for (int i = 1; i < argc; ++i) own.emplace_back(argv[i]);
  const std::string kernel_help = "Rows of the kernel-only mode (CUDA builds only)";
#endif
  ReshardOptions o;
  CLI::App app{"seqpar-bench-reshard: the Ulysses reshard. Without --comm: the reshard kernels alone in GB/s "
               "beside cudaMemcpy device-to-device (CUDA-event timing, Google Benchmark driver; its "
               "--benchmark_* flags are passed through). With --comm: the whole reshard, pack + all-to-all + "
               "unpack for q,k,v and the output, forward and backward, fused kernels beside naive copies, "
               "timed per stage, with the data check.",
               "seqpar-bench-reshard"};
  app.footer(kFooter);
  app.add_option("--comm", o.comm,
                 "Time the whole reshard over this communicator: mpi (host memory, real ranks), nccl (one "
                 "rank per GPU), virtual (P ranks in one process), loopback (rank 0's shapes alone)");
  app.add_option("--device", o.device, "Full reshard: gpu or cpu memory (default: cpu for mpi, gpu otherwise)");
  app.add_option("--sp", o.sp,
                 "Ulysses degree P. Kernels: a comma-separated list (default 2,4,8); full reshard: one P "
                 "(default: the number of MPI ranks; required for virtual and loopback)");
  app.add_option("--seq-len", o.seq_len, "Full sequence length N (each rank holds N/P tokens)")->capture_default_str();
  app.add_option("--modes", o.modes, kernel_help)->capture_default_str();
  app.add_option("--dtype", o.dtype, "bf16, fp16 or fp32 (default bf16 on the GPU, fp32 on the host)");
  app.add_option("--batch", o.batch, "Batch size")->capture_default_str();
  app.add_option("--heads", o.heads, "Query heads")->capture_default_str();
  app.add_option("--kv-heads", o.kv_heads,
                 "KV heads: split over P when kv_heads % P == 0, replicated P/kv_heads times when P % kv_heads == 0")
      ->capture_default_str();
  app.add_option("--head-dim", o.head_dim, "Head dim")->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed iterations before timing")->capture_default_str();
  app.add_option("--iters", o.iters, "Timed repetitions (samples)")->capture_default_str();
  app.add_option("-c,--check", o.check, "Full reshard: compare every output with the CPU reference (0: no, 1: yes)")
      ->capture_default_str();
  app.add_flag("--inject-fault", o.inject_fault, "Full reshard: corrupt one input element on rank 0 before the check");
  app.add_option("-J,--json", o.json_path, "Write the measurement JSON to FILE");
  app.add_option("--comm-timeout", o.comm_timeout, std::string("Full reshard: ") + comm::kCommTimeoutHelp);
  std::reverse(own.begin(), own.end());  // CLI11 parses a reversed vector
  try {
    app.parse(own);
  } catch (const CLI::ParseError& e) {
    return usage_exit(app, e, world_rank != 0);
  }
  if (!o.comm.empty()) {
    if (app.count("--modes")) throw Error("--modes picks rows of the kernel-only mode: leave it out with --comm");
    if (!gbench.empty()) throw Error(fmt::format("{}: Google Benchmark flags apply without --comm", gbench.front()));
    return run_full_reshard(o, argc, argv, world_rank, started);
  }
  for (const char* full_only : {"--device", "--check", "--inject-fault"})
    if (app.count(full_only)) throw Error(fmt::format("{} applies to the full reshard: give --comm", full_only));
#ifdef SEQPAR_HAVE_CUDA
  return run_kernel_bench(o, gbench, argc, argv);
#else
  throw Error("the kernel-only mode needs a CUDA build of seqpar: give --comm mpi for the host reshard");
#endif
}

}  // namespace
}  // namespace seqpar::bench

int main(int argc, char** argv) {
  return seqpar::comm::bench::guarded_main(
      argc, argv, [&](int rank, bool& started) { return seqpar::bench::run(argc, argv, rank, started); });
}
