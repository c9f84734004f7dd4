// The command line of seqpar-bench-reshard, shared by its two modes: the reshard kernels alone
// (no --comm; Google Benchmark rows in GB/s) and the full Ulysses reshard (--comm given).
#pragma once
#include <optional>
#include <string>

namespace seqpar::bench {

struct ReshardOptions {
  std::string comm;    // empty: kernels only; mpi, nccl, virtual, loopback: the full reshard
  std::string device;  // full reshard: gpu or cpu (empty: cpu for mpi, gpu otherwise)
  std::string sp;      // kernels: a list (default 2,4,8); full: one P (default: the MPI ranks)
  std::string seq_len = "64K";
  std::string modes = "pack,unpack,pack_reverse,unpack_reverse,pack_qkv,pack_qkv_reverse,memcpy";
  std::string dtype;  // empty: bf16 on the GPU, fp32 on the host
  int batch = 1, heads = 32, kv_heads = 8, head_dim = 128;
  int warmup = 3, iters = 10;
  int check = 1;  // full reshard: compare every output with the CPU reference
  bool inject_fault = false;
  std::string json_path;
  std::optional<double> comm_timeout;  // --comm-timeout (the communication watchdog)
};

}  // namespace seqpar::bench
