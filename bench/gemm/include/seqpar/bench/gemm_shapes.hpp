// The GEMM shapes seqpar-bench-gemm times: square sizes for the bf16 ceiling, and the linear layers of one
// transformer layer (plus the LM head) for a model, forward and both backward GEMMs. Pure C++, no CUDA.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/kernels/gemm_shape.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::bench {

// The shape type is the kernels layer's, which the cuBLAS wrapper takes (kernels/gemm_shape.hpp).
using kernels::GemmShape;

// "gemm/bf16/qkv_fwd/m4096n6144k4096"
std::string gemm_name(const GemmShape& s, const std::string& dtype);

// Square m = n = k = size GEMM (X W^T layout, as the forward).
GemmShape square_gemm(std::int64_t size);

// The linear layers of one layer of `model` for `tokens` rows of activations: qkv, attn_out, mlp_up_gate
// (mlp_up for GELU models), mlp_down, lm_head. For each, the forward Y[t,out] = X[t,in] W^T (op "<layer>_fwd"),
// the input gradient dX[t,in] = dY W ("<layer>_dx") and the weight gradient dW[out,in] = dY^T X ("<layer>_dw",
// whose reduction runs over the tokens). `passes` selects among "fwd", "dx", "dw". Throws seqpar::Error for
// non-positive tokens, a model with non-positive sizes, or an unknown pass.
std::vector<GemmShape> layer_gemms(const sim::Model& model, std::int64_t tokens,
                                   const std::vector<std::string>& passes = {"fwd", "dx", "dw"});

}  // namespace seqpar::bench
