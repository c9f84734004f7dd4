// Which preset kind a document is, from its keys: each kind's known top-level fields are listed here
// once, for the unknown-field check and for naming a document given to the wrong flag.
#include "preset_fields.hpp"

#include <fmt/format.h>

#include <array>
#include <span>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/hf_config.hpp"

namespace seqpar::sim {

namespace {

// The GPU preset's fields. A misspelt key would silently keep a default (no FP8, a workspace of 1).
// The attention_kernel(s), curves and exponents are what `seqpar calibrate` writes (calibrate.cpp).
constexpr std::string_view kGpuFields[] = {
    "name", "description", "compute_capability", "memory_gib", "bf16_tflops", "hbm_gbps", "pcie_gbps",
    "gemm_efficiency", "gemm_half_tokens", "gemm_exponent", "attention_fwd_efficiency",
    "attention_bwd_efficiency", "attention_half_tokens", "kernel_overhead_us", "reserved_gib",
    "attention_bwd_expands_kv_grads", "attention_bwd_workspace_per_head_dim",
    "attention_bwd_workspace_per_row", "attention_fwd_workspace_per_head_dim",
    "attention_score_bound_head_dim", "attention_curves", "varlen_attention", "attention_kernel",
    "attention_kernels", "fp8_tflops", "fp4_tflops", "fp8_gemm_efficiency", "fp8_gemm_half_tokens",
    "fp8_gemm_exponent", "fp8_attention_fwd_efficiency", "fp8_attention_bwd_efficiency"};
// "framework" and "calibration" are what `seqpar calibrate` writes into a profile (calibrate.cpp).
constexpr std::string_view kSystemFields[] = {
    "name", "description", "gpu", "gpus_per_node", "intra_node", "inter_node", "host_adam_gparams_per_s",
    "host_memory_gib", "framework", "calibration"};
// "params" and "sources" are what to_json(Model) adds (result_json.cpp), so a result's model reads
// back. "params" is derived and recomputed from the shape: a step's own count (a Python script's,
// or one written before a layers/vocab override in step_input.cpp) may differ and is not an input.
constexpr std::string_view kModelFields[] = {
    "name", "description", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab",
    "mlp", "positions", "norm", "causal", "tied_embeddings", "params", "active_params", "sources",
    "sliding_window", "sliding_window_pattern", "layer_types", "experts", "experts_per_token",
    "expert_ffn_hidden", "shared_experts", "shared_expert_ffn_hidden", "dense_layers", "expert_imbalance",
    "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "attention_sinks",
    "full_attention_interval", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
    "linear_value_head_dim", "linear_conv_kernel_dim"};
constexpr std::string_view kFrameworkFields[] = {
    "name", "description", "source", "attention_kernel", "states", "gradients", "checkpoint_bytes",
    "layer", "backward", "loss", "every_phase", "attention", "offload", "zero3_gathered_layers",
    "allocator", "time", "runs", "index_limits", "mlp", "tensor_parallel", "fp8"};

struct Kind {
  std::string_view kind;
  std::string_view title;  // "a model preset"
  std::string_view where;  // where a document of this kind is given
  std::span<const std::string_view> fields;
};
constexpr std::array<Kind, 4> kKinds{{
    {"gpu", "a GPU preset", "as a system's \"gpu\" (a path or a name)", kGpuFields},
    {"system", "a system preset", "to --system", kSystemFields},
    {"model", "a model preset", "to --model", kModelFields},
    {"framework", "a framework profile", "to --framework", kFrameworkFields},
}};

const Kind& kind_named(std::string_view kind) {
  for (const Kind& k : kKinds)
    if (k.kind == kind) return k;
  throw Error(fmt::format("internal: no preset kind '{}'", kind));
}

// How many of the document's keys `k` knows, "name" and "description" (every kind's) left out.
int known_keys(const nlohmann::json& j, const Kind& k) {
  int n = 0;
  for (const auto& [key, value] : j.items()) {
    if (key == "name" || key == "description") continue;
    for (std::string_view f : k.fields)
      if (key == f) {
        ++n;
        break;
      }
  }
  return n;
}

}  // namespace

void refuse_other_preset_kind(const nlohmann::json& j, std::string_view kind, std::string_view what) {
  if (!j.is_object()) return;
  const Kind& expected = kind_named(kind);
  if (kind != "model" && is_hf_config(j))
    throw Error(fmt::format("{} is a Hugging Face model config, not {}: give it to --model", what, expected.title));
  // What seqpar itself writes (a measurement, a prediction, a sweep, a measured step) carries its
  // plan or results; no preset has either.
  for (const char* key : {"results", "plan", "kind", "step_time_s"})
    if (j.contains(key))
      throw Error(fmt::format("{} is a seqpar document (it has '{}'), not {}: give it to seqpar report or calibrate",
                              what, key, expected.title));
  // The kind whose fields hold most of the document's keys, when that is not the kind expected (no
  // kind holds most, or two as many: the unknown-field check then names the foreign key).
  int keys = 0;
  for (const auto& [key, value] : j.items()) keys += key != "name" && key != "description";
  const Kind* best = &expected;
  int best_n = known_keys(j, expected);
  bool tie = false;
  for (const Kind& k : kKinds) {
    if (&k == &expected) continue;
    const int n = known_keys(j, k);
    if (n > best_n) best = &k, best_n = n, tie = false;
    else if (n == best_n && best != &expected) tie = true;
  }
  if (best != &expected && !tie && 2 * best_n > keys)
    throw Error(fmt::format("{} is {}, not {}: give it {}", what, best->title, expected.title, best->where));
}

void check_preset_fields(const nlohmann::json& j, std::string_view kind, std::string_view what) {
  refuse_other_preset_kind(j, kind, what);
  if (j.is_object()) check_fields(j, kind_named(kind).fields, what);
}

}  // namespace seqpar::sim
