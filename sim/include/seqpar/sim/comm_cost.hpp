// Communication cost: alpha-beta, with the bandwidth term set by the busiest link the collective's
// flows cross. Bandwidth conventions follow nccl-tests: algbw = bytes / time, busbw = algbw x bus
// factor.
//
// Flows per link, for every collective and placement alike (every group of the same kind runs at
// once, laid on world ranks that fill nodes in order): each rank's flows are charged to its own
// link inside the node (the NVLink/NVSwitch port, or its PCIe x16 link), to the socket-to-socket
// link when a PCIe flow crosses the CPU sockets, and across nodes to the NIC its GPU uses (GPU i
// of a node: NIC i x nics / gpus_per_node, rail-aligned, so GPU pairs share a NIC when a node has
// half as many) and to the GPU's PCIe link on the way (GPUDirect RDMA through the PCIe switch
// the GPU shares with its NIC). The collective ends when its busiest link does. The patterns:
// - send/recv between ring neighbours: each rank sends to its successor; a ring of 16 on two
//   8-GPU nodes has two hops that cross, each on the NIC of its GPU while node-mates use NVLink;
// - all-to-all: every pair at once;
// - all-gather, reduce-scatter, all-reduce (NCCL rings, one per NIC with the data split among
//   them): (n-1)/n of the buffer through every rank's port, and the part that leaves a node
//   spread over the NICs of the group's members there.
// Not modelled: contention between different collectives running at once (data-parallel traffic
// beside the ring's hops), and host traffic through a PCIe switch's shared uplink.
#pragma once
#include <cstdint>
#include <string>
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
// world ranks apart (Ulysses groups stride 1, ring groups stride U). The world is the job's GPUs:
// on nodes larger than the job's share of them (64 GPUs of a 72-GPU NVLink rack, 128 over two)
// the last node is partly filled, and only the groups on real ranks are laid out and charged.
struct Placement {
  int size = 1;
  int stride = 1;          // world ranks between consecutive members
  // World ranks the groups tile, a multiple of size x stride; 0 when the groups repeat without
  // end. Kept only where it changes the layout: below one period of the tiling (lcm of the
  // group's block and the node), as whole periods lay out like an endless world.
  int world = 0;
  // The group's instances laid on the real node boundaries, the one that spans the most nodes (and
  // of those the fewest members on a node): where the nodes do not tile the groups, instances differ.
  int per_node = 1;        // members that share a node: the fewest on any of its nodes
  int most_per_node = 1;   // ... and the most
  int nodes = 1;           // nodes the group spans
  int socket_a = 1;        // PCIe: members of one node behind the first and second CPU socket
  int socket_b = 0;
};
Placement place_group(const System& s, int size, int stride, int world = 0);

// The placement of a plan's Ulysses and ring groups (Plan::placement): ulysses_inner puts each
// Ulysses group on U consecutive SP ranks and each ring group R SP ranks U apart; ring_inner the
// reverse. Tensor parallelism is innermost (Megatron's order tp-cp-dp), so consecutive SP ranks
// are tp world ranks apart.
struct SpGroups {
  Placement ulysses, ring;
};
SpGroups place_sp_groups(const System& s, const seqpar::Plan& p);
// A plan's TP group: tp consecutive world ranks (inside a node when tp divides it).
Placement place_tp_group(const System& s, const seqpar::Plan& p);
// The group ZeRO shards over and the data-parallel collectives run in: the dp x sp ranks of one
// pipeline stage that hold the same TP shard, gpus / (tp x pp) of them (tp world ranks apart
// without stages; with them, comm_cost.cpp says how the two strides are charged).
Placement place_zero_group(const System& s, const seqpar::Plan& p);

// The system a single-rank proxy runs on (seqpar-train --comm loopback: rank 0's shapes, every
// peer the device itself): each collective is a device-to-device copy of its buffer, so every link
// moves bytes at half the HBM bandwidth (each byte read and written) after one launch, and no flow
// leaves the node. Predicting a proxy's measured step on the real links would charge it traffic it
// never sent.
System loopback_system(const System& s);

// The node's NICs as the model uses them (System::nics_per_node, or one per GPU at inter's rate).
int nic_count(const System& s);
double nic_rate(const System& s);

// Time of one collective of `bytes` (nccl-tests size: alltoall the per-rank buffer, allgather the
// gathered output, reducescatter the input, allreduce the buffer, sendrecv the message).
double collective_time(const System& s, Collective c, double bytes, const Placement& p);

// The most crossing flows one NIC carries, in either direction, when every group placed as `p`
// runs `c` at once (0 when nothing crosses): the sharing collective_time charges.
int crossing_flows_per_nic(const System& s, Collective c, const Placement& p);

// Where a plan's TP and SP groups sit, for tables and reports: "TP2 in a node; U4 in a node; R2 over
// 2 nodes (1/node), 2 crossing flows per NIC"; a plan without SP says so.
std::string describe_placement(const System& s, const seqpar::Plan& p);

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
