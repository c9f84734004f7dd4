// Bytes per element of the types the simulator charges activations and messages in: bf16 (also
// fp16) and fp32. One definition for the cost files (they share translation units in unity builds).
#pragma once

namespace seqpar::sim {

inline constexpr double kBf16 = 2.0;
inline constexpr double kF32 = 4.0;
inline constexpr double kFp8 = 1.0;  // E4M3 / E5M2 (core/precision.hpp)

}  // namespace seqpar::sim
