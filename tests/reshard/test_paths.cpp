// The full reshard's logic on the host: the Ulysses shape rules, the naive 2-D copies against the CPU
// reference, and the expected results of the data check against direct indexing of the global tensors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "paths.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::bench::reshard_full {
namespace {

std::string shape_error(int P, int b, std::int64_t N, int H, int kv, int d) {
  try {
    make_shape(P, b, N, H, kv, d);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ReshardShape, RulesNameTheOption) {
  EXPECT_NE(shape_error(4, 1, 1001, 8, 8, 16).find("--seq-len 1001 is not divisible by --sp 4"), std::string::npos);
  EXPECT_NE(shape_error(4, 1, 1024, 6, 6, 16).find("--heads 6 is not divisible by --sp 4"), std::string::npos);
  EXPECT_NE(shape_error(4, 1, 1024, 12, 3, 16).find("--kv-heads 3 is neither divisible by --sp 4"),
            std::string::npos);
  EXPECT_NE(shape_error(4, 1, 1024, 8, 3, 16).find("--heads 8 is not divisible by --kv-heads 3"), std::string::npos);
  EXPECT_NE(shape_error(4, 0, 1024, 8, 8, 16).find("--batch 0: must be positive"), std::string::npos);
  EXPECT_NE(shape_error(4, 1, 1024, 8, 8, -1).find("--head-dim -1"), std::string::npos);
}

TEST(ReshardShape, KvHeadsSplitOrReplicated) {
  const Shape split = make_shape(4, 1, 1024, 32, 8, 16);
  EXPECT_EQ(split.rep, 1);
  EXPECT_EQ(split.kv_sent, 8);
  EXPECT_EQ(split.n, 256);
  const Shape replicated = make_shape(8, 1, 1024, 32, 2, 16);
  EXPECT_EQ(replicated.rep, 4);
  EXPECT_EQ(replicated.kv_sent, 8);
}

// Runs a path's pack and unpack with `m`, recv = send (what the loopback proxy does).
std::vector<std::vector<float>> run_local(const Path& p, int path_index, const Shape& s, Mover& m) {
  auto alloc = [](const std::vector<std::size_t>& sizes) {
    std::vector<std::vector<float>> v;
    for (std::size_t n : sizes) v.emplace_back(n, -999.f);
    return v;
  };
  auto in = alloc(p.in), tmp = alloc(p.tmp), send = alloc(p.send), recv = alloc(p.send), out = alloc(p.out);
  for (std::size_t t = 0; t < in.size(); ++t)
    for (std::size_t i = 0; i < in[t].size(); ++i) in[t][i] = fill_value(path_index, int(t), 0, i);
  auto ptrs = [](std::vector<std::vector<float>>& g) {
    std::vector<void*> v;
    for (auto& x : g) v.push_back(x.data());
    return v;
  };
  const Buffers b{ptrs(in), ptrs(tmp), ptrs(send), ptrs(recv), ptrs(out)};
  p.pack(m, s, b);
  recv = send;
  const Buffers b2{ptrs(in), ptrs(tmp), ptrs(send), ptrs(recv), ptrs(out)};
  p.unpack(m, s, b2);
  return out;
}

struct Case {
  int P, batch, N, heads, kv, d;
};
const Case kCases[] = {{1, 1, 8, 4, 2, 4}, {2, 2, 16, 4, 2, 8}, {4, 1, 32, 8, 2, 4}, {4, 2, 16, 8, 8, 4},
                       {8, 1, 64, 8, 1, 2}};

TEST(ReshardPaths, NaiveCopiesMatchTheReference) {
  for (const Case& c : kCases) {
    const Shape s = make_shape(c.P, c.batch, c.N, c.heads, c.kv, c.d);
    const auto ref = make_host_mover(Variant::fused);
    const auto naive = make_host_mover(Variant::naive);
    const auto paths = make_paths(s);
    ASSERT_EQ(paths.size(), 4u);
    for (std::size_t pi = 0; pi < paths.size(); ++pi) {
      EXPECT_EQ(paths[pi].send.size(), 1u) << paths[pi].name << ": one all-to-all per path (q,k,v fused)";
      EXPECT_EQ(run_local(paths[pi], int(pi), s, *ref), run_local(paths[pi], int(pi), s, *naive))
          << paths[pi].name << " P=" << c.P << " kv=" << c.kv;
    }
  }
}

TEST(ReshardPaths, LoopbackExpectationIsTheLocalRoundTrip) {
  const Shape s = make_shape(4, 2, 32, 8, 2, 4);
  const auto ref = make_host_mover(Variant::fused);
  const auto paths = make_paths(s);
  for (std::size_t pi = 0; pi < paths.size(); ++pi)
    EXPECT_EQ(expected_outputs(paths[pi], int(pi), s, 0, true), run_local(paths[pi], int(pi), s, *ref))
        << paths[pi].name;
}

// Independent of the reference: after the forward q,k,v reshard, rank r holds every token of head
// group r, i.e. element (b, t, h, e) comes from rank t / n, local token t % n, head r*H/P + h.
TEST(ReshardPaths, ForwardExpectationIndexesTheGatheredInputs) {
  for (const Case& c : kCases) {
    const Shape s = make_shape(c.P, c.batch, c.N, c.heads, c.kv, c.d);
    const std::vector<Path> paths = make_paths(s);
    const Path& qkv = paths[0];
    const int hq = s.heads / s.P, hk = s.kv_sent / s.P;
    for (int r = 0; r < s.P; ++r) {
      const auto out = expected_outputs(qkv, 0, s, r, false);
      for (int b = 0; b < s.batch; ++b)
        for (int t = 0; t < s.P * s.n; ++t)
          for (int e = 0; e < s.head_dim; ++e) {
            const int src = t / s.n, tok = t % s.n;
            for (int h = 0; h < hq; ++h) {
              const std::size_t i = ((std::size_t(b) * s.n + tok) * s.heads + r * hq + h) * s.head_dim + e;
              const std::size_t o = ((std::size_t(b) * s.P * s.n + t) * hq + h) * s.head_dim + e;
              ASSERT_EQ(out[0][o], fill_value(0, 0, src, i)) << "q P=" << c.P << " rank " << r;
            }
            for (int h = 0; h < hk; ++h) {
              const int kv_head = (r * hk + h) / s.rep;  // replicas of a KV head are consecutive
              const std::size_t i = ((std::size_t(b) * s.n + tok) * s.kv_heads + kv_head) * s.head_dim + e;
              const std::size_t o = ((std::size_t(b) * s.P * s.n + t) * hk + h) * s.head_dim + e;
              ASSERT_EQ(out[1][o], fill_value(0, 1, src, i)) << "k P=" << c.P << " rank " << r;
              ASSERT_EQ(out[2][o], fill_value(0, 2, src, i)) << "v P=" << c.P << " rank " << r;
            }
          }
    }
  }
}

// Backward of the q,k,v reshard: each rank gets back its tokens, all heads; replicated KV heads
// get the sum of their replicas' gradients.
TEST(ReshardPaths, BackwardExpectationSumsReplicas) {
  const Shape s = make_shape(4, 1, 16, 8, 1, 2);  // one KV head replicated 4 times
  const std::vector<Path> paths = make_paths(s);
  const Path& dqkv = paths[3];
  for (int r = 0; r < s.P; ++r) {
    const auto out = expected_outputs(dqkv, 3, s, r, false);
    for (int tok = 0; tok < s.n; ++tok)
      for (int e = 0; e < s.head_dim; ++e) {
        // dk on rank src: [1, N, 1, d]; this rank's tokens start at r*n.
        float sum = 0;
        for (int src = 0; src < s.P; ++src)
          sum += fill_value(3, 1, src, (std::size_t(r) * s.n + tok) * s.head_dim + e);
        ASSERT_EQ(out[1][std::size_t(tok) * s.head_dim + e], sum) << "rank " << r;
      }
  }
}

}  // namespace
}  // namespace seqpar::bench::reshard_full
