// seqpar's own flash attention kernels on the GPU against the float64 CPU reference, through the check
// every engine passes (attention_check.hpp), at awkward sizes.
#include <gtest/gtest.h>

#include "attention_check.hpp"
#include "seqpar/kernels/flash_attention.cuh"

namespace seqpar {
namespace {

using kernels::DType;
using ref::AttentionShape;
using test::Case;
using test::shape;

// The own kernels as an engine: the backward's workspace is allocated per call.
struct OwnKernels {
  void forward(const AttentionShape& s, DType t, const void* q, const void* k, const void* v, void* o, float* lse) {
    kernels::flash_attention_forward(s, t, q, k, v, o, lse);
  }
  void backward(const AttentionShape& s, DType t, const void* q, const void* k, const void* v, const void* o,
                const float* lse, const void* dout, void* dq, void* dk, void* dv) {
    test::DeviceBuffer ws(kernels::flash_attention_backward_workspace_bytes(s));
    ws.poison();
    kernels::flash_attention_backward(s, t, q, k, v, o, lse, dout, dq, dk, dv, ws.get());
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

class FlashAttentionGpu : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttentionGpu, ForwardAndBackwardMatchReference) {
  SEQPAR_SKIP_WITHOUT_GPU();
  OwnKernels engine;
  test::check_engine(engine, GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    AwkwardShapes, FlashAttentionGpu,
    ::testing::Values(Case{DType::bf16, shape(2, 1000, 1000, 8, 2, 128, true)},           // GQA 8:2, causal
                      Case{DType::fp16, shape(2, 777, 777, 4, 4, 64, false)},             // ragged tiles
                      Case{DType::bf16, shape(1, 300, 777, 4, 1, 64, true, 500, 0)},      // ring step, offsets
                      Case{DType::fp16, shape(1, 200, 130, 2, 2, 128, true, 0, 100)},     // rows seeing no key
                      Case{DType::bf16, shape(2, 1, 65, 2, 1, 128, false)},               // one query
                      Case{DType::fp16, shape(1, 129, 1000, 6, 3, 128, true, 871, 0)}));  // bottom-right block

TEST(FlashAttentionGpuArgs, UnsupportedHeadDimAndDtypeThrow) {
  SEQPAR_SKIP_WITHOUT_GPU();
  test::DeviceBuffer buf(1 << 16);
  AttentionShape s = shape(1, 4, 4, 1, 1, 96, false);
  EXPECT_THROW(kernels::flash_attention_forward(s, DType::bf16, buf.get(), buf.get(), buf.get(), buf.get(),
                                                buf.f32()),
               Error);
  s.head_dim = 64;
  EXPECT_THROW(kernels::flash_attention_forward(s, DType::fp32, buf.get(), buf.get(), buf.get(), buf.get(),
                                                buf.f32()),
               Error);
}

}  // namespace
}  // namespace seqpar
