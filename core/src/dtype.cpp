#include "seqpar/core/dtype.hpp"

#include <fmt/format.h>

#include <utility>

#include "seqpar/core/error.hpp"

namespace seqpar {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::bf16: return 2;
    case DType::fp16: return 2;
    case DType::fp32: return 4;
    case DType::fp64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  throw Error(fmt::format("dtype: enumerator {} has no size", static_cast<int>(t)));
}

const char* to_string(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
    case DType::fp64: return "fp64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

DType parse_dtype(std::string_view text, std::string_view field) {
  for (DType t : all_dtypes)
    if (text == to_string(t)) return t;
  // Aliases: the communicator's former spellings and the nccl-tests names.
  static constexpr std::array<std::pair<std::string_view, DType>, 10> aliases{{
      {"f16", DType::fp16},
      {"f32", DType::fp32},
      {"f64", DType::fp64},
      {"bfloat16", DType::bf16},
      {"half", DType::fp16},
      {"float", DType::fp32},
      {"double", DType::fp64},
      {"int32", DType::i32},
      {"int64", DType::i64},
      {"uint8", DType::u8},
  }};
  for (const auto& [name, t] : aliases)
    if (name == text) return t;
  throw Error(fmt::format(
      "{}: unknown element type '{}' (accepted: bf16|bfloat16, fp16|f16|half, fp32|f32|float, "
      "fp64|f64|double, i32|int32, i64|int64, u8|uint8)",
      field, text));
}

}  // namespace seqpar
