// GPU reshards, KV-head replication/reduction, LSE merge and fill against the CPU references on random
// inputs at awkward sizes (odd head_dim forces 2-byte copies), outputs poisoned before each run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <vector>

#include "gpu_util.hpp"
#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/kernels/fill.cuh"
#include "seqpar/kernels/lse_merge.cuh"
#include "seqpar/kernels/reshard.cuh"
#include "seqpar/kernels/reshard_ref.hpp"
#include "test_util.hpp"

namespace seqpar {
namespace {

using kernels::DType;

struct Dims {
  DType t;
  int P, b, n, heads, kv_heads, d;
};

std::ostream& operator<<(std::ostream& os, const Dims& x) {
  return os << kernels::to_string(x.t) << " P" << x.P << " b" << x.b << " n" << x.n << " h" << x.heads << "/"
            << x.kv_heads << " d" << x.d;
}

class ReshardGpu : public ::testing::TestWithParam<Dims> {};

TEST_P(ReshardGpu, EveryDirectionEqualsReference) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const auto [t, P, b, n, H, KH, d] = GetParam();
  const std::size_t nq = std::size_t(b) * n * H * d, nk = std::size_t(b) * n * KH * d, es = kernels::dtype_size(t);
  auto x = test::random_vector(nq, 1), xk = test::random_vector(nk, 2), xv = test::random_vector(nk, 3);
  test::DeviceBuffer dx(nq * es), dk(nk * es), dvv(nk * es), out(nq * es), fused((nq + 2 * nk) * es),
      oq(nq * es), ok(nk * es), ov(nk * es);
  test::upload(t, x, dx);
  test::upload(t, xk, dk);
  test::upload(t, xv, dvv);
  std::vector<float> want(nq);

  using GpuFn = void (*)(int, int, int, int, int, DType, const void*, void*, cudaStream_t);
  using RefFn = void (*)(int, int, int, int, int, const float*, float*);
  const std::pair<GpuFn, RefFn> ops[] = {{kernels::ulysses_pack, ref::ulysses_pack},
                                         {kernels::ulysses_unpack, ref::ulysses_unpack},
                                         {kernels::ulysses_pack_reverse, ref::ulysses_pack_reverse},
                                         {kernels::ulysses_unpack_reverse, ref::ulysses_unpack_reverse}};
  for (auto [gpu, cpu] : ops) {
    out.poison();
    gpu(P, b, n, H, d, t, dx.get(), out.get(), nullptr);
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
    cpu(P, b, n, H, d, x.data(), want.data());
    EXPECT_EQ(test::download(t, out.get(), nq), want);
  }

  fused.poison();
  kernels::ulysses_pack_qkv(P, b, n, H, KH, d, t, dx.get(), dk.get(), dvv.get(), fused.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> want_fused(nq + 2 * nk);
  ref::ulysses_pack_qkv(P, b, n, H, KH, d, x.data(), xk.data(), xv.data(), want_fused.data());
  EXPECT_EQ(test::download(t, fused.get(), want_fused.size()), want_fused);

  for (auto* buf : {&oq, &ok, &ov}) buf->poison();
  kernels::ulysses_unpack_qkv(P, b, n, H, KH, d, t, fused.get(), oq.get(), ok.get(), ov.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> wq(nq), wk(nk), wv(nk);
  ref::ulysses_unpack_qkv(P, b, n, H, KH, d, want_fused.data(), wq.data(), wk.data(), wv.data());
  EXPECT_EQ(test::download(t, oq.get(), nq), wq);
  EXPECT_EQ(test::download(t, ok.get(), nk), wk);
  EXPECT_EQ(test::download(t, ov.get(), nk), wv);

  // Fused backward: the head-sharded tensors just unpacked -> one buffer -> sequence shards again.
  fused.poison();
  kernels::ulysses_pack_qkv_reverse(P, b, n, H, KH, d, t, oq.get(), ok.get(), ov.get(), fused.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> want_back(nq + 2 * nk);
  ref::ulysses_pack_qkv_reverse(P, b, n, H, KH, d, wq.data(), wk.data(), wv.data(), want_back.data());
  EXPECT_EQ(test::download(t, fused.get(), want_back.size()), want_back);

  for (auto* buf : {&oq, &ok, &ov}) buf->poison();
  kernels::ulysses_unpack_qkv_reverse(P, b, n, H, KH, d, t, fused.get(), oq.get(), ok.get(), ov.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  ref::ulysses_unpack_qkv_reverse(P, b, n, H, KH, d, want_back.data(), wq.data(), wk.data(), wv.data());
  EXPECT_EQ(test::download(t, oq.get(), nq), wq);
  EXPECT_EQ(test::download(t, ok.get(), nk), wk);
  EXPECT_EQ(test::download(t, ov.get(), nk), wv);
}

TEST_P(ReshardGpu, ReplicateAndReduceKvHeadsEqualReference) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const auto [t, P, b, n, H, KH, d] = GetParam();
  const int rep = 3;
  const std::size_t nk = std::size_t(b) * n * KH * d, es = kernels::dtype_size(t);
  auto kv = test::random_vector(nk, 4), grad = test::random_vector(nk * rep, 5);
  test::DeviceBuffer dkv(nk * es), drep(nk * rep * es), dgrad(nk * rep * es), dred(nk * es);
  test::upload(t, kv, dkv);
  test::upload(t, grad, dgrad);
  drep.poison();
  dred.poison();
  kernels::replicate_kv_heads(rep, b, n, KH, d, t, dkv.get(), drep.get());
  kernels::reduce_kv_heads(rep, b, n, KH, d, t, dgrad.get(), dred.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> want_rep(nk * rep), want_red(nk);
  ref::replicate_kv_heads(rep, b, n, KH, d, kv.data(), want_rep.data());
  ref::reduce_kv_heads(rep, b, n, KH, d, grad.data(), want_red.data());
  EXPECT_EQ(test::download(t, drep.get(), nk * rep), want_rep);
  for (auto& w : want_red) w = test::round_to(t, w);  // both sum in fp32 and round once
  EXPECT_LE(test::max_abs_diff(test::download(t, dred.get(), nk), want_red), t == DType::fp32 ? 1e-6 : 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ReshardGpu,
                         ::testing::Values(Dims{DType::fp32, 4, 2, 37, 8, 4, 64},    // 16-byte units
                                           Dims{DType::bf16, 2, 3, 101, 6, 2, 128},  // bf16, 3 batch
                                           Dims{DType::fp16, 3, 1, 5, 9, 3, 3},      // 6-byte rows: 2-byte units
                                           Dims{DType::bf16, 8, 1, 64, 32, 8, 128}));

TEST(LseMergeGpu, MergesLikeTheReference) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const int b = 2, sq = 77, h = 3, d = 64;
  const std::size_t no = std::size_t(b) * sq * h * d, nl = std::size_t(b) * h * sq;
  auto o = test::random_vector(no, 6), part = test::random_vector(no, 7), lse = test::random_vector(nl, 8, -3, 3),
       lse_part = test::random_vector(nl, 9, -3, 3);
  lse[0] = -INFINITY;       // nothing yet: the part is copied
  lse_part[1] = -INFINITY;  // empty part: unchanged
  test::DeviceBuffer d_o(no * 4), d_part(no * 2), d_lse(nl * 4), d_lp(nl * 4);
  test::upload(DType::fp32, o, d_o);
  test::upload(DType::bf16, part, d_part);
  test::upload(DType::fp32, lse, d_lse);
  test::upload(DType::fp32, lse_part, d_lp);
  kernels::lse_merge(b, sq, h, d, DType::fp32, d_o.get(), d_lse.f32(), DType::bf16, d_part.get(), d_lp.f32());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  ref::lse_merge(b, sq, h, d, o.data(), lse.data(), part.data(), lse_part.data());
  EXPECT_LE(test::max_abs_diff(test::download(DType::fp32, d_o.get(), no), o), 1e-5);
  EXPECT_LE(test::max_abs_diff(test::download(DType::fp32, d_lse.get(), nl), lse), 1e-5);
}

TEST(FillGpu, UniformIsInRangeVariedAndReproducible) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const std::size_t n = 100003;
  test::DeviceBuffer a(n * 2), b(n * 2);
  kernels::fill_uniform(DType::bf16, a.get(), n, 42, -0.5f, 2.f);
  kernels::fill_uniform(DType::bf16, b.get(), n, 42, -0.5f, 2.f);
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  const auto x = test::download(DType::bf16, a.get(), n), y = test::download(DType::bf16, b.get(), n);
  EXPECT_EQ(x, y);
  double mean = 0;
  for (float v : x) {
    ASSERT_GE(v, -0.5f);
    ASSERT_LE(v, 2.f);
    mean += v / static_cast<double>(n);
  }
  EXPECT_NEAR(mean, 0.75, 0.02);
}

}  // namespace
}  // namespace seqpar
