// Device fills for benchmarks and model initialisation: uniform pseudo-random values from a counter-based
// hash (reproducible for a seed, independent of the launch shape), and constants. Host-callable from plain C++.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels {

// p[i] = lo + (hi - lo) * u(seed, i), u uniform in [0, 1), rounded to t.
void fill_uniform(DType t, void* p, std::size_t count, std::uint64_t seed, float lo = -1.f, float hi = 1.f,
                  cudaStream_t stream = nullptr);

// p[i] = value rounded to t (for example -inf for the LSE of rows that see no key).
void fill_value(DType t, void* p, std::size_t count, float value, cudaStream_t stream = nullptr);

}  // namespace seqpar::kernels
