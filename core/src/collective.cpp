#include "seqpar/core/collective.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"

namespace seqpar {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::all_to_all: return "alltoall";
    case Collective::send_recv: return "sendrecv";
    case Collective::all_gather: return "allgather";
    case Collective::reduce_scatter: return "reducescatter";
    case Collective::all_reduce: return "allreduce";
  }
  return "?";
}

Collective parse_collective(std::string_view text, std::string_view field) {
  for (Collective c : all_collectives)
    if (text == to_string(c)) return c;
  throw Error(fmt::format(
      "{}: unknown collective '{}'; expected alltoall, sendrecv, allgather, reducescatter or allreduce", field,
      text));
}

double bus_factor(Collective c, int n) {
  if (n <= 1) return c == Collective::send_recv ? 1.0 : 0.0;
  switch (c) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::send_recv: return 1.0;
    case Collective::all_to_all:
    case Collective::all_gather:
    case Collective::reduce_scatter: return double(n - 1) / n;
  }
  return 0.0;
}

}  // namespace seqpar
