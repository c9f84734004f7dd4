// The one mapping from the kernels' element types (seqpar::kernels::DType) to the communicator's
// (seqpar::comm::DType), for programs that move kernel tensors through a Communicator.
// Link seqpar_bench_dtype to use it.
#pragma once
#include "seqpar/comm/communicator.hpp"
#include "seqpar/kernels/dtype.hpp"

namespace seqpar::bench {

constexpr comm::DType to_comm(kernels::DType t) {
  switch (t) {
    case kernels::DType::bf16: return comm::DType::bf16;
    case kernels::DType::fp16: return comm::DType::f16;
    case kernels::DType::fp32: return comm::DType::f32;
  }
  return comm::DType::u8;  // unreachable: every enumerator is handled above
}

}  // namespace seqpar::bench
