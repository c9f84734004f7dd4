// The MPI back end under mpirun (2 and 4 ranks in CI), and the NCCL back end with the ranks at
// hand when a GPU is present: each against the single-process reference.
#include <gtest/gtest.h>
#include <mpi.h>

#include "reference.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/comm/same_options.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm::test {
namespace {

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::vector<int> all_ranks(int P) {
  std::vector<int> v(static_cast<std::size_t>(P));
  for (int i = 0; i < P; ++i) v[i] = i;
  return v;
}

class MpiWorld : public ::testing::TestWithParam<DType> {};

TEST_P(MpiWorld, CollectivesMatchReference) {
  auto c = make_mpi_world();
  EXPECT_EQ(c->backend(), Backend::mpi);
  expect_collectives_match(*c, all_ranks(c->size()), c->size(), GetParam(), 6);
}

TEST_P(MpiWorld, RingRotationMatchesReference) {
  auto c = make_mpi_world();
  expect_ring_rotation_matches(*c, GetParam(), 33);
}

INSTANTIATE_TEST_SUITE_P(Host, MpiWorld,
                         ::testing::Values(DType::fp32, DType::fp64, DType::bf16, DType::fp16,
                                           DType::i32, DType::u8),
                         [](const auto& p) { return std::string(to_string(p.param)); });

TEST(MpiGroups, SubgroupCollectivesMatchReference) {
  auto c = make_mpi_world();
  const int W = c->size();
  // Every split of the world the layout allows: Ulysses only, ring only, and the hybrid.
  for (int u = 1; u <= W; ++u)
    for (int r = 1; u * r <= W; ++r)
      if (W % (u * r) == 0) {
        SCOPED_TRACE(::testing::Message() << "ulysses " << u << " ring " << r);
        expect_groups_match(*c, u, r, DType::fp32);
      }
}

TEST(MpiGroups, DegreesThatDoNotDivideAreRejected) {
  auto c = make_mpi_world();
  const int W = c->size();
  try {
    make_groups(*c, W + 1, 1);
    FAIL() << "expected seqpar::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide"), std::string::npos) << e.what();
  }
}

TEST(MpiWorld, BadPeerIsAnError) {
  auto c = make_mpi_world();
  float x = 0;
  EXPECT_THROW(c->send_recv_async(&x, c->size(), &x, 0, 1, DType::fp32), Error);
}

TEST(MpiSameOptions, EqualOptionsPass) {
  EXPECT_NO_THROW(verify_same_options({{"--seq-len", 4096}, {"--method", "ring"}}));
}

TEST(MpiSameOptions, EveryRankNamesTheFirstDifferenceWithBothValues) {
  const int W = world_size();
  if (W < 2) GTEST_SKIP() << "needs 2 or more ranks";
  const int rank = world_rank();
  // The last rank differs in --seq-len and in --steps; --seq-len sorts first, so it is named.
  const bool odd = rank == W - 1;
  const nlohmann::json mine = {{"--steps", odd ? 7 : 5}, {"--seq-len", odd ? 2048 : 4096}};
  try {
    verify_same_options(mine);
    FAIL() << "rank " << rank << ": the difference went unnoticed";
  } catch (const Error& e) {
    const std::string expected = "--seq-len is 4096 on rank 0 but 2048 on rank " + std::to_string(W - 1);
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(Nccl, CollectivesAndRingMatchReference) {
  std::string why;
  if (!backend_available(Backend::nccl, &why)) GTEST_SKIP() << why;
  if (!comm::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  int ranks = 0;
  ASSERT_EQ(MPI_Comm_size(MPI_COMM_WORLD, &ranks), MPI_SUCCESS);
  const int gpus = comm::environment_info()["gpu_count"].get<int>();
  // NCCL refuses two ranks on one GPU; the decision is the same on every rank.
  if (ranks > gpus) GTEST_SKIP() << ranks << " ranks but " << gpus << " GPUs";
  auto c = make_nccl_world();
  EXPECT_TRUE(c->device_memory());
  expect_collectives_match(*c, all_ranks(c->size()), c->size(), DType::bf16, 6);
  expect_ring_rotation_matches(*c, DType::fp32, 33);
  Groups g = make_groups(*c, 1, c->size());
  EXPECT_EQ(g.ring->size(), c->size());
}

}  // namespace
}  // namespace seqpar::comm::test
