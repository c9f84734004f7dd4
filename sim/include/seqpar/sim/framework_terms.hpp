// The framework-level terms of a system profile (hardware.hpp: FrameworkTerms), as the preset
// loader reads them, `seqpar calibrate` writes them and the cost models apply them. JSON: an
// optional "framework" object of a system preset, each field a number or {"value", "source"}:
//   "framework": {"profile": "hf-transformers", "memory_bound_efficiency": 0.62,
//                 "step_overhead_s": 0.031, "reserve_bytes": 2.1e9, "bytes_per_token": 0, "source": "..."}
// "profile" is the framework profile (framework.hpp) the terms were fitted over: its document, whole
// (as `seqpar calibrate` writes it, so a custom framework file needs not be at hand), or a preset
// name or path; the simulator uses it for this system unless --framework names another. A missing figure keeps its default
// (efficiency 1, the others 0), which leaves predictions as the inventory gives them. Memory terms
// are never negative.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/hardware.hpp"

namespace seqpar::sim {

// Reads the optional "framework" object of a system document into `s.framework`; seqpar::Error
// naming `what`, the field and its bounds for a malformed one.
void read_framework_terms(const nlohmann::json& system, std::string_view what, System& s);

// `profile`: the framework the terms were fitted over, whole (its document) or by name.
nlohmann::json framework_terms_json(const FrameworkTerms& f, const nlohmann::json& profile, const std::string& source);

// Time of memory-bound work (elementwise, optimizer) of `bytes` at the framework's efficiency.
double framework_memory_bound_time(const System& s, double bytes);
// GEMM and attention kernel time inside the framework's steps: compute_cost.hpp's at the share of
// the GPU figures' rate the framework's steps reach (gemm_step_efficiency, attention_step_efficiency).
double framework_gemm_time(const System& s, double flops, double tokens, int launches);
double framework_attention_time(const System& s, double flops, double block_tokens, bool backward,
                                const AttentionKernel& kernel);

// Memory the framework keeps beyond the modelled parts on a rank holding `local_tokens` tokens.
double framework_reserved_bytes(const FrameworkTerms& f, double local_tokens);

}  // namespace seqpar::sim
