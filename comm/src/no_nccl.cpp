// Builds without NCCL (or CUDA, or MPI): the NCCL factory explains why it cannot start.
#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {

std::unique_ptr<Communicator> make_nccl_world() {
  std::string why;
  backend_available(Backend::nccl, &why);
  throw Error("the NCCL back end is not available: " + why);
}

}  // namespace seqpar::comm
