// The benchmarked operations in nccl-tests terms: names, bus-bandwidth factors, how a message
// size in bytes maps to element counts, and the data pattern the -c check verifies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/collective.hpp"

namespace seqpar::comm {

// The operations, their names and the nccl-tests bus factors are core's (the simulator uses the
// same), so a measured and a modelled busbw mean the same thing.
using seqpar::Collective;
using seqpar::bus_factor;
using seqpar::parse_collective;
using seqpar::to_string;

// Per-rank buffers for one row. `bytes` is the nccl-tests "size": the whole per-rank buffer
// for alltoall, allreduce and sendrecv, the gathered output for allgather, the input for
// reducescatter.
struct Shape {
  std::size_t bytes = 0;
  std::size_t count = 0;        // nccl-tests "count": bytes / element size
  std::size_t send_count = 0;   // elements in the send buffer
  std::size_t recv_count = 0;   // elements in the recv buffer
  std::size_t call_count = 0;   // the count argument of the Communicator call
};
// Throws seqpar::Error naming the rule when bytes is zero, not a multiple of the element size,
// or (alltoall, allgather, reducescatter) not a multiple of ranks x element size.
Shape make_shape(Collective op, std::int64_t bytes, DType dt, int ranks);

// Where receive element j comes from: input element `index` of rank `rank` (for reductions,
// rank is -1: every rank's element `index` is added, in rank order).
struct InputElement {
  int rank = 0;
  std::size_t index = 0;
};

// The collective table: one entry per collective, the only place that tells them apart here.
// Adding a collective is one entry (comm/src/collective.cpp) plus its name and bus factor in core.
struct CollectiveEntry {
  Collective op;
  bool split;      // the size is cut into one equal chunk per rank (make_shape checks it divides)
  bool reduction;  // each received element is a sum over the ranks
  // Send, receive and call element counts from s.count and the per-rank chunk.
  void (*shape)(Shape& s, std::size_t per_rank);
  // Receive element j of rank `rank` of `ranks`, with chunks of `chunk` (= s.call_count) elements.
  InputElement (*source)(std::size_t j, std::size_t chunk, int rank, int ranks);
  // The Communicator call.
  void (*run)(Communicator& c, const void* send, void* recv, const Shape& s, DType dt);
};
const std::vector<CollectiveEntry>& collective_table();
// Throws seqpar::Error naming the collective when it has no entry.
const CollectiveEntry& collective_entry(Collective op);

// One operation on c (sendrecv: to rank+1, from rank-1, waited on).
void run_collective(Collective op, Communicator& c, const void* send, void* recv,
                    const Shape& s, DType dt);

// Deterministic per-rank input (host memory), and the number of recv elements that differ
// from what rank `rank` of `ranks` must receive. Values are small integers, exact in every
// type for sums over up to 16 ranks; beyond that bf16/f16 sums are compared with a tolerance.
void fill_send(Collective op, void* send, const Shape& s, DType dt, int rank, int ranks);
std::size_t count_wrong(Collective op, const void* recv, const Shape& s, DType dt, int rank,
                        int ranks);
// The input element i of rank `rank`.
double pattern_value(int rank, std::size_t i, DType dt);

}  // namespace seqpar::comm
