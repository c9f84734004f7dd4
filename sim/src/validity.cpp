#include "seqpar/sim/validity.hpp"

#include "seqpar/sim/pipeline_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/limits.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/pipeline_cost.hpp"
#include "seqpar/sim/moe_cost.hpp"
#include "seqpar/sim/latent_attention.hpp"
#include "seqpar/sim/linear_attention.hpp"
#include "seqpar/sim/attention_sinks.hpp"
#include "seqpar/sim/window_cost.hpp"

namespace seqpar::sim {

// A profile derived from one framework's SwiGLU module (its saved tensors counted under PyTorch)
// says nothing of what that framework's GELU module saves: refuse rather than guess a fit.
std::string profile_mismatch(const Model& m, const System& s) {
  const auto& kinds = s.profile.mlp_kinds;
  if (kinds.empty() || std::find(kinds.begin(), kinds.end(), m.mlp) != kinds.end()) return {};
  return fmt::format("mlp: model '{}' has a {} MLP, but framework profile '{}' counts the saved tensors of a {} MLP "
                     "only; choose a profile that covers it (--framework seqpar-train or megatron-core count either "
                     "through the fc1 width) or write one",
                     m.name, to_string(m.mlp), s.profile.name, to_string(kinds));
}

// The framework's kernels index some tensors in 32 bits (Framework::index_limits): a plan whose
// tensor is larger cannot run, which ends maxlen before memory does (ALST's 3.7M on 8 H100s).
void check_index_limits(const Model& m, const System& s, const Plan& p, std::vector<std::string>& errors) {
  if (s.profile.index_limits.empty() || p.sp < 1 || p.tp < 1 || p.ring_degree < 1 || p.ulysses_degree < 1) return;
  const AttentionShapes a = attention_shapes(m, p);
  for (const IndexLimit& l : s.profile.index_limits) {
    const double elements = l.tensor == IndexedTensor::hidden
                                ? a.batch * a.local_tokens * double(m.hidden) / p.tp
                                : a.batch * a.attn_tokens * a.heads_local * m.head_dim;
    if (elements > l.max_elements)
      errors.push_back(fmt::format(
          "seq_len: {} tokens make the {} tensor {:.0f} elements on a rank ({}), above the {:.0f} that {} indexes "
          "in 32 bits (framework '{}'); use more sequence parallelism or a shorter sequence",
          p.seq_len, to_string(l.tensor), elements,
          l.tensor == IndexedTensor::hidden ? "micro-batch x local tokens x hidden / tp"
                                            : "micro-batch x attention tokens x local heads x head_dim",
          l.max_elements, l.kernel, s.profile.name));
  }
}

// The memory options the framework runs (Framework::zero_stages, runs_offload_*): a plan asking
// for another is not a plan of this framework.
namespace {
bool runs_zero(const Framework& f, int zero) {
  return std::find(f.zero_stages.begin(), f.zero_stages.end(), zero) != f.zero_stages.end();
}
}  // namespace

bool framework_runs(const Framework& f, const MemoryOptions& m) {
  return runs_zero(f, m.zero) && (!m.offload_optimizer || f.runs_offload_optimizer) &&
         (!m.offload_params || f.runs_offload_params) && (m.checkpoint != Checkpoint::full || !m.offload_checkpoints || f.runs_offload_checkpoints) &&
         (!m.tiled_mlp || f.runs_tiled_mlp) && (!m.tiled_loss || f.runs_tiled_loss);
}

// FP8 (core/precision.hpp): the GPU needs FP8 tensor cores (MXFP8: Blackwell's block-scaled ones),
// and the framework must run each FP8 part and the recipe (its profile's "fp8").
void check_fp8(const System& s, const Plan& p, std::vector<std::string>& errors) {
  if (!p.precision.any_fp8()) return;
  const Framework& f = s.profile;
  const Gpu& g = s.gpu;
  const std::string parts = fp8_parts_text(p.precision);
  if (g.fp8_flops <= 0)
    errors.push_back(fmt::format("fp8: GPU '{}' has no FP8 figures (no FP8 tensor cores, or its preset gives no "
                                 "'fp8_tflops'); --fp8 {} cannot run on it", g.name, parts));
  if (p.precision.recipe == Fp8Recipe::mxfp8 && g.compute_major() < 10)
    errors.push_back(fmt::format("fp8_recipe: mxfp8 needs Blackwell's block-scaled tensor cores (compute capability 10 "
                                 "and up); GPU '{}' is {}", g.name,
                                 g.compute_capability.empty() ? "of unknown compute capability" : g.compute_capability));
  if (f.fp8_parts == 0) {
    errors.push_back(fmt::format("fp8: framework '{}' trains in bf16 only (its profile has no 'fp8'); FP8 runs under "
                                 "megatron-core (Transformer Engine) among the built-in profiles", f.name));
    return;
  }
  for (Fp8Part part : kAllFp8Parts)
    if (p.precision.has(part) && !(f.fp8_parts & static_cast<std::uint8_t>(part)))
      errors.push_back(fmt::format("fp8: framework '{}' does not run {} in FP8 (it runs {})", f.name, to_string(part),
                                   fp8_parts_text(Precision{f.fp8_parts, {}})));
  if (!f.runs_fp8(p.precision.recipe))
    errors.push_back(fmt::format("fp8_recipe: framework '{}' has no '{}' recipe", f.name, to_string(p.precision.recipe)));
  if (p.precision.has(Fp8Part::attention) && g.fp8_attention_fwd_efficiency <= 0)
    errors.push_back(fmt::format("fp8: attention kernel '{}' on GPU '{}' has no FP8 figures (--attention-kernel: one "
                                 "with 'fp8_attention_fwd_efficiency')", g.attention_kernel, g.name));
}

void check_framework_runs(const System& s, const Plan& p, std::vector<std::string>& errors) {
  const Framework& f = s.profile;
  if (!runs_zero(f, p.mem.zero)) {
    std::string stages;
    for (int z : f.zero_stages) stages += (stages.empty() ? "" : ", ") + std::to_string(z);
    errors.push_back(fmt::format("zero: framework '{}' runs ZeRO stage {} only, not {} (`seqpar presets --kind "
                                 "framework --json`: its 'runs')", f.name, stages, p.mem.zero));
  }
  if (p.mem.offload_optimizer && !f.runs_offload_optimizer)
    errors.push_back(fmt::format("offload_optimizer: framework '{}' keeps the optimizer on the GPU", f.name));
  if (p.tp > 1 && !f.runs_tensor_parallel)
    errors.push_back(fmt::format("tp: framework '{}' has no tensor parallelism (tp {})", f.name, p.tp));
  if (p.pp > 1 && !f.runs_pipeline_parallel)
    errors.push_back(fmt::format("pp: framework '{}' has no pipeline parallelism (pp {}){}", f.name, p.pp,
                                 f.runs_source.empty() ? std::string() : fmt::format(" ({})", f.runs_source)));
  if (p.mem.offload_params && !f.runs_offload_params)
    errors.push_back(fmt::format("offload_params: framework '{}' keeps the parameters on the GPU", f.name));
  if (p.mem.checkpoint == Checkpoint::full && p.mem.offload_checkpoints && !f.runs_offload_checkpoints)
    errors.push_back(fmt::format("offload_checkpoints: framework '{}' keeps its checkpoints on the GPU", f.name));
  if (p.sp > 1 && !f.runs_method(p.method)) {
    std::string methods;
    for (Method m : f.runs_methods) methods += fmt::format("{}{}", methods.empty() ? "" : ", ", to_string(m));
    errors.push_back(fmt::format("method: framework '{}' runs its sequence parallelism as {} only, not {} (--method {}; "
                                 "`seqpar presets --kind framework --json`: its 'runs')",
                                 f.name, methods, to_string(p.method), to_string(f.runs_methods.front())));
  }
  if (p.mem.tiled_mlp && !f.runs_tiled_mlp)
    errors.push_back(fmt::format("tiled_mlp: framework '{}' has no tiled MLP", f.name));
  if (p.mem.tiled_loss && !f.runs_tiled_loss)
    errors.push_back(fmt::format("tiled_loss: framework '{}' has no tiled loss{}", f.name,
                                 f.loss_chunks > 1 ? fmt::format(" (it runs its loss in {} chunks)", f.loss_chunks)
                                                   : std::string()));
  check_fp8(s, p, errors);
}

std::string window_method_error(const Model& m, const Plan& p) {
  if (!m.banded_at(p.seq_len)) return {};
  std::string why = window_refusal(p.method);
  if (why.empty()) return why;
  return fmt::format("method: model '{}' has {} sliding-window layers (window {} < seq_len {}); {}", m.name,
                     m.sliding_layers(), m.sliding_window, p.seq_len, why);
}

namespace {
// An attention kind's method rule under context parallelism (sp 1 has none, whatever the method's
// name): the kind's refusal for the plan's method and the system's kernel, after what the model has.
template <class Refusal, class What>
std::string kind_method_error(bool has_kind, const System& s, const Plan& p, Refusal refusal, What what) {
  if (!has_kind || p.sp == 1) return {};
  std::string why = refusal(p.method, s.gpu.attention_kernel);
  return why.empty() ? why : fmt::format("method: {}; {}", what(), why);
}
}  // namespace

std::string latent_method_error(const Model& m, const System& s, const Plan& p) {
  return kind_method_error(m.mla(), s, p, latent_refusal, [&] {
    return fmt::format("model '{}' has latent attention (kv_lora_rank {}, keys {} and values {} wide)", m.name,
                       m.latent.kv_rank, m.head_dim, m.v_dim());
  });
}

std::string sinks_method_error(const Model& m, const System& s, const Plan& p) {
  return kind_method_error(m.attention_sinks, s, p, sinks_refusal, [&] {
    return fmt::format("model '{}' has attention sinks (one learned logit per head in every layer's softmax)", m.name);
  });
}

std::string linear_method_error(const Model& m, const Plan& p) {
  if (m.linear_layers() == 0) return {};
  const LinearAttention& l = m.linear;
  const std::string what = fmt::format("model '{}' has {} linear-attention layers ({} key and {} value heads)", m.name,
                                       m.linear_layers(), l.key_heads, l.value_heads);
  if (p.sp > 1)
    if (std::string why = linear_refusal(p.method); !why.empty()) return fmt::format("method: {}; {}", what, why);
  // The heads are split over TP, and under Ulysses over its ranks too (the all-to-all makes them head-parallel).
  const int u = p.sp > 1 ? p.ulysses_degree : 1, split = p.tp * u;
  if (split > 1 && (l.key_heads % split != 0 || l.value_heads % split != 0))
    return fmt::format("{}: {}; tp {} x Ulysses degree {} = {} must divide both (the gated DeltaNet's heads are split "
                       "over the TP ranks and, by the all-to-all, over the Ulysses ranks: Megatron-LM PRs 2614/2642)",
                       u > 1 ? "ulysses_degree" : "tp", what, p.tp, u, split);
  return {};
}

bool check_plan(const Model& m, const System& s, const Plan& p, std::vector<std::string>& errors) {
  const std::size_t before = errors.size();
  const bool structure_ok = check_plan_structure(p, errors);
  // U out of range: the structure rules named it; the head rules would only add noise.
  if (!structure_ok && (range_error("", p.ulysses_degree, 1, limits::kMaxGpus) || range_error("", p.tp, 1, limits::kMaxGpus)))
    return false;
  check_heads(m.heads, m.kv_heads, p.tp, p.ulysses_degree, errors);
  // TP splits the MLP's columns (and the QKV and output projections' heads, checked above).
  if (p.tp > 1 && m.ffn_hidden % p.tp != 0)
    errors.push_back(fmt::format("ffn_hidden: {} is not divisible by the tensor-parallel degree {} (TP splits the MLP's "
                                 "columns over its ranks)", m.ffn_hidden, p.tp));
  // Megatron-LM's rule (transformer_config.py / the interleaved schedule's model chunks): every
  // stage, and every virtual stage of one, runs the same whole number of layers, or, counting the
  // embedding and the loss as a layer each, the ends one fewer (pipeline_cost.hpp: StageSplit).
  if ((p.pp > 1 || p.vp > 1) && stage_split(m, p) == StageSplit::none)
    errors.push_back(fmt::format("layers: {} layers are not divisible by pp {} x vp {}, nor are {} layers with the "
                                 "embedding and the loss counted as one each (each pipeline stage{} runs the same whole "
                                 "number of layers, the first and last one fewer in the second case: Megatron-LM's "
                                 "rule, with account_for_embedding/loss_in_pipeline_split)",
                                 m.layers, p.pp, p.vp, m.layers + 2, p.vp > 1 ? "'s every virtual stage" : ""));
  if (std::string why = profile_mismatch(m, s); !why.empty()) errors.push_back(std::move(why));
  // Expert parallelism needs experts to split (moe_cost.hpp); TP splits each expert's columns
  // (Megatron-Core's expert tensor parallelism defaults to the TP size).
  if (std::string why = expert_parallel_refusal(m, p); !why.empty()) errors.push_back(std::move(why));
  // Stages of a mixture of experts (which layers are MoE, whose experts a stage holds, EP within a
  // stage) are not modelled yet: refused rather than costed as dense stages.
  if (m.moe() && p.pp > 1)
    errors.push_back(fmt::format("pp: pipeline stages of a mixture-of-experts model ('{}') are not modelled yet; give "
                                 "--pp 1", m.name));
  if (m.moe() && p.tp > 1 && m.experts.ffn % p.tp != 0)
    errors.push_back(fmt::format("expert_ffn_hidden: {} is not divisible by the tensor-parallel degree {} (TP splits "
                                 "each expert's columns over its ranks)", m.experts.ffn, p.tp));
  // Sliding-window layers run under the methods an implementation serves them with (window_cost.hpp).
  // (banded_at first: the common unbanded plan pays no call, as before the rule had a function.)
  if (m.banded_at(p.seq_len))
    if (std::string why = window_method_error(m, p); !why.empty()) errors.push_back(std::move(why));
  // Latent attention runs under the methods an implementation serves it with (latent_attention.hpp).
  if (m.mla()) {
    if (std::string why = latent_method_error(m, s, p); !why.empty()) errors.push_back(std::move(why));
    // How TP shares the latent projections (which ranks run the down-projections W_dq and W_dkv,
    // whose outputs every head needs) is not modelled: refused rather than costed as split.
    if (p.tp > 1)
      errors.push_back(fmt::format("tp: tensor parallelism of latent attention ('{}') is not modelled yet (its "
                                   "down-projections feed every head); give --tp 1", m.name));
  }
  // Linear-attention layers run under the methods an implementation serves them with, over heads the
  // ranks divide (linear_attention.hpp).
  if (m.linear_layers() > 0)
    if (std::string why = linear_method_error(m, p); !why.empty()) errors.push_back(std::move(why));
  // Attention sinks run under the methods an implementation serves them with (attention_sinks.hpp).
  if (std::string why = sinks_method_error(m, s, p); !why.empty()) errors.push_back(std::move(why));
  check_framework_runs(s, p, errors);
  if (errors.size() == before) check_index_limits(m, s, p, errors);
  return errors.size() == before;
}

}  // namespace seqpar::sim
