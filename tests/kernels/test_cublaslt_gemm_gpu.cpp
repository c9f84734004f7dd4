// The cuBLASLt GEMM wrapper (kernels/cublaslt_gemm.hpp, the training step's default GEMM) against the CPU
// reference (gemm_expected.hpp: ref::layer_ops::gemm, fp32 accumulation, and a tolerance derived from
// the roundings a correct result may carry) on the same bf16-rounded operands: awkward sizes,
// every transposition, C/D fp32 and bf16, beta 0 (D poisoned with NaN: C must not be read) and 1 (in
// place), with and without the bias epilogue; then the plan cache (one heuristic query per problem, a
// fresh plan for a less aligned view) and the errors. Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gemm_expected.hpp"
#include "gpu_util.hpp"
#include "seqpar/kernels/cublaslt_gemm.hpp"

namespace seqpar::kernels {
namespace {

using test::DeviceBuffer;

struct Size {
  int m, n, k;
};
struct Case {
  Size size;
  bool trans_a, trans_b;
  DType cd;
  float beta;
  bool bias;
};

std::string case_name(const Case& c) {
  return fmt::format("m{}n{}k{}{}{}_{}_beta{}{}", c.size.m, c.size.n, c.size.k, c.trans_a ? "_At" : "",
                     c.trans_b ? "_Bt" : "", to_string(c.cd), static_cast<int>(c.beta), c.bias ? "_bias" : "");
}
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

cudaDataType_t cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The reference and its tolerance (gemm_expected.hpp derives it: the bias epilogue of a bf16 D may
// round twice, and its error is scaled to the terms, not to the result).
test::GemmExpected expected(const Case& c, float alpha, const std::vector<float>& a, const std::vector<float>& b,
                            const std::vector<float>& c_in, const std::vector<float>& bias) {
  return test::gemm_expected({c.size.m, c.size.n, c.size.k, c.trans_a, c.trans_b, alpha, c.beta, c.cd, c.bias}, a, b,
                             c_in, bias);
}

class CublasLtGemmCase : public ::testing::TestWithParam<Case> {};

TEST_P(CublasLtGemmCase, MatchesCpuReferenceOnRoundedOperands) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const Case c = GetParam();
  const auto m = static_cast<std::size_t>(c.size.m), n = static_cast<std::size_t>(c.size.n),
             k = static_cast<std::size_t>(c.size.k);
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 17 + k + (c.trans_a ? 7 : 0) + (c.trans_b ? 3 : 0)));
  std::vector<float> a = random_values(m * k, rng), b = random_values(k * n, rng), cv = random_values(m * n, rng),
                     bias = random_values(n, rng);
  const std::size_t esize = dtype_size(c.cd);
  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dd(m * n * esize), dbias(n * esize);
  test::upload(DType::bf16, a, da);  // rounds a, b, C and the bias in place: the reference sees the GPU's inputs
  test::upload(DType::bf16, b, db);
  test::upload(c.cd, bias, dbias);
  if (c.beta == 0.f) {
    dd.poison();  // C = D is NaN: with beta 0 it must not be read
    for (float& x : cv) x = 0.f;
  } else {
    test::upload(c.cd, cv, dd);  // in place: C and D are one buffer
  }
  const float alpha = 0.5f;
  const test::GemmExpected want = expected(c, alpha, a, b, cv, bias);

  GemmShape s;
  s.op = "test";
  s.m = c.size.m, s.n = c.size.n, s.k = c.size.k, s.trans_a = c.trans_a, s.trans_b = c.trans_b;
  CublasLtGemm lt;
  lt.matmul(s, alpha, da.get(), db.get(), c.beta, dd.get(), dd.get(), cuda_type(c.cd), c.bias ? dbias.get() : nullptr);
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(test::gemm_matches(test::download(c.cd, dd.get(), m * n), want, c.size.n));
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Size size : {Size{127, 65, 33}, Size{1000, 300, 77}, Size{77, 300, 1000}, Size{1, 1, 1}, Size{3, 5000, 7}})
    for (int t = 0; t < 4; ++t)
      for (DType cd : {DType::fp32, DType::bf16})
        for (float beta : {0.f, 1.f})
          for (bool bias : {false, true}) cases.push_back(Case{size, (t & 1) != 0, (t & 2) != 0, cd, beta, bias});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AwkwardSizes, CublasLtGemmCase, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return case_name(p.param); });

// The heuristic runs once per problem: the same call again reuses the plan; another shape, type or
// epilogue adds one; a view one bf16 element into its buffer (2-byte aligned, where cudaMalloc gives
// 256) needs a plan chosen for that alignment, and its result is still right.
TEST(CublasLtGemm, PlansAreCachedPerProblemAndAlignment) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const int m = 64, n = 48, k = 40;
  std::mt19937 rng(5);
  std::vector<float> a = random_values(static_cast<std::size_t>(m * k) + 1, rng),
                     b = random_values(static_cast<std::size_t>(k * n), rng);
  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dd(static_cast<std::size_t>(m * n) * 4);
  test::upload(DType::bf16, a, da);
  test::upload(DType::bf16, b, db);
  GemmShape s;
  s.op = "cache";
  s.m = m, s.n = n, s.k = k;
  CublasLtGemm lt;
  lt.matmul(s, 1.f, da.get(), db.get(), 0.f, nullptr, dd.get(), CUDA_R_32F);
  lt.matmul(s, 1.f, da.get(), db.get(), 0.f, nullptr, dd.get(), CUDA_R_32F);
  EXPECT_EQ(lt.cached_plans(), 1u);
  s.trans_b = true;  // same sizes, B read as [n,k]
  lt.matmul(s, 1.f, da.get(), db.get(), 0.f, nullptr, dd.get(), CUDA_R_32F);
  EXPECT_EQ(lt.cached_plans(), 2u);
  s.trans_b = false;

  const auto* a_view = static_cast<const char*>(da.get()) + 2;
  dd.poison();
  lt.matmul(s, 1.f, a_view, db.get(), 0.f, nullptr, dd.get(), CUDA_R_32F);
  EXPECT_EQ(lt.cached_plans(), 3u);
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> a_shifted(a.begin() + 1, a.end());
  const Case c{Size{m, n, k}, false, false, DType::fp32, 0.f, false};
  EXPECT_TRUE(test::gemm_matches(test::download(DType::fp32, dd.get(), static_cast<std::size_t>(m * n)),
                                 expected(c, 1.f, a_shifted, b, std::vector<float>(static_cast<std::size_t>(m * n), 0.f), {}), n));
}

// Each refusal names the GEMM and its shape; nothing reaches cuBLASLt.
TEST(CublasLtGemm, BadArgumentsAreRejectedNamingTheShape) {
  SEQPAR_SKIP_WITHOUT_GPU();
  CublasLtGemm lt;
  DeviceBuffer buf(1024);
  GemmShape s;
  s.op = "bad";
  s.m = 0, s.n = 4, s.k = 4;
  EXPECT_THROW(lt.matmul(s, 1.f, buf.get(), buf.get(), 0.f, nullptr, buf.get(), CUDA_R_32F), Error);
  s.m = std::int64_t(1) << 32;
  EXPECT_THROW(lt.matmul(s, 1.f, buf.get(), buf.get(), 0.f, nullptr, buf.get(), CUDA_R_32F), Error);
  s.m = 4;
  const auto message = [&](float beta, cudaDataType_t t) {
    try {
      lt.matmul(s, 1.f, buf.get(), buf.get(), beta, nullptr, buf.get(), t);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string null_c = message(1.f, CUDA_R_32F);
  EXPECT_NE(null_c.find("GEMM bad (m=4 n=4 k=4"), std::string::npos) << null_c;
  EXPECT_NE(null_c.find("beta"), std::string::npos) << null_c;
  const std::string fp16 = message(0.f, CUDA_R_16F);
  EXPECT_NE(fp16.find("fp32 or bf16"), std::string::npos) << fp16;
  EXPECT_EQ(lt.cached_plans(), 0u);
}

}  // namespace
}  // namespace seqpar::kernels
