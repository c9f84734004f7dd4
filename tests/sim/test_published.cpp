// The memory model against published maximum sequence lengths: Bekman et al., "Arctic Long
// Sequence Training" (arXiv:2506.13996, 2025) trained Llama-3-8B with Ulysses SP, ZeRO-3,
// offloaded checkpoints and optimizer, tiled MLP and tiled loss on H100 80 GB: 500K tokens on
// 1 GPU, 3.7M on one 8-GPU node, 15M on 4 nodes. The band is wide on purpose: it catches a
// memory term that is off by a factor, not the last 10%.
#include <gtest/gtest.h>

#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::sim {
namespace {

TEST(Published, AlstMaximumSequenceLengthsOnH100) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  for (auto [gpus, published] : {std::pair{1, 500e3}, {8, 3.7e6}, {32, 15e6}}) {
    Plan p;
    p.method = Method::ulysses;
    p.gpus = p.sp = p.ulysses_degree = gpus;
    p.mem = {3, Checkpoint::full, true, true, true, true};
    const double predicted = double(max_seq_len(m, s, p));
    EXPECT_NEAR(predicted / published, 1.0, 0.25) << gpus << " GPUs: predicted " << predicted << " tokens, published " << published;
  }
}

}  // namespace
}  // namespace seqpar::sim
