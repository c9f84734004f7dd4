// Builds without MPI: the MPI and NCCL factories explain why they cannot start.
#include "seqpar/comm/communicator.hpp"
#include "seqpar/common/error.hpp"

namespace seqpar::comm {

std::unique_ptr<Communicator> make_mpi_world() {
  throw Error("the MPI back end is not available: seqpar was built without MPI");
}

MpiSession::MpiSession(int*, char***) {
  throw Error("MPI is not available: seqpar was built without MPI");
}

MpiSession::~MpiSession() = default;

}  // namespace seqpar::comm
