// Published measurements as data (sim/published/runs.json, compiled into the library) and the
// simulator's prediction of each: what `seqpar published` shows and tests/sim/test_published.cpp
// asserts. A run's measure says which of the simulator's figures it compares.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/doc_layout.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/plan.hpp"

namespace seqpar::sim {

// The relative error a run marked "in_band" may have. Narrow it as the model improves; a run that
// leaves it is a finding about the model, never a reason to widen it.
inline constexpr double kPublishedBand = 0.10;

enum class PublishedMeasure {
  step_time_s,                 // a whole training step, seconds
  attention_iterations_per_s,  // one attention layer forward+backward (communication included), per second
  megatron_tflops_per_gpu,     // Megatron-DeepSpeed's throughput_calculator TFLOP/s per GPU
  // Any throughput of a whole training step (TFLOP/s per GPU, tokens/s), compared as its ratio to
  // the run's baseline: same model, system, GPUs and tokens per optimizer step, so the ratio is
  // the baseline's step time over the run's whatever FLOP formula the source used.
  throughput_ratio,
  // Under a packed-document workload (`documents`): one transformer layer's forward + backward
  // (GEMMs, elementwise work, attention with its communication) under `baseline_balancer` over the
  // same under `balancer`: the speed-up of the run's context-parallel sharding.
  document_layer_speedup,
  // WLB-LLM's packing imbalance degree (arXiv:2503.17924, Sec. 7.4): the forward latency of the
  // largest micro-batch x the micro-batches per global batch over all of their forward latency, a
  // micro-batch being one packed sequence of the workload (`documents`, whose packing policy is the
  // one compared) and its latency one layer's forward under the plan's own layout; the mean over
  // the sampled global batches (`micro_batches` consecutive sequences each).
  packing_imbalance,
  // Training tokens per second per GPU of a whole step (the global batch's tokens over the step
  // time and the GPUs: NeMo's and Megatron-Bridge's tokens/s/GPU column).
  tokens_per_s_per_gpu,
  // NeMo's "Model TFLOP/s/GPU": tokens/s/GPU x nemo_flops_per_token (below).
  nemo_model_tflops_per_gpu,
  // The model FLOPs of a step per GPU per second (Result::tflops_per_gpu: every layer's and the LM
  // head's GEMMs x 3, causal attention at half the square, no recomputation): a paper's "TFLOPs per
  // GPU" where it reports MFU (Llama 3, arXiv 2407.21783 Table 4).
  model_tflops_per_gpu,
  // A whole step's time over the baseline's (which may name its own model: TRL's step times of
  // several models at one length), at the same GPUs, sequence length and sequences per step.
  step_time_ratio,
};
std::string_view to_string(PublishedMeasure m);

// The plan a throughput_ratio run is compared against, with its own published figure.
struct PublishedBaseline {
  std::string label;
  Plan plan;
  double published = 0;
  nlohmann::json model;  // step_time_ratio: the baseline's model (a preset name or object); null: the run's
};

struct PublishedRun {
  std::string id, source, configuration;
  nlohmann::json model;   // a model preset name or an inline model object
  std::string system;     // a system preset name
  // A JSON merge patch (RFC 7386) applied to the system preset's document: the run's hardware
  // where the source describes it otherwise, each changed figure with its source. Null: none.
  nlohmann::json system_patch;
  std::string attention_kernel;  // the kernel the run used (attention_kernels.hpp); empty: the preset's default
  std::string framework;         // the framework profile the run used (framework.hpp); empty: the default
  Plan plan;
  PublishedMeasure measure = PublishedMeasure::step_time_s;
  // attention_iterations_per_s only: the published figure is one GPU's rate divided by `share`
  // (ring-flash-attention's 'theoretic flash_attn' column: the ring does `share` times the work).
  int share = 1;
  double published = 0;
  std::optional<PublishedBaseline> baseline;  // throughput_ratio and step_time_ratio only (required there)
  // document_layer_speedup and packing_imbalance: the workload (core/workload.hpp's make_workload
  // arguments); document_layer_speedup: the two load balancers compared; packing_imbalance: the
  // micro-batches of one global batch.
  std::string documents, packing = "fill";
  std::uint64_t doc_seed = 1;
  int doc_batches = 16;
  Balancer balancer = Balancer::zigzag, baseline_balancer = Balancer::zigzag;
  int micro_batches = 0;
  // The relative error "in_band" allows: kPublishedBand, or the band the check itself was stated
  // with ("band" in the run, with its source in "band_source": issue 37's 15% for prime-rl's ratios,
  // 5% for TRL's).
  double band = kPublishedBand;
  std::string band_source;
  bool expect_in_band = true;  // status "in_band"; false for "open_finding"
  std::string finding;         // why an open finding misses (required for one)
};

// The built-in runs (sim/published/runs.json), or a file of the same schema. Malformed input
// throws seqpar::Error naming the run and the field.
std::vector<PublishedRun> builtin_published_runs();
std::vector<PublishedRun> published_runs_from_json(const nlohmann::json& j, std::string_view what);

struct PublishedComparison {
  PublishedRun run;
  double published = 0;  // the figure compared: run.published, or for throughput_ratio its ratio to the baseline's
  double predicted = 0;
  double error = 0;  // (predicted - published) / published
  bool in_band = false;
  // Step-based measures: whether the simulator's memory model fits the plan on the GPU (a run that
  // ran but does not fit is a memory finding; the DeepSpeed-Ulysses runs' best-plan test needs it).
  bool fits = true;
  std::vector<std::string> errors;  // the simulator rejected the plan (then no prediction)
};

PublishedComparison compare_published(const PublishedRun& run);

// The run's system: its preset with the run's attention kernel, system_patch and framework.
System published_system(const PublishedRun& run);

// Megatron-DeepSpeed's FLOPs per sequence (megatron/utils.py throughput_calculator): GEMMs of a
// dense GPT with non-causal attention, x4 with activation checkpointing (the recompute counted),
// x3 without: 24 * f * s * L * h^2 * (1 + s / (6h) + V / (16 L h)). With f = 4 it is Narayanan
// et al.'s (arXiv:2104.04473, Sec. 5.1) 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per B sequences.
// NeMo's model FLOPs per token of a dense Llama-shaped model, as its performance summaries count
// them: 6 x the parameters without the token embedding (the LM head counted) + 12 x s x hidden x
// layers (attention as if unmasked). Not printed by NeMo: inferred from its 24.07 summary's own
// columns (Llama2-7B 16,934 tokens/s = 780 TFLOP/s; Llama3-8B at 8K 12,273 = 711), which it
// reproduces within 0.2%; with the causal half it would miss them by 7% and 11%.
double nemo_flops_per_token(const Model& m, double seq_len);

double megatron_flops_per_sequence(int layers, int hidden, int vocab, double seq_len, bool checkpointing);

}  // namespace seqpar::sim
