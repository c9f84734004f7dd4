// The rules a plan must obey against a model (docs/ARCHITECTURE.md, Conventions): the model-free rules of
// core (seqpar/core/plan_validity.hpp: sizes, degrees, sequence divisibility, and the head rules
// over plain counts) applied to this model's heads. Memory fit is not a validity rule: an
// over-full plan is valid and reported as not fitting.
#pragma once
#include <string>
#include <vector>

#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/plan.hpp"

namespace seqpar::sim {

// Appends one message per broken rule to `errors`, each naming the field and the rule.
// Returns true when the plan is valid. Cheap when the plan is valid (no allocation).
bool check_plan(const Model& m, const System& s, const Plan& p, std::vector<std::string>& errors);

// Sliding-window layers under plan p: the broken rule's message when a sliding layer's band meets
// the sequence (Model::banded_at) and no implementation serves p's method with one (window_cost.hpp's
// window_refusal), else empty. check_plan applies it; seqpar-train refuses its plans with it.
std::string window_method_error(const Model& m, const Plan& p);

// Latent attention under plan p: the broken rule's message when the model has latent attention,
// the plan has context parallelism (sp > 1) and no implementation serves p's method with it on the
// system's attention kernel (latent_attention.hpp's latent_refusal), else empty. check_plan applies it.
std::string latent_method_error(const Model& m, const System& s, const Plan& p);

// Attention sinks under plan p: the broken rule's message when the model has sinks, the plan has
// context parallelism (sp > 1) and no implementation serves p's method with them on the system's
// attention kernel (attention_sinks.hpp's sinks_refusal), else empty. check_plan applies it.
std::string sinks_method_error(const Model& m, const System& s, const Plan& p);

// Linear-attention layers under plan p: the broken rules' message when the model has linear layers
// and the plan has context parallelism (sp > 1): a method no implementation serves them with
// (linear_attention.hpp's linear_refusal), or key or value heads that the tp x Ulysses ranks do not
// divide (Megatron-LM's gated DeltaNet splits both head counts over its TP and CP ranks); also
// under tp alone. Empty when none is broken. check_plan applies it.
std::string linear_method_error(const Model& m, const Plan& p);

// The system's framework profile must describe the model's block (Framework::mlp_kinds): the
// broken rule's message, or empty. check_plan applies it; the CLI refuses the pair up front with it.
std::string profile_mismatch(const Model& m, const System& s);

// Whether the framework runs these memory options (Framework::zero_stages, runs_offload_optimizer,
// runs_offload_params, runs_offload_checkpoints, runs_tiled_mlp, runs_tiled_loss): check_plan names
// each breach; a search skips the sets it would refuse.
bool framework_runs(const Framework& f, const MemoryOptions& m);

}  // namespace seqpar::sim
