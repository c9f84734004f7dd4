// The cuBLAS bf16 GEMM wrapper (kernels/cublas_gemm.hpp, timed by seqpar-bench-gemm) against a CPU fp64 reference on random inputs at awkward sizes,
// in the three layouts the benchmark uses (forward X W^T, dX = dY W, dW = dY^T X). Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.hpp"
#include "seqpar/kernels/cublas_gemm.hpp"

namespace seqpar::kernels {
namespace {

using test::DeviceBuffer;

struct Case {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
};

// "m127n65k33_Bt": the test name and the printed parameter.
std::string case_name(const Case& c) {
  return fmt::format("m{}n{}k{}{}{}", c.m, c.n, c.k, c.trans_a ? "_At" : "", c.trans_b ? "_Bt" : "");
}
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

// Element (i, j) of op(X) where op(X) is [rows, cols]: stored transposed ([cols, rows]) when `trans`.
double at(const std::vector<float>& x, bool trans, std::int64_t rows, std::int64_t cols, std::int64_t i,
          std::int64_t j) {
  return trans ? x[static_cast<std::size_t>(j * rows + i)] : x[static_cast<std::size_t>(i * cols + j)];
}

// C = op(A) op(B), accumulated in double (`exact`) or in float, rounded to bf16 (the straightforward bf16 GEMM).
std::vector<double> cpu_gemm(const Case& c, const std::vector<float>& a, const std::vector<float>& b, bool exact) {
  std::vector<double> out(static_cast<std::size_t>(c.m * c.n));
  for (std::int64_t i = 0; i < c.m; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) {
      double acc_d = 0;
      float acc_f = 0;
      for (std::int64_t p = 0; p < c.k; ++p) {
        const double x = at(a, c.trans_a, c.m, c.k, i, p), y = at(b, c.trans_b, c.k, c.n, p, j);
        acc_d += x * y;
        acc_f += static_cast<float>(x) * static_cast<float>(y);
      }
      out[static_cast<std::size_t>(i * c.n + j)] = exact ? acc_d : test::round_to(DType::bf16, acc_f);
    }
  return out;
}

struct Errors {
  double max_abs = 0, rms = 0;
};
template <class T>
Errors errors(const std::vector<T>& got, const std::vector<double>& ref) {
  Errors e;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - ref[i]);
    e.max_abs = std::isnan(d) ? INFINITY : std::max(e.max_abs, d);
    e.rms += d * d;
  }
  e.rms = std::sqrt(e.rms / static_cast<double>(ref.size()));
  return e;
}

class CublasGemm : public ::testing::TestWithParam<Case> {};

TEST_P(CublasGemm, MatchesCpuReference) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const Case c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 17 + c.k + (c.trans_a ? 7 : 0) + (c.trans_b ? 3 : 0)));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(static_cast<std::size_t>(c.m * c.k)), b(static_cast<std::size_t>(c.k * c.n));
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const std::vector<float> a_full = a, b_full = b;  // before upload() rounds them to bf16

  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dc(static_cast<std::size_t>(c.m * c.n) * 2);
  test::upload(DType::bf16, a, da);
  test::upload(DType::bf16, b, db);
  dc.poison();
  GemmShape s;
  s.op = "test";
  s.m = c.m, s.n = c.n, s.k = c.k, s.trans_a = c.trans_a, s.trans_b = c.trans_b;
  CublasHandle handle;
  gemm_bf16(handle, s, da.get(), db.get(), dc.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = test::download(DType::bf16, dc.get(), static_cast<std::size_t>(c.m * c.n));

  // Reference: fp64 on the unrounded inputs. Baseline: what a straightforward GEMM on bf16-rounded inputs with
  // fp32 accumulation and a bf16 result gets wrong against it; cuBLAS may be a little worse, never much.
  const std::vector<double> ref = cpu_gemm(c, a_full, b_full, true);
  const Errors base = errors(cpu_gemm(c, a, b, false), ref);
  const Errors gpu = errors(got, ref);
  ASSERT_GT(base.rms, 0.0);  // the bound below means something only if bf16 rounding shows
  EXPECT_LE(gpu.max_abs, 2.0 * base.max_abs) << "max |error|: gpu " << gpu.max_abs << ", baseline " << base.max_abs;
  EXPECT_LE(gpu.rms, 1.5 * base.rms) << "rms error: gpu " << gpu.rms << ", baseline " << base.rms;
}

INSTANTIATE_TEST_SUITE_P(AwkwardSizes, CublasGemm,
                         ::testing::Values(Case{127, 65, 33, false, true}, Case{127, 65, 33, false, false},
                                           Case{127, 65, 33, true, false}, Case{1000, 300, 77, false, true},
                                           Case{1000, 300, 77, false, false}, Case{77, 300, 1000, true, false},
                                           Case{1, 1, 1, false, true}, Case{3, 5000, 7, false, true}),
                         [](const ::testing::TestParamInfo<Case>& p) { return case_name(p.param); });

TEST(CublasGemm, BadDimensionsAreRejected) {
  GemmShape s;
  s.op = "bad";
  s.m = 0, s.n = 4, s.k = 4;
  // Checked before cuBLAS is called, so no device is needed beyond the handle; skip if there is none.
  SEQPAR_SKIP_WITHOUT_GPU();
  CublasHandle handle;
  EXPECT_THROW(gemm_bf16(handle, s, nullptr, nullptr, nullptr), Error);
  s.m = std::int64_t(1) << 32;
  EXPECT_THROW(gemm_bf16(handle, s, nullptr, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace seqpar::kernels
