// Host access to typed buffers: read and write element i as a double, and the elementwise sum
// the host back ends use for reductions (bf16 and f16 round after every addition, as on a GPU).
#pragma once
#include <cstddef>

#include "seqpar/comm/communicator.hpp"

namespace seqpar::comm {

double load(const void* buf, std::size_t i, DType dt);
// Rounds to the nearest representable value (integers: truncation toward zero, u8 modulo 256).
void store(void* buf, std::size_t i, DType dt, double v);
// acc[i] += in[i] for i < n, in the element type (integers wrap like the unsigned type).
void add_into(void* acc, const void* in, std::size_t n, DType dt);

}  // namespace seqpar::comm
