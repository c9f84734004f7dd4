#include "seqpar/train/precision.hpp"

#include <fmt/format.h>

#include "seqpar/core/bf16.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::train {

std::string_view to_string(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

std::string_view gemm_precision(Precision p) {
  return p == Precision::bf16 ? "bf16 operands, fp32 accumulation" : "fp32";
}

Precision parse_precision(std::string_view text, std::string_view field) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  throw Error(fmt::format("{} '{}': must be bf16 or fp32", field, text));
}

void round_to_bf16(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = bf16_to_float(float_to_bf16(x[i]));
}

}  // namespace seqpar::train
