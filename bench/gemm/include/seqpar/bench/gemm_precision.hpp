// The precisions seqpar-bench-gemm times and what each row says about it: bf16 (as before), or FP8 (E4M3
// A and B, bf16 D, fp32 accumulation) with per-tensor or row-wise scales. FP8 runs every GEMM in
// cuBLASLt's TN layout (A [m,k], B [n,k]): the backward GEMMs' operands are then the transposed FP8
// copies a framework casts and caches (Transformer Engine's cast-transpose), and the row says so. Pure C++.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "seqpar/bench/gemm_shapes.hpp"
#include "seqpar/core/fp8.hpp"

namespace seqpar::bench {

struct GemmPrecision {
  bool fp8 = false;
  Fp8Scaling scaling = Fp8Scaling::tensor;  // FP8 only
  // The row's "dtype": "bf16" or "fp8_e4m3" (the operands' type).
  std::string dtype() const;
  // The benchmark name's precision part: "bf16", "fp8_e4m3_tensor", "fp8_e4m3_row".
  std::string label() const;
};

// --dtype (comma-separated: bf16, fp8) and --fp8-scaling (comma-separated: tensor, row): one precision
// per bf16 and one per FP8 scaling, in that order. FP8 runs on cuBLASLt only: with `library` "gemmex"
// it is an Error naming --dtype and --library. Unknown or repeated values are Errors naming the option.
std::vector<GemmPrecision> parse_gemm_precisions(const std::string& dtypes, const std::string& fp8_scalings,
                                                 const std::string& library);

// The shape FP8 runs for a layer GEMM: the same m, n, k and op in the TN layout.
GemmShape fp8_layout(const GemmShape& s);

// The row's fields for the GEMM `layer` run at precision `p` on `library` ("cublasLt", "cublasGemmEx"):
// op, gemm, m, n, k, dtype, accumulate, trans_a/trans_b as run, backend, library, flops (2mnk), tokens
// when the shape has them; FP8 adds output ("bf16"), fp8_format, scaling, fast_accum (false) and
// transposed_copies (true when the layer GEMM is not TN, so its FP8 operands are transposed copies).
nlohmann::json gemm_row_fields(const GemmShape& layer, const GemmPrecision& p, const std::string& library);

}  // namespace seqpar::bench
