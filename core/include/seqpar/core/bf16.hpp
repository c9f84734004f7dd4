// bf16 on the host: the one conversion the project's host code uses (the communicators' reductions,
// the CPU back end's bf16 storage), rounding as the GPU's __float2bfloat16_rn does.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace seqpar {

inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even; NaN stays NaN (quiet), infinities stay infinite.
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace seqpar
