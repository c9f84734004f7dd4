// Builds without MPI: the MPI and NCCL factories explain why they cannot start; with one process
// there are no other ranks whose options could differ.
#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/same_options.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {

std::unique_ptr<Communicator> make_mpi_world() {
  throw Error("the MPI back end is not available: seqpar was built without MPI");
}

MpiSession::MpiSession(int*, char***) {
  throw Error("MPI is not available: seqpar was built without MPI");
}

MpiSession::~MpiSession() = default;

void verify_same_options(const nlohmann::json& options) { option_values(options); }

std::string report_start_error(const std::string& message) { return message; }

}  // namespace seqpar::comm
