// The element types every layer names (kernel inputs, communicator buffers, the "dtype" field of
// measurement JSON): one enum, one spelling each, one parser. Kept C++17-clean because the CUDA
// kernels' public headers (built as C++17) include it.
#pragma once
#include <array>
#include <cstddef>
#include <string_view>

namespace seqpar {

enum class DType { bf16, fp16, fp32, fp64, i32, i64, u8 };

inline constexpr std::array<DType, 7> all_dtypes{DType::bf16, DType::fp16, DType::fp32, DType::fp64,
                                                 DType::i32,  DType::i64,  DType::u8};

// Bytes per element.
std::size_t dtype_size(DType t);
// The one spelling written everywhere: "bf16", "fp16", "fp32", "fp64", "i32", "i64", "u8".
const char* to_string(DType t);
// Accepts the spellings above and, because users typed them before the vocabulary was unified,
// the older communicator spellings (f16, f32, f64) and the nccl-tests names (bfloat16, half,
// float, double, int32, int64, uint8). Anything else throws seqpar::Error naming `field`.
DType parse_dtype(std::string_view text, std::string_view field = "dtype");

}  // namespace seqpar
