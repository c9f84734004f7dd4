// The precision a training step runs in. bf16 (the default, as production trains): activations and
// their gradients are stored in bf16, every op computes in fp32 on what it loads and rounds what it
// stores, the GEMMs take bf16 operands (the weights from a bf16 copy AdamW writes in its pass) and
// accumulate in fp32, attention runs on bf16 q, k, v with an fp32 log-sum-exp; master weights,
// their gradients (and their reduction), the AdamW moments, RMSNorm's rstd and the losses stay
// fp32. fp32: plain fp32 throughout, the CPU back end's validation reference.
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
