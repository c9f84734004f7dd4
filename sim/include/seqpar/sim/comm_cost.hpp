// Communication cost: alpha-beta per link level (inside a node: NVSwitch/NVLink or PCIe with its
// socket topology; across nodes: the node's NICs, shared by the flows that cross at once), for the
// collectives seqpar uses. Bandwidth conventions follow nccl-tests: algbw = bytes / time,
// busbw = algbw x bus factor.
//
// Which flows share which link, per collective (every group of the same kind runs at once):
// - send/recv between ring neighbours: ring order is rank order, so each node a group spans has
//   one outgoing and one incoming crossing hop per group; a crossing flow gets its GPU's NIC,
//   shared only with the other groups' crossing flows on that NIC. The step ends with its
//   slowest hop.
// - all-to-all: every pair talks at once; the bytes leaving a node share all its NICs.
// - all-gather, reduce-scatter, all-reduce (NCCL rings, one channel per NIC): each node boundary
//   carries the group's ring traffic on the NICs of the node's members, so a group with k members
//   per node gets k per-GPU shares of the NICs (the whole node's NICs when it fills the node).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "seqpar/core/collective.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/sim/hardware.hpp"

namespace seqpar::sim {

// The collectives, their names and nccl-tests bus factors are core's vocabulary.
using seqpar::Collective;
using seqpar::bus_factor;
using seqpar::parse_collective;
using seqpar::to_string;

// Where a group's ranks sit. World ranks fill nodes in order; a group's members are `stride`
// world ranks apart (Ulysses groups stride 1, ring groups stride U).
struct Placement {
  int size = 1;
  int stride = 1;          // world ranks between consecutive members
  int per_node = 1;        // members that share a node
  int nodes = 1;           // nodes the group spans
  int socket_a = 1;        // PCIe: members of one node behind the first and second CPU socket
  int socket_b = 0;
};
Placement place_group(const System& s, int size, int stride);

// The placement of a plan's Ulysses and ring groups (Plan::placement): ulysses_inner puts each
// Ulysses group on U consecutive ranks and each ring group R ranks U apart; ring_inner the reverse.
struct SpGroups {
  Placement ulysses, ring;
};
SpGroups place_sp_groups(const System& s, const seqpar::Plan& p);

// The node's NICs as the model uses them (System::nics_per_node, or one per GPU at inter's rate).
int nic_count(const System& s);
double nic_rate(const System& s);

// Time of one collective of `bytes` (nccl-tests size: alltoall the per-rank buffer, allgather the
// gathered output, reducescatter the input, allreduce the buffer, sendrecv the message).
double collective_time(const System& s, Collective c, double bytes, const Placement& p);

struct CommEstimate {
  double time_s = 0, algbw_gbps = 0, busbw_gbps = 0;
};
// A collective over `ranks` consecutive GPUs of the system.
CommEstimate estimate_collective(const System& s, Collective c, double bytes, int ranks);

// The message sizes of an nccl-tests style range, for seqpar comm and seqpar-bench-comm alike:
// from `min` to `max` bytes, each size `factor` times the last (step == 0; whole bytes, a size
// repeated by rounding listed once) or `step` bytes more. seqpar::Error naming -b/-e/-f/-i when
// the range is empty or malformed, or has more than limits::kMaxSizeRows rows.
std::vector<std::int64_t> size_range(std::int64_t min, std::int64_t max, double factor, std::int64_t step);

}  // namespace seqpar::sim
