// Memory-bound time of one layer's elementwise work on one rank: the model's norms, residual adds,
// positions and activation (compute_cost.hpp: layer_elementwise_bytes_per_token; the backward
// moves about twice the forward's bytes), and the framework profile's own kernels
// (framework.hpp: ElementwiseTerm), at the framework's memory-bound efficiency. Under tensor
// parallelism a rank runs 1/tp of the heads' and MLP columns' share, and of the norm regions' with
// sequence parallelism; without it, the norm regions whole (Framework::tp_sequence_parallel).
#pragma once
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/plan.hpp"

namespace seqpar::sim {

struct ElementwiseCost {
  double fwd_s = 0, bwd_s = 0;  // one layer of one micro-step
  double selective_s = 0;       // what selective checkpointing recomputes of it (norms, activation)
  double fp8_cast_fwd_s = 0, fp8_cast_bwd_s = 0;  // the FP8 GEMM operands' casts in fwd_s and bwd_s
};
ElementwiseCost layer_elementwise_cost(const Model& m, const System& s, const Plan& p);

}  // namespace seqpar::sim
