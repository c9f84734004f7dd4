// GoogleTest main for the MPI multi-rank suites: every rank runs every test, only rank 0
// prints the full log (other ranks print failures only), and a failure on any rank fails all.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "seqpar/comm/communicator.hpp"

int main(int argc, char** argv) {
  seqpar::comm::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.world_rank() != 0) GTEST_FLAG_SET(brief, true);
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  if (MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
    any_failed = 1;
  if (any_failed && mpi.world_rank() == 0)
    std::fprintf(stderr, "FAILED on at least one of %d ranks\n", mpi.world_size());
  return any_failed;
}
