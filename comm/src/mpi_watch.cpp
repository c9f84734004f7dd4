#include "seqpar/comm/mpi_watch.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "seqpar/comm/mpi_check.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm::detail {

int mpi_world_rank() {
  int r = 0;
  SEQPAR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}

std::vector<int> mpi_world_ranks(MPI_Comm comm) {
  int n = 0;
  SEQPAR_MPI_CHECK(MPI_Comm_size(comm, &n));
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  SEQPAR_MPI_CHECK(MPI_Comm_group(comm, &group));
  SEQPAR_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> local(static_cast<std::size_t>(n)), global(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) local[static_cast<std::size_t>(i)] = i;
  const int rc = MPI_Group_translate_ranks(group, n, local.data(), world, global.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  SEQPAR_MPI_CHECK(rc);
  return global;
}

std::string mpi_group_text(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) {
    int n = 0;
    MPI_Comm_size(comm, &n);
    return fmt::format("the world ({} ranks)", n);
  }
  try {
    return fmt::format("world ranks [{}]", fmt::join(mpi_world_ranks(comm), ", "));
  } catch (const Error&) {
    return "a subgroup";
  }
}

void mpi_stall_point() { test_stall_point(mpi_world_rank()); }

void mpi_wait_watched(int n, MPI_Request* reqs,
                      const std::function<std::string(const std::vector<bool>& done)>& what) {
  const Deadline deadline;
  PollBackoff backoff;
  for (;;) {
    int flag = 0;
    const int rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      throw Error(fmt::format("MPI error while completing {}: {}", what(std::vector<bool>(
                                                                      static_cast<std::size_t>(n))),
                              mpi_error_string(rc)));
    if (flag) return;
    if (deadline.expired()) break;
    backoff.pause();
  }
  // Which requests did finish: a completed one becomes MPI_REQUEST_NULL, the job ends anyway.
  std::vector<bool> done(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    int f = 0;
    MPI_Test(&reqs[i], &f, MPI_STATUS_IGNORE);
    done[static_cast<std::size_t>(i)] = f != 0;
  }
  const std::string msg = timeout_message(fmt::format("rank {}", mpi_world_rank()), what(done),
                                          deadline.limit_s());
  std::fprintf(stderr, "seqpar: %s; aborting the job\n", msg.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  throw Error(msg);  // not reached: MPI_Abort ends the process
}

void mpi_wait_watched(MPI_Request& req, const std::string& what) {
  mpi_wait_watched(1, &req, [&](const std::vector<bool>&) { return what; });
}

}  // namespace seqpar::comm::detail
