// The kernel-only mode of seqpar-bench-reshard (CUDA builds): every reshard kernel in GB/s beside
// cudaMemcpy device-to-device, on the Google Benchmark harness.
#pragma once
#include <string>
#include <vector>

#include "options.hpp"

namespace seqpar::bench {

// The --modes help text: one line per row.
std::string kernel_modes_help();
// Runs the rows; throws seqpar::Error for bad options or without a CUDA device.
int run_kernel_bench(const ReshardOptions& opt, const std::vector<std::string>& gbench_args, int argc,
                     char** argv);

}  // namespace seqpar::bench
