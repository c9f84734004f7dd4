#include "seqpar/bench/gemm_precision.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"

namespace seqpar::bench {

std::string GemmPrecision::dtype() const { return fp8 ? "fp8_e4m3" : "bf16"; }

std::string GemmPrecision::label() const { return fp8 ? fmt::format("fp8_e4m3_{}", to_string(scaling)) : "bf16"; }

std::vector<GemmPrecision> parse_gemm_precisions(const std::string& dtypes, const std::string& fp8_scalings,
                                                 const std::string& library) {
  const std::vector<std::string> types = split_list(dtypes, "--dtype");
  const auto repeated = [](const std::vector<std::string>& v) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (std::find(v.begin() + static_cast<std::ptrdiff_t>(i) + 1, v.end(), v[i]) != v.end()) return v[i];
    return std::string();
  };
  if (const std::string r = repeated(types); !r.empty()) throw Error(fmt::format("--dtype: '{}' given twice", r));
  std::vector<GemmPrecision> out;
  for (const std::string& t : types) {
    if (t == "bf16") {
      out.push_back({});
    } else if (t == "fp8") {
      if (library != "lt")
        throw Error(fmt::format("--dtype fp8 runs on cuBLASLt only (--library lt), not --library {}", library));
      const std::vector<std::string> scalings = split_list(fp8_scalings, "--fp8-scaling");
      if (const std::string r = repeated(scalings); !r.empty())
        throw Error(fmt::format("--fp8-scaling: '{}' given twice", r));
      for (const std::string& s : scalings) out.push_back({true, parse_fp8_scaling(s, "--fp8-scaling")});
    } else {
      throw Error(fmt::format("--dtype: unknown type '{}' (bf16, fp8)", t));
    }
  }
  return out;
}

GemmShape fp8_layout(const GemmShape& s) {
  GemmShape t = s;
  t.trans_a = false;
  t.trans_b = true;
  return t;
}

nlohmann::json gemm_row_fields(const GemmShape& layer, const GemmPrecision& p, const std::string& library) {
  const GemmShape run = p.fp8 ? fp8_layout(layer) : layer;
  nlohmann::json f = {{"op", "gemm"},          {"gemm", run.op},          {"m", run.m},
                      {"n", run.n},            {"k", run.k},              {"dtype", p.dtype()},
                      {"accumulate", "fp32"},  {"trans_a", run.trans_a},  {"trans_b", run.trans_b},
                      {"backend", "cublas"},   {"library", library},      {"flops", run.flops()}};
  if (run.tokens > 0) f["tokens"] = run.tokens;
  if (p.fp8) {
    f["output"] = "bf16";
    f["fp8_format"] = to_string(Fp8Format::e4m3);
    f["scaling"] = to_string(p.scaling);
    f["fast_accum"] = false;
    f["transposed_copies"] = layer.trans_a || !layer.trans_b;
  }
  return f;
}

}  // namespace seqpar::bench
