// CPU reference of the Ulysses reshards: explicit index formulas, hand cases, round trips, a simulated
// all-to-all over P ranks, the fused q,k,v form, and KV-head replication and its adjoint.
#include <gtest/gtest.h>

#include <numeric>
#include <ostream>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/kernels/reshard_ref.hpp"
#include "test_util.hpp"

namespace seqpar {
namespace {

struct Dims {
  int P, b, n, heads, d;
  std::size_t size() const { return std::size_t(b) * n * heads * d; }
};
const Dims kAwkward{3, 2, 5, 6, 3};

// The documented layouts written out index by index, independently of reshard_layout.cpp.
TEST(ReshardRef, PackAndUnpackFollowTheDocumentedIndices) {
  const auto [P, b, n, H, d] = kAwkward;
  const int Hp = H / P;
  auto x = test::random_vector(kAwkward.size(), 1);
  std::vector<float> send(x.size()), y(x.size()), back(x.size());
  ref::ulysses_pack(P, b, n, H, d, x.data(), send.data());
  ref::ulysses_unpack(P, b, n, H, d, x.data(), y.data());  // x read as recv [P][b, n, Hp, d]
  for (int p = 0; p < P; ++p)
    for (int bi = 0; bi < b; ++bi)
      for (int t = 0; t < n; ++t)
        for (int hh = 0; hh < Hp; ++hh)
          for (int e = 0; e < d; ++e) {
            const std::size_t chunked = ((((std::size_t(p) * b + bi) * n + t) * Hp + hh) * d + e);
            const std::size_t full = (((std::size_t(bi) * n + t) * H + p * Hp + hh) * d + e);
            const std::size_t seq_major = (((std::size_t(bi) * P * n + p * n + t) * Hp + hh) * d + e);
            ASSERT_EQ(send[chunked], x[full]);
            ASSERT_EQ(y[seq_major], x[chunked]);
          }
}

TEST(ReshardRef, HandComputedCases) {
  // x [b=1, n=2, heads=2, d=1] = tokens (1,2), (3,4): chunk 0 gets head 0 of both tokens.
  std::vector<float> x{1, 2, 3, 4}, send(4);
  ref::ulysses_pack(2, 1, 2, 2, 1, x.data(), send.data());
  EXPECT_EQ(send, (std::vector<float>{1, 3, 2, 4}));
  // recv [P=2][b=2, n=1, heads/P=1, d=1]: chunk p holds sequence block p of both batch entries.
  std::vector<float> recv{10, 11, 20, 21}, y(4);
  ref::ulysses_unpack(2, 2, 1, 2, 1, recv.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{10, 20, 11, 21}));
}

TEST(ReshardRef, ReverseDirectionsInvertTheForwardOnes) {
  const auto [P, b, n, H, d] = kAwkward;
  auto x = test::random_vector(kAwkward.size(), 2);
  std::vector<float> t(x.size()), back(x.size());
  ref::ulysses_pack(P, b, n, H, d, x.data(), t.data());
  ref::ulysses_unpack_reverse(P, b, n, H, d, t.data(), back.data());
  EXPECT_EQ(back, x);
  ref::ulysses_unpack(P, b, n, H, d, x.data(), t.data());
  ref::ulysses_pack_reverse(P, b, n, H, d, t.data(), back.data());
  EXPECT_EQ(back, x);
}

// P ranks, each with sequence block r of X [b, P*n, H, d]; after pack, all-to-all and unpack, rank r
// holds head group r of the whole sequence; the reverse path brings X back.
TEST(ReshardRef, SimulatedAllToAllGivesHeadShardsOfTheFullSequence) {
  const auto [P, b, n, H, d] = kAwkward;
  const int Hp = H / P;
  const std::size_t chunk = kAwkward.size() / P;
  auto X = test::random_vector(kAwkward.size() * P, 3);  // [b, P*n, H, d]
  std::vector<std::vector<float>> send(P, std::vector<float>(kAwkward.size()));
  for (int r = 0; r < P; ++r) {
    std::vector<float> xr(kAwkward.size());
    for (int bi = 0; bi < b; ++bi)
      std::copy_n(&X[((std::size_t(bi) * P * n) + r * n) * H * d], std::size_t(n) * H * d,
                  &xr[std::size_t(bi) * n * H * d]);
    ref::ulysses_pack(P, b, n, H, d, xr.data(), send[r].data());
  }
  auto all_to_all = [&](const std::vector<std::vector<float>>& s) {
    std::vector<std::vector<float>> recv(P, std::vector<float>(kAwkward.size()));
    for (int r = 0; r < P; ++r)
      for (int p = 0; p < P; ++p) std::copy_n(&s[p][r * chunk], chunk, &recv[r][p * chunk]);
    return recv;
  };
  auto recv = all_to_all(send);
  std::vector<std::vector<float>> y(P, std::vector<float>(kAwkward.size()));
  for (int r = 0; r < P; ++r) {
    ref::ulysses_unpack(P, b, n, H, d, recv[r].data(), y[r].data());
    for (int bi = 0; bi < b; ++bi)
      for (int t = 0; t < P * n; ++t)
        for (int hh = 0; hh < Hp; ++hh)
          for (int e = 0; e < d; ++e)
            ASSERT_EQ(y[r][((std::size_t(bi) * P * n + t) * Hp + hh) * d + e],
                      X[((std::size_t(bi) * P * n + t) * H + r * Hp + hh) * d + e]);
  }
  // Reverse path: pack_reverse, all-to-all, unpack_reverse returns each rank's sequence block.
  std::vector<std::vector<float>> send2(P, std::vector<float>(kAwkward.size()));
  for (int r = 0; r < P; ++r) ref::ulysses_pack_reverse(P, b, n, H, d, y[r].data(), send2[r].data());
  auto recv2 = all_to_all(send2);
  for (int r = 0; r < P; ++r) {
    std::vector<float> xr(kAwkward.size());
    ref::ulysses_unpack_reverse(P, b, n, H, d, recv2[r].data(), xr.data());
    for (int bi = 0; bi < b; ++bi)
      for (std::size_t e = 0; e < std::size_t(n) * H * d; ++e)
        ASSERT_EQ(xr[std::size_t(bi) * n * H * d + e], X[(std::size_t(bi) * P * n + r * n) * H * d + e]);
  }
}

TEST(ReshardRef, FusedQkvEqualsSeparatePacks) {
  const int P = 2, b = 2, n = 3, H = 6, KH = 4, d = 2;
  const std::size_t nq = std::size_t(b) * n * H * d, nk = std::size_t(b) * n * KH * d;
  auto q = test::random_vector(nq, 4), k = test::random_vector(nk, 5), v = test::random_vector(nk, 6);
  std::vector<float> sq(nq), sk(nk), sv(nk), fused(nq + 2 * nk);
  ref::ulysses_pack(P, b, n, H, d, q.data(), sq.data());
  ref::ulysses_pack(P, b, n, KH, d, k.data(), sk.data());
  ref::ulysses_pack(P, b, n, KH, d, v.data(), sv.data());
  ref::ulysses_pack_qkv(P, b, n, H, KH, d, q.data(), k.data(), v.data(), fused.data());
  const std::size_t cq = nq / P, ck = nk / P, chunk = cq + 2 * ck;
  for (int p = 0; p < P; ++p) {
    EXPECT_TRUE(std::equal(&sq[p * cq], &sq[p * cq] + cq, &fused[p * chunk]));
    EXPECT_TRUE(std::equal(&sk[p * ck], &sk[p * ck] + ck, &fused[p * chunk + cq]));
    EXPECT_TRUE(std::equal(&sv[p * ck], &sv[p * ck] + ck, &fused[p * chunk + cq + ck]));
  }
  // Unpacking a fused receive buffer equals unpacking its three parts separately.
  std::vector<float> rq(nq), rk(nk), rv(nk);
  for (int p = 0; p < P; ++p) {
    std::copy_n(&fused[p * chunk], cq, &rq[p * cq]);
    std::copy_n(&fused[p * chunk + cq], ck, &rk[p * ck]);
    std::copy_n(&fused[p * chunk + cq + ck], ck, &rv[p * ck]);
  }
  std::vector<float> yq(nq), yk(nk), yv(nk), wq(nq), wk(nk), wv(nk);
  ref::ulysses_unpack_qkv(P, b, n, H, KH, d, fused.data(), yq.data(), yk.data(), yv.data());
  ref::ulysses_unpack(P, b, n, H, d, rq.data(), wq.data());
  ref::ulysses_unpack(P, b, n, KH, d, rk.data(), wk.data());
  ref::ulysses_unpack(P, b, n, KH, d, rv.data(), wv.data());
  EXPECT_EQ(yq, wq);
  EXPECT_EQ(yk, wk);
  EXPECT_EQ(yv, wv);
}

// The fused backward (dq, dk, dv) equals the three separate reverses on the three parts of the fused buffer
// and inverts the fused forward: kv_heads split over P, and GQA with kv_heads < P replicated up to P first.
struct QkvDims {
  int P, b, n, heads, kv_heads, d, rep;  // rep: KV-head replication before the reshard (1 = none)
};
std::ostream& operator<<(std::ostream& os, const QkvDims& x) {
  return os << "P" << x.P << " b" << x.b << " n" << x.n << " h" << x.heads << "/" << x.kv_heads << "x" << x.rep
            << " d" << x.d;
}

class ReshardQkvReverse : public ::testing::TestWithParam<QkvDims> {};

TEST_P(ReshardQkvReverse, EqualsSeparateReversesAndInvertsTheForward) {
  const auto [P, b, n, H, KH0, d, rep] = GetParam();
  const int KH = KH0 * rep;  // kv heads as resharded
  const std::size_t nq = std::size_t(b) * n * H * d, nk = std::size_t(b) * n * KH * d, nk0 = nk / rep;
  const std::size_t cq = nq / P, ck = nk / P, chunk = cq + 2 * ck;
  auto q = test::random_vector(nq, 11), k0 = test::random_vector(nk0, 12), v0 = test::random_vector(nk0, 13);
  std::vector<float> k(nk), v(nk);
  ref::replicate_kv_heads(rep, b, n, KH0, d, k0.data(), k.data());
  ref::replicate_kv_heads(rep, b, n, KH0, d, v0.data(), v.data());

  // Head-sharded gradients [b, P*n, heads/P, d] (same element counts as the sequence shards).
  auto gq = test::random_vector(nq, 14), gk = test::random_vector(nk, 15), gv = test::random_vector(nk, 16);
  std::vector<float> fused(nq + 2 * nk), sq(nq), sk(nk), sv(nk);
  ref::ulysses_pack_qkv_reverse(P, b, n, H, KH, d, gq.data(), gk.data(), gv.data(), fused.data());
  ref::ulysses_pack_reverse(P, b, n, H, d, gq.data(), sq.data());
  ref::ulysses_pack_reverse(P, b, n, KH, d, gk.data(), sk.data());
  ref::ulysses_pack_reverse(P, b, n, KH, d, gv.data(), sv.data());
  for (int p = 0; p < P; ++p) {
    EXPECT_TRUE(std::equal(&sq[p * cq], &sq[p * cq] + cq, &fused[p * chunk])) << "dq chunk " << p;
    EXPECT_TRUE(std::equal(&sk[p * ck], &sk[p * ck] + ck, &fused[p * chunk + cq])) << "dk chunk " << p;
    EXPECT_TRUE(std::equal(&sv[p * ck], &sv[p * ck] + ck, &fused[p * chunk + cq + ck])) << "dv chunk " << p;
  }
  // Unpacking the fused buffer (read as received) equals unpacking its three parts separately.
  std::vector<float> xq(nq), xk(nk), xv(nk), wq(nq), wk(nk), wv(nk);
  ref::ulysses_unpack_qkv_reverse(P, b, n, H, KH, d, fused.data(), xq.data(), xk.data(), xv.data());
  ref::ulysses_unpack_reverse(P, b, n, H, d, sq.data(), wq.data());
  ref::ulysses_unpack_reverse(P, b, n, KH, d, sk.data(), wk.data());
  ref::ulysses_unpack_reverse(P, b, n, KH, d, sv.data(), wv.data());
  EXPECT_EQ(xq, wq);
  EXPECT_EQ(xk, wk);
  EXPECT_EQ(xv, wv);

  // Inverses: unpack_qkv_reverse(pack_qkv(q, k, v)) gives q, k, v back (replicas included), and
  // pack_qkv_reverse(unpack_qkv(buffer)) gives the buffer back.
  std::vector<float> send(nq + 2 * nk), back(nq + 2 * nk), yq(nq), yk(nk), yv(nk);
  ref::ulysses_pack_qkv(P, b, n, H, KH, d, q.data(), k.data(), v.data(), send.data());
  ref::ulysses_unpack_qkv_reverse(P, b, n, H, KH, d, send.data(), yq.data(), yk.data(), yv.data());
  EXPECT_EQ(yq, q);
  EXPECT_EQ(yk, k);
  EXPECT_EQ(yv, v);
  if (rep > 1) {  // the replicas' gradients, back on the sequence shard, sum to rep * the original
    std::vector<float> dk0(nk0);
    ref::reduce_kv_heads(rep, b, n, KH0, d, yk.data(), dk0.data());
    for (std::size_t i = 0; i < nk0; ++i) ASSERT_FLOAT_EQ(dk0[i], float(rep) * k0[i]) << i;
  }
  ref::ulysses_unpack_qkv(P, b, n, H, KH, d, send.data(), yq.data(), yk.data(), yv.data());
  ref::ulysses_pack_qkv_reverse(P, b, n, H, KH, d, yq.data(), yk.data(), yv.data(), back.data());
  EXPECT_EQ(back, send);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReshardQkvReverse,
                         ::testing::Values(QkvDims{2, 2, 3, 6, 4, 2, 1},    // kv_heads % P == 0
                                           QkvDims{3, 2, 5, 6, 3, 3, 1},    // odd sizes, MHA-like
                                           QkvDims{4, 1, 3, 8, 2, 5, 2},    // GQA: 2 kv heads replicated to 4
                                           QkvDims{4, 2, 2, 4, 1, 3, 4}));  // MQA: 1 kv head replicated to 4

TEST(ReshardRef, ReplicateKvHeadsHandCase) {
  // kv [b=1, n=2, kv_heads=2, d=1] -> rep 2: heads (a a b b) per token.
  std::vector<float> kv{1, 2, 3, 4}, out(8), back(4);
  ref::replicate_kv_heads(2, 1, 2, 2, 1, kv.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4}));
  ref::reduce_kv_heads(2, 1, 2, 2, 1, out.data(), back.data());
  EXPECT_EQ(back, (std::vector<float>{2, 4, 6, 8}));
}

TEST(ReshardRef, ReduceIsTheAdjointOfReplicate) {
  const int rep = 4, b = 2, n = 3, KH = 2, d = 5;
  const std::size_t nx = std::size_t(b) * n * KH * d;
  auto x = test::random_vector<float>(nx, 7), y = test::random_vector<float>(nx * rep, 8);
  std::vector<float> rx(nx * rep), ry(nx);
  ref::replicate_kv_heads(rep, b, n, KH, d, x.data(), rx.data());
  ref::reduce_kv_heads(rep, b, n, KH, d, y.data(), ry.data());
  double lhs = 0, rhs = 0;  // <reduce(y), x> == <y, replicate(x)>
  for (std::size_t i = 0; i < nx; ++i) lhs += double(ry[i]) * x[i];
  for (std::size_t i = 0; i < rx.size(); ++i) rhs += double(y[i]) * rx[i];
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::abs(rhs) + 1e-6);
}

TEST(ReshardRef, BadArgumentsThrowNamingTheRule) {
  std::vector<float> buf(256);
  try {
    ref::ulysses_pack(4, 1, 2, 6, 2, buf.data(), buf.data());
    FAIL() << "expected seqpar::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("divisible"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ref::ulysses_unpack(2, 0, 2, 4, 2, buf.data(), buf.data()), Error);
  EXPECT_THROW(ref::ulysses_pack_qkv(2, 1, 2, 4, 1, 2, buf.data(), buf.data(), buf.data(), buf.data()), Error);
  EXPECT_THROW(ref::ulysses_unpack_qkv_reverse(2, 1, 2, 4, 1, 2, buf.data(), buf.data(), buf.data(), buf.data()),
               Error);
  EXPECT_THROW(ref::replicate_kv_heads(0, 1, 1, 1, 1, buf.data(), buf.data()), Error);
}

}  // namespace
}  // namespace seqpar
