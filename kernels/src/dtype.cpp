#include "seqpar/kernels/dtype.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"

namespace seqpar::kernels {

std::size_t dtype_size(DType t) { return t == DType::fp32 ? 4 : 2; }

const char* to_string(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
  }
  return "?";
}

DType parse_dtype(std::string_view text, std::string_view field) {
  for (DType t : {DType::bf16, DType::fp16, DType::fp32})
    if (text == to_string(t)) return t;
  throw Error(fmt::format("{}: unknown element type '{}' (accepted: bf16, fp16, fp32)", field, text));
}

}  // namespace seqpar::kernels
