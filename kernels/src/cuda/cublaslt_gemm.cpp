#include "seqpar/kernels/cublaslt_gemm.hpp"

#include <cublasLt.h>
#include <fmt/format.h>

#include <compare>
#include <cstdint>
#include <map>
#include <string>

#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/cublas_check.hpp"
#include "seqpar/kernels/cublas_gemm.hpp"

namespace seqpar::kernels {
namespace {

// What selects a plan: the heuristic's answer depends on the problem, the types, the epilogue and the
// pointers' alignments (it assumes the alignments it is told, so a plan chosen for 256-byte aligned
// buffers must not run on a view 2 bytes into one). Alpha and beta are runtime values, not part of it.
struct PlanKey {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int cd_type = 0;
  int ab_type = CUDA_R_16BF;
  int scale_mode = -1;  // FP8 only: cublasLtMatmulMatrixScale_t of A and B; -1 for bf16 (no scales)
  bool bias = false;
  unsigned align_a = 0, align_b = 0, align_c = 0, align_d = 0, align_bias = 0;
  auto operator<=>(const PlanKey&) const = default;
};

// The largest power of two up to 256 dividing the address (256 for null: nothing to align).
unsigned alignment(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  unsigned a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// A cached problem: the descriptors are owned and destroyed with it.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, cd = nullptr;  // cuBLASLt's A and B: see make_plan
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {  // destructors do not throw; nothing useful to do with a failure here
    if (cd) cublasLtMatrixLayoutDestroy(cd);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// The heuristic preference: workspace, alignments, and no split-K reduction in the output type (bf16
// partial sums would be a reduced-precision reduction; CublasHandle disallows the same for cublasGemmEx).
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() { SEQPAR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p)); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <class T>
  void set(cublasLtMatmulPreferenceAttributes_t attr, T value) {
    SEQPAR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof value));
  }
};

const char* type_name(cudaDataType_t t) { return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_32F ? "fp32" : "other"; }

}  // namespace

struct CublasLtGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  ~Impl() {
    plans.clear();  // the descriptors before the handle they were used with
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
  }

  // cuBLASLt is column-major: a row-major D[m,n] is a column-major D^T[n,m] = op(B)^T op(A)^T, so our B is
  // cuBLASLt's A and our A its B. Row-major B[k,n] is column-major [n,k] (no transpose, ld n); a stored
  // [n,k] B is column-major [k,n] (transpose, ld k). Likewise for A with m in place of n.
  std::unique_ptr<Plan> make_plan(const PlanKey& key, const void* a, const void* b, const void* c, const void* d,
                                  const void* bias) const {
    auto plan = std::make_unique<Plan>();
    const auto m = static_cast<std::uint64_t>(key.m), n = static_cast<std::uint64_t>(key.n),
               k = static_cast<std::uint64_t>(key.k);
    const auto cd_type = static_cast<cudaDataType_t>(key.cd_type);
    const auto ab_type = static_cast<cudaDataType_t>(key.ab_type);
    SEQPAR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_lt_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_lt_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    SEQPAR_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof op_lt_a));
    SEQPAR_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof op_lt_b));
    if (key.bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      SEQPAR_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
      const auto bias_type = static_cast<std::int32_t>(cd_type);
      SEQPAR_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
      // The heuristic reads the bias pointer's alignment from it.
      SEQPAR_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    if (key.scale_mode >= 0) {
      const auto mode = static_cast<std::int32_t>(key.scale_mode);
      SEQPAR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
      SEQPAR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
    }
    const auto ld_lt_a = static_cast<std::int64_t>(key.trans_b ? k : n);
    const auto ld_lt_b = static_cast<std::int64_t>(key.trans_a ? m : k);
    SEQPAR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, ab_type, key.trans_b ? k : n, key.trans_b ? n : k,
                                                   ld_lt_a));
    SEQPAR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, ab_type, key.trans_a ? m : k, key.trans_a ? k : m,
                                                   ld_lt_b));
    SEQPAR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->cd, cd_type, n, m, static_cast<std::int64_t>(n)));

    Preference pref;
    pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace_bytes));
    pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK &
                                        ~(CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)));
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(alignment(b)));
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(alignment(a)));
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(alignment(c)));
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(alignment(d)));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    SEQPAR_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->cd, plan->cd,
                                                       pref.p, 1, &result, &returned));
    if (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS)
      throw Error("cuBLASLt's heuristic offers no algorithm for it");
    plan->algo = result.algo;
    return plan;
  }
};

CublasLtGemm::CublasLtGemm(cudaStream_t stream, std::size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  // Impl's destructor releases whatever was made before a throw.
  impl_->stream = stream;
  SEQPAR_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  if (workspace_bytes > 0) SEQPAR_CUDA_CHECK(cudaMalloc(&impl_->workspace, workspace_bytes));
  impl_->workspace_bytes = workspace_bytes;
}

CublasLtGemm::~CublasLtGemm() = default;

std::size_t CublasLtGemm::cached_plans() const { return impl_->plans.size(); }

void CublasLtGemm::matmul(const GemmShape& s, float alpha, const void* a, const void* b, float beta, const void* c,
                          void* d, cudaDataType_t cd_type, const void* bias) {
  check_cublas_dims(s);
  // Built only for an error message: the success path formats nothing.
  const auto what = [&] {
    return fmt::format("cuBLASLt GEMM {} (m={} n={} k={}{}{}, C/D {}{})", s.op, s.m, s.n, s.k, s.trans_a ? ", A^T" : "",
                  s.trans_b ? ", B^T" : "", type_name(cd_type), bias ? ", bias epilogue" : "");
  };
  if (cd_type != CUDA_R_32F && cd_type != CUDA_R_16BF)
    throw Error(fmt::format("{}: C and D must be fp32 or bf16 (cudaDataType_t {})", what(), static_cast<int>(cd_type)));
  if (!c) {
    if (beta != 0.f) throw Error(fmt::format("{}: C is null but beta is {} (C is read unless beta is 0)", what(), beta));
    c = d;  // not read with beta 0; cuBLASLt wants a pointer with D's layout
  }
  try {
    const PlanKey key{s.m,          s.n,          s.k,          s.trans_a,    s.trans_b,
                      static_cast<int>(cd_type), CUDA_R_16BF, -1,     bias != nullptr, alignment(a),
                      alignment(b), alignment(c), alignment(d), alignment(bias)};
    auto it = impl_->plans.find(key);
    if (it == impl_->plans.end()) it = impl_->plans.emplace(key, impl_->make_plan(key, a, b, c, d, bias)).first;
    Plan& plan = *it->second;
    if (bias)
      SEQPAR_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    SEQPAR_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, plan.desc, &alpha, b, plan.a, a, plan.b, &beta, c, plan.cd, d,
                                       plan.cd, &plan.algo, impl_->workspace, impl_->workspace_bytes, impl_->stream));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", what(), e.what()));
  }
}

void CublasLtGemm::matmul_fp8(const GemmShape& s, Fp8Scaling scaling, const void* a, const float* a_scale_inv,
                              const void* b, const float* b_scale_inv, void* d) {
  check_cublas_dims(s);
  const auto what = [&] {
    return fmt::format("cuBLASLt FP8 GEMM {} (m={} n={} k={}, E4M3 A and B, {} scales, D bf16)", s.op, s.m, s.n, s.k,
                       to_string(scaling));
  };
  if (s.trans_a || !s.trans_b)
    throw Error(fmt::format("{}: FP8 GEMMs take A [m,k] and B stored [n,k] only (trans_a false, trans_b true: "
                            "cuBLASLt's FP8 'TN' layout); the transposed operands are the caller's FP8 copies",
                            what()));
  if (!a || !b || !d || !a_scale_inv || !b_scale_inv)
    throw Error(fmt::format("{}: A, B, D and both scale pointers must be device pointers, not null", what()));
  const int mode = scaling == Fp8Scaling::tensor ? CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F
                                                 : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  try {
    const PlanKey key{s.m,          s.n,          s.k,          s.trans_a,   s.trans_b,    CUDA_R_16BF, CUDA_R_8F_E4M3,
                      mode,         false,        alignment(a), alignment(b), alignment(d), alignment(d), 256};
    auto it = impl_->plans.find(key);
    if (it == impl_->plans.end()) it = impl_->plans.emplace(key, impl_->make_plan(key, a, b, d, d, nullptr)).first;
    Plan& plan = *it->second;
    // Our B is cuBLASLt's A and our A its B (make_plan): the scales swap with them. In OUTER_VEC mode
    // cuBLASLt's A scale has its M (our n) values and its B scale its N (our m): each operand's rows.
    SEQPAR_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale_inv, sizeof b_scale_inv));
    SEQPAR_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale_inv, sizeof a_scale_inv));
    const float alpha = 1.f, beta = 0.f;
    SEQPAR_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, plan.desc, &alpha, b, plan.a, a, plan.b, &beta, d, plan.cd, d,
                                       plan.cd, &plan.algo, impl_->workspace, impl_->workspace_bytes, impl_->stream));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", what(), e.what()));
  }
}

}  // namespace seqpar::kernels
