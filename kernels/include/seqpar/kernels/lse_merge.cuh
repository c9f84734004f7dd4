// Merge of a partial attention result into a running one by their log-sum-exp, as ring attention does
// after each step. Same layouts and -inf convention as ref::lse_merge. Host-callable from plain C++.
#pragma once
#include <cuda_runtime.h>

#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels {

// o [batch, seq_q, heads, head_dim] in o_type (often fp32 for the running result), lse [batch, heads, seq_q]
// fp32, updated in place; o_part in part_type with lse_part. lse = -inf means "nothing yet".
void lse_merge(int batch, int seq_q, int heads, int head_dim, DType o_type, void* o, float* lse, DType part_type,
               const void* o_part, const float* lse_part, cudaStream_t stream = nullptr);

}  // namespace seqpar::kernels
