// CPU reference of attention: hand-computed cases, blocks + LSE merge == whole (contiguous and zigzag
// splits), GQA == replicated KV heads, backward against finite differences and over blocks; the same
// under a sliding window.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/kernels/reshard_ref.hpp"
#include "test_util.hpp"

namespace seqpar {
namespace {

using ref::AttentionShape;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::size_t q_size(const AttentionShape& s) { return std::size_t(s.batch) * s.seq_q * s.heads * s.head_dim; }
std::size_t kv_size(const AttentionShape& s) { return std::size_t(s.batch) * s.seq_k * s.kv_heads * s.head_dim; }
std::size_t lse_size(const AttentionShape& s) { return std::size_t(s.batch) * s.heads * s.seq_q; }

TEST(AttentionRef, OneQueryTwoKeysHandComputed) {
  AttentionShape s{.batch = 1, .seq_q = 1, .seq_k = 2, .heads = 1, .kv_heads = 1, .head_dim = 2, .scale = 1.f};
  std::vector<float> q{1, 0}, k{1, 0, 0, 0}, v{1, 2, 3, 4}, o(2), lse(1);
  ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  const double e = std::exp(1.0), p0 = e / (e + 1), p1 = 1 / (e + 1);
  EXPECT_NEAR(o[0], p0 * 1 + p1 * 3, 1e-6);
  EXPECT_NEAR(o[1], p0 * 2 + p1 * 4, 1e-6);
  EXPECT_NEAR(lse[0], std::log(e + 1), 1e-6);
}

TEST(AttentionRef, DefaultScaleIsOneOverSqrtHeadDim) {
  AttentionShape s{.batch = 1, .seq_q = 1, .seq_k = 2, .heads = 1, .kv_heads = 1, .head_dim = 4};
  std::vector<float> q{1, 1, 1, 1}, k{1, 1, 1, 1, 0, 0, 0, 0}, v{1, 0, 0, 0, 0, 1, 0, 0}, o(4), lse(1);
  ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  const double e2 = std::exp(2.0);  // score 4 * (1/sqrt(4)) = 2 against 0
  EXPECT_NEAR(o[0], e2 / (e2 + 1), 1e-6);
  EXPECT_NEAR(o[1], 1 / (e2 + 1), 1e-6);
  EXPECT_NEAR(lse[0], std::log(e2 + 1), 1e-6);
}

TEST(AttentionRef, CausalOffsetsAndRowsThatSeeNoKey) {
  // Queries at global 10, 11; keys at global 11, 12, 13: row 0 sees none, row 1 sees key 0 only.
  AttentionShape s{.batch = 1, .seq_q = 2, .seq_k = 3, .heads = 1, .kv_heads = 1, .head_dim = 2,
                   .causal = true, .q_offset = 10, .k_offset = 11, .scale = 1.f};
  std::vector<float> q{1, 2, 3, 4}, k{1, 1, 2, 2, 3, 3}, v{5, 6, 7, 8, 9, 10}, o(4, 99.f), lse(2, 99.f);
  ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  EXPECT_EQ(o[0], 0.f);
  EXPECT_EQ(o[1], 0.f);
  EXPECT_EQ(lse[0], -kInf);
  EXPECT_NEAR(o[2], 5, 1e-6);
  EXPECT_NEAR(o[3], 6, 1e-6);
  EXPECT_NEAR(lse[1], 3 + 4, 1e-5);  // one key: lse = its score
}

// Attention of queries [q_begin, q_end) of the full sequence against keys split into `blocks`
// (each a [begin, end) range), merged by LSE; compared with the rows of the whole computation.
void check_blocks(const AttentionShape& whole, const std::vector<std::pair<int, int>>& q_ranges,
                  const std::vector<std::pair<int, int>>& key_blocks, std::uint32_t seed) {
  const int d = whole.head_dim, H = whole.heads, KH = whole.kv_heads;
  auto q = test::random_vector(q_size(whole), seed), k = test::random_vector(kv_size(whole), seed + 1),
       v = test::random_vector(kv_size(whole), seed + 2);
  std::vector<float> o(q_size(whole)), lse(lse_size(whole));
  ref::attention_forward(whole, q.data(), k.data(), v.data(), o.data(), lse.data());
  for (auto [qb, qe] : q_ranges) {
    const int nq = qe - qb;
    AttentionShape part = whole;
    part.seq_q = nq;
    part.q_offset = whole.q_offset + qb;
    std::vector<float> qp(std::size_t(whole.batch) * nq * H * d);
    for (int b = 0; b < whole.batch; ++b)
      std::copy_n(&q[(std::size_t(b) * whole.seq_q + qb) * H * d], std::size_t(nq) * H * d,
                  &qp[std::size_t(b) * nq * H * d]);
    std::vector<float> acc_o(qp.size(), 0.f), acc_lse(std::size_t(whole.batch) * H * nq, -kInf);
    for (auto [kb, ke] : key_blocks) {
      part.seq_k = ke - kb;
      part.k_offset = whole.k_offset + kb;
      std::vector<float> kp(std::size_t(whole.batch) * part.seq_k * KH * d), vp(kp.size());
      for (int b = 0; b < whole.batch; ++b) {
        std::copy_n(&k[(std::size_t(b) * whole.seq_k + kb) * KH * d], kp.size() / whole.batch,
                    &kp[std::size_t(b) * part.seq_k * KH * d]);
        std::copy_n(&v[(std::size_t(b) * whole.seq_k + kb) * KH * d], vp.size() / whole.batch,
                    &vp[std::size_t(b) * part.seq_k * KH * d]);
      }
      std::vector<float> op(qp.size()), lp(acc_lse.size());
      ref::attention_forward(part, qp.data(), kp.data(), vp.data(), op.data(), lp.data());
      ref::lse_merge(whole.batch, nq, H, d, acc_o.data(), acc_lse.data(), op.data(), lp.data());
    }
    for (int b = 0; b < whole.batch; ++b)
      for (int i = 0; i < nq; ++i)
        for (int h = 0; h < H; ++h) {
          const float want_lse = lse[(std::size_t(b) * H + h) * whole.seq_q + qb + i];
          const float got_lse = acc_lse[(std::size_t(b) * H + h) * nq + i];
          if (std::isinf(want_lse)) EXPECT_EQ(got_lse, want_lse);
          else EXPECT_NEAR(got_lse, want_lse, 1e-5);
          for (int e = 0; e < d; ++e)
            ASSERT_NEAR(acc_o[((std::size_t(b) * nq + i) * H + h) * d + e],
                        o[((std::size_t(b) * whole.seq_q + qb + i) * H + h) * d + e], 1e-5)
                << "b " << b << " row " << qb + i << " head " << h << " e " << e;
        }
  }
}

TEST(AttentionRef, BlocksMergedByLseEqualWhole) {
  AttentionShape s{.batch = 2, .seq_q = 13, .seq_k = 13, .heads = 4, .kv_heads = 2, .head_dim = 8};
  check_blocks(s, {{0, 13}}, {{0, 5}, {5, 9}, {9, 13}}, 1);
  check_blocks(s, {{0, 13}}, {{9, 13}, {0, 5}, {5, 9}}, 2);  // order does not matter
}

TEST(AttentionRef, CausalBlocksWithOffsetsEqualWhole) {
  AttentionShape s{.batch = 2, .seq_q = 13, .seq_k = 13, .heads = 4, .kv_heads = 2, .head_dim = 8, .causal = true};
  // Query blocks as ring ranks hold them, key blocks visited in ring order from each rank.
  check_blocks(s, {{0, 5}, {5, 9}, {9, 13}}, {{5, 9}, {0, 5}, {9, 13}}, 3);
  s.q_offset = 100;  // the whole computation itself offset: same visibility pattern
  s.k_offset = 100;
  check_blocks(s, {{0, 7}, {7, 13}}, {{7, 13}, {0, 7}}, 4);
}

TEST(AttentionRef, ZigzagSplitEqualsWhole) {
  // P = 2 ranks, 2P = 4 chunks of 4 tokens: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2.
  AttentionShape s{.batch = 1, .seq_q = 16, .seq_k = 16, .heads = 2, .kv_heads = 1, .head_dim = 4, .causal = true};
  const std::vector<std::pair<int, int>> rank0{{0, 4}, {12, 16}}, rank1{{4, 8}, {8, 12}};
  check_blocks(s, rank0, {{0, 4}, {12, 16}, {4, 8}, {8, 12}}, 5);
  check_blocks(s, rank1, {{4, 8}, {8, 12}, {0, 4}, {12, 16}}, 6);
}

TEST(AttentionRef, GqaEqualsReplicatedKvHeads) {
  AttentionShape g{.batch = 2, .seq_q = 5, .seq_k = 7, .heads = 6, .kv_heads = 2, .head_dim = 4, .causal = true,
                   .q_offset = 3};
  AttentionShape r = g;
  r.kv_heads = 6;
  const int rep = 3;
  auto q = test::random_vector(q_size(g), 10), k = test::random_vector(kv_size(g), 11),
       v = test::random_vector(kv_size(g), 12), dout = test::random_vector(q_size(g), 13);
  std::vector<float> kr(kv_size(r)), vr(kv_size(r));
  ref::replicate_kv_heads(rep, g.batch, g.seq_k, g.kv_heads, g.head_dim, k.data(), kr.data());
  ref::replicate_kv_heads(rep, g.batch, g.seq_k, g.kv_heads, g.head_dim, v.data(), vr.data());
  std::vector<float> og(q_size(g)), lg(lse_size(g)), orr(q_size(g)), lr(lse_size(g));
  ref::attention_forward(g, q.data(), k.data(), v.data(), og.data(), lg.data());
  ref::attention_forward(r, q.data(), kr.data(), vr.data(), orr.data(), lr.data());
  EXPECT_LE(test::max_abs_diff(og, orr), 1e-6);
  EXPECT_LE(test::max_abs_diff(lg, lr), 1e-6);

  std::vector<float> dqg(q_size(g)), dkg(kv_size(g)), dvg(kv_size(g));
  std::vector<float> dqr(q_size(r)), dkr(kv_size(r)), dvr(kv_size(r)), dk_red(kv_size(g)), dv_red(kv_size(g));
  ref::attention_backward(g, q.data(), k.data(), v.data(), og.data(), lg.data(), dout.data(), dqg.data(),
                          dkg.data(), dvg.data());
  ref::attention_backward(r, q.data(), kr.data(), vr.data(), orr.data(), lr.data(), dout.data(), dqr.data(),
                          dkr.data(), dvr.data());
  ref::reduce_kv_heads(rep, g.batch, g.seq_k, g.kv_heads, g.head_dim, dkr.data(), dk_red.data());
  ref::reduce_kv_heads(rep, g.batch, g.seq_k, g.kv_heads, g.head_dim, dvr.data(), dv_red.data());
  EXPECT_LE(test::max_abs_diff(dqg, dqr), 1e-6);
  EXPECT_LE(test::max_abs_diff(dkg, dk_red), 1e-6);
  EXPECT_LE(test::max_abs_diff(dvg, dv_red), 1e-6);
}

// ---- sliding window (core's in_band: key k is seen by query q iff k <= q and q - k < W) ----

TEST(AttentionRef, WindowOfOneSeesOnlyItself) {
  // W = 1: each row's one key is its own position, p = 1: o = v of that row, lse = its score.
  AttentionShape s{.batch = 1, .seq_q = 3, .seq_k = 3, .heads = 1, .kv_heads = 1, .head_dim = 2,
                   .causal = true, .scale = 1.f, .window = 1};
  std::vector<float> q{1, 2, 3, 4, 5, 6}, k{1, 1, 2, 2, 3, 3}, v{7, 8, 9, 10, 11, 12}, o(6), lse(3);
  ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  EXPECT_EQ(o, (std::vector<float>{7, 8, 9, 10, 11, 12}));
  EXPECT_FLOAT_EQ(lse[0], 1 + 2);       // q0 . k0
  EXPECT_FLOAT_EQ(lse[1], 2 * 3 + 2 * 4);  // q1 . k1
  EXPECT_FLOAT_EQ(lse[2], 3 * 5 + 3 * 6);  // q2 . k2
}

TEST(AttentionRef, WindowOfTwoHandComputed) {
  // Query at global 5 with W = 2 sees keys 4 and 5 only; keys at global 3, 4, 5 (scores 9, 1, 0).
  AttentionShape s{.batch = 1, .seq_q = 1, .seq_k = 3, .heads = 1, .kv_heads = 1, .head_dim = 1,
                   .causal = true, .q_offset = 5, .k_offset = 3, .scale = 1.f, .window = 2};
  std::vector<float> q{1}, k{9, 1, 0}, v{100, 2, 4}, o(1), lse(1);
  ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  const double e = std::exp(1.0);  // softmax over scores 1 and 0: e / (e + 1), 1 / (e + 1)
  EXPECT_NEAR(o[0], (2 * e + 4) / (e + 1), 1e-6);
  EXPECT_NEAR(lse[0], std::log(e + 1), 1e-6);
}

TEST(AttentionRef, BandedBlocksMergedByLseEqualWhole) {
  // W = 3 over 13 tokens: ring blocks of 5, 4, 4 and zigzag chunks of 2 (W divides neither); some
  // (query block, key block) pairs lie wholly outside the band (lse -inf parts, merged as nothing).
  AttentionShape s{.batch = 2, .seq_q = 13, .seq_k = 13, .heads = 4, .kv_heads = 2, .head_dim = 8, .causal = true,
                   .window = 3};
  check_blocks(s, {{0, 5}, {5, 9}, {9, 13}}, {{5, 9}, {0, 5}, {9, 13}}, 40);
  s.seq_q = s.seq_k = 12;
  check_blocks(s, {{0, 2}, {10, 12}}, {{0, 2}, {10, 12}, {2, 4}, {8, 10}, {4, 6}, {6, 8}}, 41);
  s.window = 1;
  check_blocks(s, {{0, 5}, {5, 12}}, {{5, 12}, {0, 5}}, 42);
}

TEST(AttentionRef, WindowOfTheSequenceOrMoreIsCausalBitForBit) {
  AttentionShape c{.batch = 2, .seq_q = 9, .seq_k = 9, .heads = 2, .kv_heads = 1, .head_dim = 4, .causal = true};
  auto q = test::random_vector(q_size(c), 50), k = test::random_vector(kv_size(c), 51),
       v = test::random_vector(kv_size(c), 52), dout = test::random_vector(q_size(c), 53);
  auto run = [&](const AttentionShape& s) {
    std::vector<float> o(q_size(s)), lse(lse_size(s)), dq(q.size()), dk(k.size()), dv(v.size());
    ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
    ref::attention_backward(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                            dv.data());
    return std::vector<std::vector<float>>{o, lse, dq, dk, dv};
  };
  const auto causal = run(c);
  for (std::int64_t w : {9, 10, 1000}) {
    AttentionShape s = c;
    s.window = w;
    EXPECT_EQ(run(s), causal) << "window " << w;
  }
  AttentionShape s = c;
  s.window = 8;  // the last row loses key 0
  EXPECT_NE(run(s), causal);
}

// loss = sum(o * w): dL/do = w, so the backward with dout = w gives the gradients to check.
TEST(AttentionRef, BackwardMatchesFiniteDifferences) {
  for (int window : {-1, 0, 2}) {  // -1: not causal; 0: causal; 2: a causal band
    const bool causal = window >= 0;
    AttentionShape s{.batch = 2, .seq_q = 3, .seq_k = 4, .heads = 2, .kv_heads = 1, .head_dim = 3,
                     .causal = causal, .q_offset = 2, .k_offset = 0, .scale = 0.7f, .window = std::max(window, 0)};
    auto q = test::random_vector<double>(q_size(s), 20), k = test::random_vector<double>(kv_size(s), 21),
         v = test::random_vector<double>(kv_size(s), 22), w = test::random_vector<double>(q_size(s), 23);
    std::vector<double> o(q_size(s)), lse(lse_size(s)), dq(q.size()), dk(k.size()), dv(v.size());
    ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
    ref::attention_backward(s, q.data(), k.data(), v.data(), o.data(), lse.data(), w.data(), dq.data(), dk.data(),
                            dv.data());
    auto loss = [&] {
      std::vector<double> oo(q_size(s)), ll(lse_size(s));
      ref::attention_forward(s, q.data(), k.data(), v.data(), oo.data(), ll.data());
      double sum = 0;
      for (std::size_t i = 0; i < oo.size(); ++i) sum += oo[i] * w[i];
      return sum;
    };
    auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
      const double h = 1e-6;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double keep = x[i];
        x[i] = keep + h;
        const double up = loss();
        x[i] = keep - h;
        const double down = loss();
        x[i] = keep;
        EXPECT_NEAR(grad[i], (up - down) / (2 * h), 1e-7) << name << "[" << i << "] window " << window;
      }
    };
    check(q, dq, "dq");
    check(k, dk, "dk");
    check(v, dv, "dv");
  }
}

// Ring backward: each key block's call, given the FINAL o and lse, yields its dk, dv rows and a partial dq.
TEST(AttentionRef, BackwardOverKeyBlocksWithFinalLseSumsToWhole) {
  AttentionShape s{.batch = 2, .seq_q = 9, .seq_k = 9, .heads = 4, .kv_heads = 2, .head_dim = 4, .causal = true};
  const int d = s.head_dim, KH = s.kv_heads;
  auto q = test::random_vector(q_size(s), 30), k = test::random_vector(kv_size(s), 31),
       v = test::random_vector(kv_size(s), 32), dout = test::random_vector(q_size(s), 33);
  std::vector<float> o(q_size(s)), lse(lse_size(s)), dq(q.size()), dk(k.size()), dv(v.size());
  ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  ref::attention_backward(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                          dv.data());
  std::vector<float> dq_sum(q.size(), 0.f);
  for (auto [kb, ke] : std::vector<std::pair<int, int>>{{0, 4}, {4, 9}}) {
    AttentionShape part = s;
    part.seq_k = ke - kb;
    part.k_offset = kb;
    const std::size_t per_batch = std::size_t(part.seq_k) * KH * d;
    std::vector<float> kp(s.batch * per_batch), vp(kp.size()), dqp(q.size()), dkp(kp.size()), dvp(kp.size());
    for (int b = 0; b < s.batch; ++b) {
      std::copy_n(&k[(std::size_t(b) * s.seq_k + kb) * KH * d], per_batch, &kp[b * per_batch]);
      std::copy_n(&v[(std::size_t(b) * s.seq_k + kb) * KH * d], per_batch, &vp[b * per_batch]);
    }
    ref::attention_backward(part, q.data(), kp.data(), vp.data(), o.data(), lse.data(), dout.data(), dqp.data(),
                            dkp.data(), dvp.data());
    for (std::size_t i = 0; i < dq.size(); ++i) dq_sum[i] += dqp[i];
    for (int b = 0; b < s.batch; ++b)
      for (std::size_t e = 0; e < per_batch; ++e) {
        ASSERT_NEAR(dkp[b * per_batch + e], dk[(std::size_t(b) * s.seq_k + kb) * KH * d + e], 1e-5);
        ASSERT_NEAR(dvp[b * per_batch + e], dv[(std::size_t(b) * s.seq_k + kb) * KH * d + e], 1e-5);
      }
  }
  EXPECT_LE(test::max_abs_diff(dq_sum, dq), 1e-5);
}

TEST(AttentionRef, MergeIntoNothingCopiesAndEmptyPartChangesNothing) {
  std::vector<float> o{0, 0, 7, 8}, lse{-kInf, 1.5f}, part{1, 2, 3, 4}, part_lse{0.5f, -kInf};
  ref::lse_merge(1, 2, 1, 2, o.data(), lse.data(), part.data(), part_lse.data());
  EXPECT_EQ(o, (std::vector<float>{1, 2, 7, 8}));
  EXPECT_EQ(lse, (std::vector<float>{0.5f, 1.5f}));
  // Two equal halves: lse grows by log 2, o is the mean.
  std::vector<float> o2{2, 4}, l2{1.f}, p2{4, 0}, pl2{1.f};
  ref::lse_merge(1, 1, 1, 2, o2.data(), l2.data(), p2.data(), pl2.data());
  EXPECT_NEAR(o2[0], 3, 1e-6);
  EXPECT_NEAR(o2[1], 2, 1e-6);
  EXPECT_NEAR(l2[0], 1 + std::log(2.0), 1e-6);
}

TEST(AttentionRef, BadShapesThrowNamingTheField) {
  std::vector<float> buf(64);
  AttentionShape s{.batch = 1, .seq_q = 2, .seq_k = 2, .heads = 3, .kv_heads = 2, .head_dim = 4};
  try {
    ref::attention_forward(s, buf.data(), buf.data(), buf.data(), buf.data(), buf.data());
    FAIL() << "expected seqpar::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_heads"), std::string::npos) << e.what();
  }
  s.kv_heads = 3;
  s.seq_k = 0;
  EXPECT_THROW(ref::attention_forward(s, buf.data(), buf.data(), buf.data(), buf.data(), buf.data()), Error);
  EXPECT_THROW(ref::lse_merge(0, 1, 1, 1, buf.data(), buf.data(), buf.data(), buf.data()), Error);
  s.seq_k = 2;
  for (const auto& [window, causal, what] : {std::tuple{std::int64_t{-1}, true, "must be >= 0"},
                                             std::tuple{std::int64_t{4}, false, "needs causal"}}) {
    s.window = window;
    s.causal = causal;
    try {
      ref::attention_forward(s, buf.data(), buf.data(), buf.data(), buf.data(), buf.data());
      ADD_FAILURE() << "window " << window << ": expected seqpar::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace seqpar
