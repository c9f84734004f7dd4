// The collectives seqpar models and measures, in nccl-tests terms: one enum, one name each, one
// parser and the nccl-tests bus factor, so a modelled (sim), a measured (comm, bench) and a
// calibrated (reports) busbw mean the same thing. How each collective is shaped, filled, checked
// and run is the comm layer's collective table; this header stays the vocabulary only.
#pragma once
#include <array>
#include <string_view>

namespace seqpar {

enum class Collective { all_to_all, send_recv, all_gather, reduce_scatter, all_reduce };

inline constexpr std::array<Collective, 5> all_collectives{
    Collective::all_to_all, Collective::send_recv, Collective::all_gather, Collective::reduce_scatter,
    Collective::all_reduce};

// The nccl-tests names: "alltoall", "sendrecv", "allgather", "reducescatter", "allreduce".
std::string_view to_string(Collective c);
// One of the names above; anything else throws seqpar::Error naming `field` and the names.
Collective parse_collective(std::string_view text, std::string_view field = "op");

// nccl-tests bus factor over `ranks` ranks: allreduce 2(n-1)/n; allgather, reducescatter,
// alltoall (n-1)/n; sendrecv 1. One rank moves nothing over a link: 0 (sendrecv 1).
double bus_factor(Collective c, int ranks);

}  // namespace seqpar
