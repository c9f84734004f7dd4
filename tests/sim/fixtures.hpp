// Synthetic hardware and a tiny model with round numbers, so tests can compute by hand.
#pragma once
#include <string>
#include <string_view>

#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/core/plan.hpp"

namespace seqpar::sim::testing {

// GPU: 100 TFLOP/s, 50% GEMM efficiency halving at 100 tokens, 1 TB/s HBM, 10 GB/s PCIe, no overheads.
Gpu round_gpu();
// 4 GPUs per node; intra 100 GB/s, 10 us; inter 10 GB/s, 20 us.
System round_system();
// PCIe node: 4 GPUs, 2 per socket, 20 GB/s per GPU, 5 GB/s between sockets, 10 us.
System round_pcie_system();
// L=2, hidden 8, 2 heads of 4, 2 KV heads, SwiGLU 16, vocab 32.
Model tiny_model();

// A plan of these degrees (tp: tensor parallelism), memory options at their defaults.
Plan plan(Method m, int gpus, std::int64_t seq, int sp, int u, int r, int tp = 1);

// A plan of `sp` GPUs, all of them one SP group of method m: Ulysses degree sp for ulysses, 2 (and
// rings of sp / 2) for hybrid, rings of sp for the others. For the attention kinds' method rules.
Plan plan_all_sp(Method m, int sp, std::int64_t seq);

// System preset `name` with its GPU's attention kernel set to `kernel` (the kinds' rules depend on it).
System with_kernel(std::string_view name, std::string_view kernel);

// Writes `text` as <tmp>/<suite>/<folder>/config.json (a Hugging Face config as downloaded: the
// folder names the model) and returns its path.
std::string write_config(const std::string& suite, const std::string& folder, const std::string& text);

// Property tests over large samples take every k-th case, k = $SEQPAR_TEST_SAMPLE (default 1: all).
// scripts/test.sh sets it for the sanitizer pass, where each case runs ten times slower and the
// Release pass has already checked them all.
int sample_stride();

}  // namespace seqpar::sim::testing
