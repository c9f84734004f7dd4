#include "seqpar/core/precision.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

namespace seqpar {

std::string_view to_string(Fp8Part p) {
  switch (p) {
    case Fp8Part::gemm: return "gemm";
    case Fp8Part::attention: return "attention";
    case Fp8Part::weights: return "weights";
    case Fp8Part::comm: return "comm";
  }
  return "?";
}

std::string_view to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::delayed: return "delayed";
    case Fp8Recipe::current: return "current";
    case Fp8Recipe::rowwise: return "rowwise";
    case Fp8Recipe::mxfp8: return "mxfp8";
  }
  return "?";
}

std::string fp8_parts_text(const Precision& p) {
  std::string s;
  for (Fp8Part part : kAllFp8Parts)
    if (p.has(part)) s += (s.empty() ? "" : ",") + std::string(to_string(part));
  return s.empty() ? "none" : s;
}

std::uint8_t parse_fp8_parts(std::string_view text, std::string_view field) {
  if (text.empty() || text == "none") return 0;
  if (text == "all") return 0xF;
  std::uint8_t bits = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    bool found = false;
    for (Fp8Part part : kAllFp8Parts) {
      if (item != to_string(part)) continue;
      const auto bit = static_cast<std::uint8_t>(part);
      if (bits & bit) throw Error(fmt::format("{}: '{}' is named twice", field, item));
      bits |= bit;
      found = true;
    }
    if (!found)
      throw Error(fmt::format("{}: unknown part '{}' (the parts are gemm, attention, weights and comm, joined by "
                              "commas; or all, or none)", field, printable(item)));
    start = end + 1;
  }
  return bits;
}

Fp8Recipe parse_fp8_recipe(std::string_view text, std::string_view field) {
  for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::current, Fp8Recipe::rowwise, Fp8Recipe::mxfp8})
    if (text == to_string(r)) return r;
  throw Error(fmt::format("{}: unknown recipe '{}' (expected delayed, current, rowwise or mxfp8)", field,
                          printable(text)));
}

}  // namespace seqpar
