// The element types the GPU kernels take are core's seqpar::DType (the references are
// float/double); the kernels support bf16 and fp16 for attention inputs and fp32 additionally for
// reshards, merges and fills.
#pragma once
#include <string_view>

#include "seqpar/core/dtype.hpp"

namespace seqpar::kernels {

using seqpar::DType;
using seqpar::dtype_size;
using seqpar::to_string;

// core's parse_dtype (every spelling and alias it accepts), then rejects the types no kernel
// takes (fp64, integers), naming `field` and the accepted values.
DType parse_dtype(std::string_view text, std::string_view field = "dtype");

}  // namespace seqpar::kernels
