// Names of back ends; the interface's host defaults.
#include <fmt/format.h>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {

std::string_view to_string(Backend b) {
  switch (b) {
    case Backend::mpi: return "mpi";
    case Backend::nccl: return "nccl";
    case Backend::virtual_ranks: return "virtual";
    case Backend::loopback: return "loopback";
  }
  return "?";
}

Backend parse_backend(std::string_view s) {
  for (Backend b : {Backend::mpi, Backend::nccl, Backend::virtual_ranks, Backend::loopback})
    if (to_string(b) == s) return b;
  throw Error(fmt::format("backend '{}' is not known: use mpi, nccl, virtual or loopback", s));
}

Mode measurement_mode(Backend b) {
  switch (b) {
    case Backend::mpi:
    case Backend::nccl: return Mode::real_ranks;
    case Backend::virtual_ranks: return Mode::virtual_ranks;
    case Backend::loopback: return Mode::single_rank_proxy;
  }
  throw Error(fmt::format("backend: enumerator {} has no measurement mode", static_cast<int>(b)));
}

bool backend_available(Backend b, std::string* why) {
  (void)why;  // unused where every back end is built in
  switch (b) {
    case Backend::mpi:
#ifdef SEQPAR_HAVE_MPI
      return true;
#else
      if (why) *why = "seqpar was built without MPI";
      return false;
#endif
    case Backend::nccl:
#if defined(SEQPAR_HAVE_NCCL) && defined(SEQPAR_HAVE_MPI)
      return true;
#else
      if (why) *why = "seqpar was built without NCCL, CUDA or MPI (the NCCL back end needs all three)";
      return false;
#endif
    case Backend::virtual_ranks:
    case Backend::loopback:
      return true;
  }
  return false;
}

void Communicator::set_stream(void* /*cuda_stream*/) {}
void Communicator::synchronize() {}

}  // namespace seqpar::comm
