// Checked MPI calls: a failure throws seqpar::Error naming the call and MPI's message.
// Communicators must use MPI_ERRORS_RETURN (MpiSession sets it on MPI_COMM_WORLD).
#pragma once
#include <fmt/format.h>
#include <mpi.h>

#include <string>

#include "seqpar/core/error.hpp"

namespace seqpar::comm::detail {

inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("error {}", code);
  return std::string(text, static_cast<std::size_t>(len));
}

}  // namespace seqpar::comm::detail

#define SEQPAR_MPI_CHECK(call)                                                         \
  do {                                                                                 \
    int seqpar_mpi_rc_ = (call);                                                       \
    if (seqpar_mpi_rc_ != MPI_SUCCESS)                                                 \
      throw ::seqpar::Error(fmt::format("MPI error at {}:{}: {} failed: {}", __FILE__, \
                                        __LINE__, #call,                               \
                                        ::seqpar::comm::detail::mpi_error_string(      \
                                            seqpar_mpi_rc_)));                         \
  } while (0)
