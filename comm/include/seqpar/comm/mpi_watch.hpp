// Watched completion of non-blocking MPI calls: every blocking communication of the MPI paths
// (the MPI communicator, the NCCL bootstrap, the benchmark drivers' world reductions, the start-up
// option check) is posted non-blocking and completed here, polling against the watchdog's
// deadline, so a frozen peer aborts the job with a message instead of hanging it.
#pragma once
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

namespace seqpar::comm::detail {

// This process's rank in MPI_COMM_WORLD.
int mpi_world_rank();
// World ranks of the members of comm, in comm's rank order.
std::vector<int> mpi_world_ranks(MPI_Comm comm);
// "world ranks [0, 2]" or "the world (4 ranks)".
std::string mpi_group_text(MPI_Comm comm);

// The test hook of watchdog.hpp at this process's world rank.
void mpi_stall_point();

// Completes the n requests. On an MPI error: seqpar::Error naming `what`. When the watchdog's
// deadline passes first: prints timeout_message for this world rank and what(done) (done[i]: request
// i completed, to tell which peer of a send/recv is missing) and calls MPI_Abort(MPI_COMM_WORLD, 3).
void mpi_wait_watched(int n, MPI_Request* reqs,
                      const std::function<std::string(const std::vector<bool>& done)>& what);
// The same for one request whose description needs no per-request detail.
void mpi_wait_watched(MPI_Request& req, const std::string& what);

}  // namespace seqpar::comm::detail
