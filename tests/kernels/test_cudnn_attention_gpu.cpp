// The cuDNN attention engine on the GPU against the float64 CPU reference, through the same check and
// bounds as seqpar's own kernels (attention_check.hpp): GQA, causal diagonal blocks, the ring-step
// kinds (full, bottom-right, fully masked), awkward lengths, the LSE, sliding windows (NOT YET RUN ON
// A GPU: written with the cuDNN path, compiled only); the ring merge of cuDNN blocks
// equals the whole; and, without a device or cuDNN, the engine says why it is absent.
#include <gtest/gtest.h>

#include <string>

#include "attention_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/cudnn_attention.hpp"
#include "seqpar/kernels/lse_merge.cuh"

namespace seqpar {
namespace {

using kernels::BlockMask;
using kernels::DType;
using ref::AttentionShape;
using test::Case;
using test::shape;

#define SEQPAR_SKIP_WITHOUT_CUDNN()                                                        \
  do {                                                                                     \
    SEQPAR_SKIP_WITHOUT_GPU();                                                             \
    std::string seqpar_why_;                                                               \
    if (!kernels::cudnn_attention_available(&seqpar_why_))                                 \
      GTEST_SKIP() << "cuDNN attention engine unavailable (" << seqpar_why_ << "): skipped"; \
  } while (0)

// The engine with caller-owned workspaces, as the programs use it.
struct CudnnEngine {
  kernels::CudnnAttention engine;
  void forward(const AttentionShape& s, DType t, const void* q, const void* k, const void* v, void* o, float* lse) {
    test::DeviceBuffer ws(engine.forward_workspace_bytes(s, t));
    engine.forward(s, t, q, k, v, o, lse, ws.get());
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void backward(const AttentionShape& s, DType t, const void* q, const void* k, const void* v, const void* o,
                const float* lse, const void* dout, void* dq, void* dk, void* dv) {
    test::DeviceBuffer ws(engine.backward_workspace_bytes(s, t));
    engine.backward(s, t, q, k, v, o, lse, dout, dq, dk, dv, ws.get());
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

class CudnnAttentionGpu : public ::testing::TestWithParam<Case> {};

TEST_P(CudnnAttentionGpu, ForwardAndBackwardMatchReference) {
  SEQPAR_SKIP_WITHOUT_CUDNN();
  CudnnEngine e;
  test::check_engine(e, GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    AwkwardShapes, CudnnAttentionGpu,
    ::testing::Values(Case{DType::bf16, shape(2, 1000, 1000, 8, 2, 128, true)},        // GQA 8:2, causal diagonal
                      Case{DType::fp16, shape(2, 776, 776, 4, 4, 64, false)},          // ragged tiles
                      Case{DType::bf16, shape(1, 300, 512, 4, 1, 64, true, 1024, 0)},  // ring step: fully visible
                      Case{DType::bf16, shape(1, 256, 256, 4, 2, 128, true, 0, 512)},  // ring step: fully masked
                      Case{DType::bf16, shape(2, 1, 64, 2, 1, 128, false)},            // one query
                      Case{DType::fp16, shape(1, 128, 1000, 6, 3, 128, true, 872, 0)},  // bottom-right block
                      Case{DType::bf16, shape(1, 4096, 4096, 4, 4, 128, true)}));      // a production tile count

// Sliding windows (AttentionShape::window, core's in_band) through the frontend's diagonal band: a
// causal diagonal block (Ulysses' call), a bottom-right block (all-gather's prefix call), W = 1, and a
// block wholly in the past whose every pair is inside the band (full). The reference applies the band.
AttentionShape windowed(AttentionShape s, std::int64_t w) {
  s.window = w;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    SlidingWindow, CudnnAttentionGpu,
    ::testing::Values(Case{DType::bf16, windowed(shape(2, 1000, 1000, 8, 2, 128, true), 129)},
                      Case{DType::bf16, windowed(shape(1, 128, 1000, 6, 3, 128, true, 872, 0), 300)},
                      Case{DType::bf16, windowed(shape(1, 256, 256, 4, 2, 64, true), 1)},
                      Case{DType::bf16, windowed(shape(1, 300, 512, 4, 1, 64, true, 1024, 0), 2000)}));

TEST(CudnnAttentionGpuArgs, ABandThroughABlockInThePastIsRefused) {
  SEQPAR_SKIP_WITHOUT_CUDNN();
  kernels::CudnnAttention e;
  // Keys 0..511 all before queries 1024..1323: a window of 1000 keeps some pairs and drops others.
  EXPECT_THROW(e.forward_workspace_bytes(windowed(shape(1, 300, 512, 4, 1, 64, true, 1024, 0), 1000), DType::bf16),
               Error);
  // A window of 100 keeps none of them: no graph, nothing to run.
  EXPECT_EQ(e.forward_workspace_bytes(windowed(shape(1, 300, 512, 4, 1, 64, true, 1024, 0), 100), DType::bf16), 0u);
}

// Ring attention on cuDNN: the causal whole over 2 blocks of keys equals the diagonal block merged with
// the fully visible one by their LSE.
TEST(CudnnAttentionGpuRing, BlocksMergedByLseEqualTheWhole) {
  SEQPAR_SKIP_WITHOUT_CUDNN();
  const int n = 384, h = 4, d = 128;
  const DType t = DType::bf16;
  const AttentionShape whole = shape(1, n, 2 * n, h, h, d, true, n, 0);  // queries are the second half
  auto q = test::random_vector(test::q_size(whole), 7), k = test::random_vector(test::kv_size(whole), 8),
       v = test::random_vector(test::kv_size(whole), 9);
  test::DeviceBuffer dq(q.size() * 2), dk(k.size() * 2), dv(v.size() * 2);
  test::upload(t, q, dq);
  test::upload(t, k, dk);
  test::upload(t, v, dv);
  std::vector<double> o_ex(q.size()), lse_ex(test::lse_size(whole));
  const auto qd = test::to_double(q), kd = test::to_double(k), vd = test::to_double(v);
  ref::attention_forward(whole, qd.data(), kd.data(), vd.data(), o_ex.data(), lse_ex.data());

  CudnnEngine e;
  test::DeviceBuffer o_run(q.size() * 4), lse_run(test::lse_size(whole) * 4), o_part(q.size() * 2),
      lse_part(test::lse_size(whole) * 4);
  std::vector<float> minus_inf(test::lse_size(whole), -INFINITY);
  SEQPAR_CUDA_CHECK(cudaMemcpy(lse_run.get(), minus_inf.data(), minus_inf.size() * 4, cudaMemcpyHostToDevice));
  SEQPAR_CUDA_CHECK(cudaMemset(o_run.get(), 0, o_run.bytes()));
  const std::size_t block = std::size_t(n) * h * d * 2;  // bytes of one K or V block
  for (int step = 0; step < 2; ++step) {
    const AttentionShape s = shape(1, n, n, h, h, d, true, n, std::int64_t{step} * n);
    EXPECT_EQ(kernels::classify_block_mask(s), step == 0 ? BlockMask::full : BlockMask::causal_top);
    o_part.poison();
    lse_part.poison();
    e.forward(s, t, dq.get(), static_cast<char*>(dk.get()) + step * block, static_cast<char*>(dv.get()) + step * block,
              o_part.get(), lse_part.f32());
    kernels::lse_merge(1, n, h, d, DType::fp32, o_run.get(), lse_run.f32(), t, o_part.get(), lse_part.f32());
  }
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  const auto o = test::download(DType::fp32, o_run.get(), q.size());
  const auto lse = test::download(DType::fp32, lse_run.get(), test::lse_size(whole));
  // bf16 inputs and a bf16 partial output: a few bf16 ulps of the unit-scale output.
  EXPECT_LT(test::max_abs_diff(o, o_ex), 2e-2);
  EXPECT_LT(test::max_abs_diff(lse, lse_ex), 1e-2);
}

TEST(CudnnAttentionGpuArgs, GeneralMasksAndFp32AreRefused) {
  SEQPAR_SKIP_WITHOUT_CUDNN();
  kernels::CudnnAttention e;
  AttentionShape s = shape(1, 128, 128, 2, 2, 64, true, 64, 0);  // diagonal cut off the block's corner
  EXPECT_THROW(e.forward_workspace_bytes(s, DType::bf16), Error);
  s = shape(1, 128, 128, 2, 2, 64, false);
  EXPECT_THROW(e.forward_workspace_bytes(s, DType::fp32), Error);
  (void)e.forward_workspace_bytes(s, DType::bf16);
  EXPECT_EQ(e.cached_graphs(), 1u);  // the shape above was built once and cached
  (void)e.forward_workspace_bytes(s, DType::bf16);
  EXPECT_EQ(e.cached_graphs(), 1u);
}

// Runs everywhere (CI has no GPU): without a device or without cuDNN the engine is absent and says why.
TEST(CudnnAttentionAvailability, AbsentEngineSaysWhy) {
  std::string why;
  if (kernels::cudnn_attention_available(&why)) GTEST_SKIP() << "the engine is available here: " << kernels::cudnn_attention_version();
  EXPECT_FALSE(why.empty());
  try {
    kernels::CudnnAttention e;
    ADD_FAILURE() << "constructing the engine without cuDNN or a device did not throw";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("unavailable"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find(why), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace seqpar
