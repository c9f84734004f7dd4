// The precision attention and the GEMMs run in (mixed precision as autocast does it). bf16: the
// CUDA back end's flash kernels take bf16 inputs and write bf16 outputs (fp32 accumulation, fp32
// log-sum-exp), and every GEMM takes bf16 copies of its two operands and accumulates and writes
// C in fp32; the CPU back end rounds to bf16 at the same places. fp32: plain fp32 throughout (the
// CPU back end's validation reference). Activations, master weights, norms, RoPE, SwiGLU, loss,
// AdamW, gradients and reductions are fp32 in both modes.
#pragma once
#include <cstdint>
#include <string_view>

namespace seqpar::train {

enum class Precision { fp32, bf16 };

std::string_view to_string(Precision p);
// "fp32" | "bf16"; anything else throws seqpar::Error naming `field` and the accepted values.
Precision parse_precision(std::string_view text, std::string_view field = "--precision");

// What the GEMMs of a step in precision p compute, as results record it ("gemm_precision"):
// "bf16 operands, fp32 accumulation" | "fp32".
std::string_view gemm_precision(Precision p);

// x[i] = x[i] rounded to the nearest bf16 (ties to even, as __float2bfloat16_rn; NaN stays NaN).
void round_to_bf16(float* x, std::int64_t n);

}  // namespace seqpar::train
