#include "seqpar/kernels/dtype.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"

namespace seqpar::kernels {

DType parse_dtype(std::string_view text, std::string_view field) {
  const DType t = seqpar::parse_dtype(text, field);
  if (t != DType::bf16 && t != DType::fp16 && t != DType::fp32)
    throw Error(fmt::format("{}: element type '{}' is not supported by the kernels (accepted: bf16, fp16, fp32)",
                            field, text));
  return t;
}

}  // namespace seqpar::kernels
