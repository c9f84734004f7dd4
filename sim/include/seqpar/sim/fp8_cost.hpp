// FP8's cost table (core/precision.hpp): what a plan's FP8 parts change in a step's time. The
// linear layers' GEMMs run at the GPU's FP8 rate; every FP8 GEMM operand is cast (and, where the
// GEMM needs it, transposed) first, memory-bound work whose bytes the scaling recipe sets; the
// parameters' all-gather moves 1 byte per parameter where its part is FP8. The memory terms are
// memory_cost's (FP8 weight copies, scales, FP8-saved GEMM inputs), the attention's FP8 rate
// compute_cost's (AttentionKernel::fp8). One place for the arithmetic: simulate and the reports call it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqpar/core/plan.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

// HBM bytes one element's cast moves under a recipe, reading bf16 and writing FP8 with what the
// FP8 GEMMs need beside it (a transposed or column-wise copy, scales).
double fp8_cast_bytes_per_element(Fp8Recipe r);

// The GEMM time of a layer's linear layers: FP8's rate and curve when the plan runs them in FP8,
// else bf16's (framework_gemm_time).
double linear_gemm_time(const System& s, const Plan& p, double flops, double tokens, int launches);

// The casts of one layer's FP8 GEMM operands per micro-step over a rank's `tokens` (0 without
// FP8 GEMMs): forward, the four linear modules' inputs; backward, their output gradients.
struct Fp8CastBytes {
  double fwd = 0, bwd = 0;
};
Fp8CastBytes fp8_activation_cast_bytes(const Model& m, const Plan& p, double tokens);
// Once per optimizer step: every linear weight cast to FP8 with its transpose (0 without FP8 GEMMs,
// or with FP8 parameters, which the framework already keeps in FP8).
double fp8_weight_cast_bytes(const Model& m, const Plan& p);

// Bytes per parameter of the parameters' all-gather: 1 where Fp8Part::weights, else bf16's 2.
double parameter_gather_bytes_per_param(const Plan& p);
// The share of a bf16 activation collective's bytes that moves in the forward under
// Fp8Part::comm: 0.5 (FP8 values); the backward's gradients stay bf16.
double forward_activation_bytes_scale(const Plan& p);

// What a plan runs in FP8 on this system, for the outputs: the parts and recipe, the GEMMs' and
// the attention's rates in each direction (FP8 or bf16, and why), and the bytes per value each
// collective moves, with the framework's words for it. {"parts": "none"} for a bf16 plan.
nlohmann::json fp8_json(const System& s, const Plan& p);
// The same as lines for the human output; empty for a bf16 plan.
std::vector<std::string> fp8_lines(const System& s, const Plan& p);

}  // namespace seqpar::sim
