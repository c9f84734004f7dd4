// The element types the GPU kernels take (the references are float/double): bf16 and fp16 for
// attention inputs, fp32 additionally for reshards, merges and fills.
#pragma once
#include <cstddef>
#include <string_view>

namespace seqpar::kernels {

enum class DType { bf16, fp16, fp32 };

std::size_t dtype_size(DType t);
const char* to_string(DType t);
// "bf16" | "fp16" | "fp32"; anything else throws seqpar::Error naming `field` and the accepted values.
DType parse_dtype(std::string_view text, std::string_view field = "dtype");

}  // namespace seqpar::kernels
