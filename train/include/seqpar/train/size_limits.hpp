// Limits on the sizes of one rank's training step, checked before anything is allocated: a huge
// --hidden, --vocab, --seq-len, --micro-batch, --ffn-hidden, --heads or --layers is a clear error
// naming the fields and the bound, never std::bad_alloc or a wrapped int.
#pragma once
#include <cstdint>
#include <limits>

#include "seqpar/train/trainer.hpp"

namespace seqpar::train {

// Token positions, per-rank token counts and feature widths are `int` in the ops interface
// (GEMM dimensions, one CUDA block per token), so each must fit in int.
inline constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();
// 1 TiB per rank: more than any single GPU (or a typical host) holds, so a step above it cannot
// run anywhere this program runs; below it, running out of memory is the allocator's clear error.
inline constexpr std::int64_t kMaxStepBytes = std::int64_t{1} << 40;

// What one rank of `s` holds at its peak, roughly (the counting allocator measures the truth):
// fp32 parameters, gradients and the two AdamW moments (16 bytes per parameter: embeddings,
// attention and MLP weights); the activations every layer saves for the backward (with full
// checkpointing: every layer's input and one rebuilt layer); the logits (one tile's with tiled
// loss); the backward's temporaries of one layer. Activations are counted at 4 bytes (fp32, the
// upper bound of both precisions). Checked arithmetic: a product that does not fit in 64
// bits is a seqpar::Error naming its fields.
struct StepFootprint {
  std::int64_t embedding_bytes = 0, attention_weight_bytes = 0, mlp_weight_bytes = 0;
  std::int64_t activations_bytes = 0, logits_bytes = 0, working_bytes = 0;
  std::int64_t parameters_bytes() const;  // the three weight parts (and the final norm's few bytes)
  std::int64_t total_bytes() const;
};
StepFootprint estimate_footprint(const TrainSetup& s);

// Throws seqpar::Error naming the fields when a count exceeds kMaxIndex or the footprint exceeds
// kMaxStepBytes. The Trainer calls it for every step it builds (sharded and reference alike).
void check_step_sizes(const TrainSetup& s);

}  // namespace seqpar::train
