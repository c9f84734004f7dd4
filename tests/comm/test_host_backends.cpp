// Virtual ranks (threads of one process) and the loopback proxy against the single-process
// reference; GPU variants skip themselves without a device.
#include <gtest/gtest.h>

#include <thread>

#include "reference.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/comm/element.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm::test {
namespace {

// Runs fn(comm) on one thread per virtual rank.
template <class Fn>
void on_virtual_world(int P, Fn fn) {
  auto comms = make_virtual_world(P, false);
  std::vector<std::thread> threads;
  for (auto& c : comms) threads.emplace_back([&fn, &c] { fn(*c); });
  for (auto& t : threads) t.join();
}

std::vector<int> iota_ranks(int P) {
  std::vector<int> v(static_cast<std::size_t>(P));
  for (int i = 0; i < P; ++i) v[i] = i;
  return v;
}

class VirtualRanks : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(VirtualRanks, CollectivesMatchReference) {
  auto [P, dt] = GetParam();
  on_virtual_world(P, [P = P, dt = dt](Communicator& c) {
    EXPECT_EQ(c.backend(), Backend::virtual_ranks);
    expect_collectives_match(c, iota_ranks(P), P, dt, 5);
  });
}

TEST_P(VirtualRanks, RingRotationMatchesReference) {
  auto [P, dt] = GetParam();
  on_virtual_world(P, [dt = dt](Communicator& c) { expect_ring_rotation_matches(c, dt, 7); });
}

INSTANTIATE_TEST_SUITE_P(Host, VirtualRanks,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(DType::fp32, DType::bf16,
                                                              DType::fp16, DType::i64,
                                                              DType::u8)),
                         [](const auto& p) {
                           return "P" + std::to_string(std::get<0>(p.param)) + "_" +
                                  std::string(to_string(std::get<1>(p.param)));
                         });

TEST(VirtualRanksGroups, HybridAndDataParallelGroupsMatchReference) {
  on_virtual_world(8, [](Communicator& c) { expect_groups_match(c, 2, 2, DType::fp32); });
  on_virtual_world(6, [](Communicator& c) { expect_groups_match(c, 3, 1, DType::bf16); });
}

TEST(VirtualRanksGroups, DegreesThatDoNotDivideAreRejectedOnEveryRank) {
  std::atomic<int> errors{0};
  on_virtual_world(6, [&](Communicator& c) {
    try {
      make_groups(c, 2, 2);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not divide the 6 ranks"), std::string::npos);
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 6);
}

TEST(VirtualRanksGroups, MismatchedOperationsFailOnEveryRankInsteadOfHanging) {
  std::atomic<int> errors{0};
  on_virtual_world(2, [&](Communicator& c) {
    float buf[4] = {};
    try {
      if (c.rank() == 0)
        c.all_reduce(buf, buf, 2, DType::fp32);
      else
        c.all_reduce(buf, buf, 3, DType::fp32);
    } catch (const Error&) {
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

TEST(VirtualRanksGpu, CollectivesAndRingMatchReferenceOnDevice) {
  std::string why;
  if (!comm::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  auto comms = make_virtual_world(4, true);
  std::vector<std::thread> threads;
  for (auto& c : comms)
    threads.emplace_back([&c] {
      EXPECT_TRUE(c->device_memory());
      expect_collectives_match(*c, iota_ranks(4), 4, DType::bf16, 5);
      expect_ring_rotation_matches(*c, DType::fp32, 7);
    });
  for (auto& t : threads) t.join();
}

TEST(LoopbackGpu, MovesBytesOnDevice) {
  std::string why;
  if (!comm::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  auto c = make_loopback(1, 0, true);
  expect_collectives_match(*c, {0}, 1, DType::fp32, 9);
}

TEST(Loopback, MovesRankZerosBytes) {
  auto c = make_loopback(4, 1);
  EXPECT_EQ(c->size(), 4);
  EXPECT_EQ(c->rank(), 1);
  EXPECT_EQ(c->backend(), Backend::loopback);
  const std::size_t count = 3, n = 4 * count;
  std::vector<double> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<double>(i) + 1;
  auto send = encode(in, DType::fp32);

  std::vector<unsigned char> recv(n * 4, 0);
  c->all_to_all(send.data(), recv.data(), count, DType::fp32);
  EXPECT_EQ(decode(recv, DType::fp32), in);

  std::vector<unsigned char> part(count * 4, 0);
  c->reduce_scatter(send.data(), part.data(), count, DType::fp32);
  EXPECT_EQ(decode(part, DType::fp32), (std::vector<double>{4, 5, 6}));  // rank 1's chunk

  std::fill(recv.begin(), recv.end(), 0);
  c->all_gather(part.data(), recv.data(), count, DType::fp32);
  for (int p = 0; p < 4; ++p)
    for (std::size_t j = 0; j < count; ++j)
      EXPECT_EQ(load(recv.data(), p * count + j, DType::fp32), 4.0 + static_cast<double>(j));

  std::fill(recv.begin(), recv.end(), 0);
  Request r = c->send_recv_async(send.data(), 2, recv.data(), 0, n, DType::fp32);
  c->wait(r);
  EXPECT_EQ(decode(recv, DType::fp32), in);

  auto sub = c->subgroup(std::vector<int>{1, 3});
  EXPECT_EQ(sub->size(), 2);
  EXPECT_EQ(sub->rank(), 0);
  Groups g = make_groups(*c, 2, 1);
  EXPECT_EQ(g.ulysses->size(), 2);
  EXPECT_EQ(g.ulysses->rank(), 1);
  EXPECT_EQ(g.dp->size(), 2);
  EXPECT_EQ(g.dp->rank(), 0);
}

TEST(Loopback, RejectsBadArguments) {
  EXPECT_THROW(make_loopback(0), Error);
  EXPECT_THROW(make_loopback(4, 4), Error);
  auto c = make_loopback(4, 0);
  float x = 0;
  EXPECT_THROW(c->send_recv_async(&x, 4, &x, 0, 1, DType::fp32), Error);
  EXPECT_THROW(c->subgroup(std::vector<int>{1, 2}), Error);  // rank 0 not a member
  EXPECT_THROW(c->subgroup(std::vector<int>{2, 0}), Error);  // not ascending
  EXPECT_THROW(make_groups(*c, 3, 1), Error);
}

TEST(Element, Bf16AndF16RoundToNearestEven) {
  unsigned char b[2];
  store(b, 0, DType::bf16, 257.0);  // halfway between 256 and 258 -> even mantissa (256)
  EXPECT_EQ(load(b, 0, DType::bf16), 256.0);
  store(b, 0, DType::bf16, 259.0);
  EXPECT_EQ(load(b, 0, DType::bf16), 260.0);
  store(b, 0, DType::fp16, 2049.0);
  EXPECT_EQ(load(b, 0, DType::fp16), 2048.0);
  store(b, 0, DType::fp16, -0.5);
  EXPECT_EQ(load(b, 0, DType::fp16), -0.5);
}

}  // namespace
}  // namespace seqpar::comm::test
