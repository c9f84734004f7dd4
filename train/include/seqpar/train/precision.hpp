// The precision attention runs in. The CUDA back end's flash kernels take bf16 inputs and write
// bf16 outputs (fp32 accumulation, fp32 log-sum-exp); the CPU back end can round to bf16 at the
// same places (bf16) or stay fp32 throughout (fp32: the validation reference). Everything else of
// the step (GEMMs, norms, RoPE, SwiGLU, loss, AdamW, gradients, reductions) is fp32 in both modes.
#pragma once
#include <cstdint>
#include <string_view>

namespace seqpar::train {

enum class Precision { fp32, bf16 };

std::string_view to_string(Precision p);
// "fp32" | "bf16"; anything else throws seqpar::Error naming `field` and the accepted values.
Precision parse_precision(std::string_view text, std::string_view field = "--precision");

// x[i] = x[i] rounded to the nearest bf16 (ties to even, as __float2bfloat16_rn; NaN stays NaN).
void round_to_bf16(float* x, std::int64_t n);

}  // namespace seqpar::train
