// Argument checks shared by the back ends, so every back end rejects the same misuse with the
// same message.
#pragma once
#include <fmt/format.h>

#include <climits>
#include <cstddef>
#include <span>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm::detail {

inline void check_peer(int peer, int size, const char* what) {
  if (peer < 0 || peer >= size)
    throw Error(fmt::format("{} rank {} is outside the communicator of {} ranks", what, peer, size));
}

// members: ascending, unique, within [0, size), containing rank.
inline void check_members(std::span<const int> members, int rank, int size) {
  if (members.empty()) throw Error("subgroup: the member list is empty");
  bool has_self = false;
  for (std::size_t i = 0; i < members.size(); ++i) {
    check_peer(members[i], size, "subgroup member");
    if (i > 0 && members[i] <= members[i - 1])
      throw Error("subgroup: members must be ascending and unique");
    has_self = has_self || members[i] == rank;
  }
  if (!has_self)
    throw Error(fmt::format("subgroup: rank {} is not among the members it was given", rank));
}

inline int position_of(std::span<const int> members, int rank) {
  for (std::size_t i = 0; i < members.size(); ++i)
    if (members[i] == rank) return static_cast<int>(i);
  return -1;
}

// MPI counts are int: larger messages are refused rather than silently truncated.
inline int mpi_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw Error(fmt::format("{} elements exceed the MPI count limit of {} per call", count, INT_MAX));
  return static_cast<int>(count);
}

}  // namespace seqpar::comm::detail
