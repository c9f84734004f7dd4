// Upper bounds on every size seqpar accepts (README: "Input limits"), in core because the plan
// rules and every layer check them. Each is far beyond any real cluster or model, and low enough
// that the simulator's integer arithmetic (products of degrees, parameter counts, node counts) is
// exact: a larger value is a typo or a fuzzer, and gets an error naming the field and the bound
// instead of a wrapped number.
#pragma once
#include <cstdint>

namespace seqpar::limits {

// GPUs in one job, and so every degree (sp, Ulysses, Ring) and every group: 2^20. The largest
// training clusters have ~10^5 GPUs.
inline constexpr int kMaxGpus = 1 << 20;
// GPUs in one node (one NVLink/PCIe domain): 2^10; rack-scale NVLink domains have 72-576.
inline constexpr int kMaxGpusPerNode = 1 << 10;
// Tokens in one sequence: 2^40 (a trillion); the maxlen search stops there too.
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 40;
// Sequences per SP group per step: 2^16; long-sequence training uses 1 to a few.
inline constexpr int kMaxMicroBatch = 1 << 16;
// Micro-steps per optimizer step (gradient accumulation): 2^16; real runs use 1 to a few hundred.
inline constexpr int kMaxGradAccumSteps = 1 << 16;
// A fixed global batch (tokens or sequences per optimizer step): 2^44 tokens, 2^40 sequences.
// Real runs fix 1M to 16M tokens; the bound keeps the searches over its divisors short.
inline constexpr std::int64_t kMaxGlobalBatchTokens = std::int64_t{1} << 44;
inline constexpr std::int64_t kMaxGlobalBatchSequences = std::int64_t{1} << 40;

// Model shapes (presets and model JSON files, checked in presets.cpp). Real models: <= 128
// layers, hidden <= 2^15, <= 128 heads of <= 256, FFN <= 2^16, vocabularies <= 2^18.
inline constexpr int kMaxLayers = 1 << 14;
inline constexpr int kMaxHidden = 1 << 20;
inline constexpr int kMaxHeads = 1 << 16;      // query heads and KV heads
inline constexpr int kMaxHeadDim = 1 << 16;
inline constexpr int kMaxFfnHidden = 1 << 22;
inline constexpr int kMaxVocab = 1 << 24;

// Rows of an nccl-tests style size range (-b/-e/-f/-i) in seqpar comm and seqpar-bench-comm.
inline constexpr std::int64_t kMaxSizeRows = 1000;

}  // namespace seqpar::limits
