#include "seqpar/sim/comm_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/limits.hpp"

namespace seqpar::sim {

Placement place_group(const System& s, int size, int stride) {
  Placement p;
  p.size = size;
  p.stride = stride;
  const int g = s.gpus_per_node;
  p.per_node = stride >= g ? 1 : std::min(size, std::max(1, g / stride));
  p.nodes = (size + p.per_node - 1) / p.per_node;
  if (s.intra.kind == LinkKind::pcie && s.intra.gpus_per_socket > 0) {
    // Members in a node sit at offsets 0, stride, 2*stride, ...; the first socket holds offsets below gpus_per_socket.
    const int gps = s.intra.gpus_per_socket;
    p.socket_a = std::min(p.per_node, (gps + stride - 1) / stride);
    p.socket_b = p.per_node - p.socket_a;
  } else {
    p.socket_a = p.per_node;
    p.socket_b = 0;
  }
  return p;
}

SpGroups place_sp_groups(const System& s, const seqpar::Plan& p) {
  const int U = std::max(1, p.ulysses_degree), R = std::max(1, p.ring_degree);
  if (p.placement == seqpar::GroupPlacement::ring_inner) return {place_group(s, U, R), place_group(s, R, 1)};
  return {place_group(s, U, 1), place_group(s, R, U)};
}

int nic_count(const System& s) { return s.nics_per_node > 0 ? s.nics_per_node : std::max(1, s.gpus_per_node); }
double nic_rate(const System& s) { return s.nics_per_node > 0 ? s.nic_bytes_per_s : s.inter.bytes_per_s; }

namespace {

// The most flows one NIC carries when the GPUs [first, last) of a node each send one: GPU i uses
// NIC i x nics / g, so NIC k serves GPUs [ceil(k g / nics), ceil((k + 1) g / nics)).
int busiest_nic(int first, int last, int g, int nics) {
  int most = 0;
  for (int k = 0; k < nics; ++k) {
    const int lo = int((std::int64_t{k} * g + nics - 1) / nics), hi = int((std::int64_t{k + 1} * g + nics - 1) / nics);
    most = std::max(most, std::min(hi, last) - std::max(lo, first));
  }
  return std::max(most, 1);
}

// The rate of one crossing hop of a ring whose groups are placed as `p`. A node holds per_node
// consecutive members of each group, so its outgoing crossing hops leave from the last member of
// each group in the node and its incoming ones arrive at the first: the GPUs
// [(per_node - 1) x stride, + groups) and [0, groups), with one group per offset below the stride
// (every GPU of the node when the stride spans a node). The busiest NIC either way sets the rate.
double crossing_hop_rate(const System& s, const Placement& p) {
  const int g = std::max(1, s.gpus_per_node), nics = nic_count(s);
  const int groups = std::min(p.stride, g);
  const int out_first = std::min((p.per_node - 1) * p.stride, g - groups);
  const int flows = std::max(busiest_nic(out_first, out_first + groups, g, nics), busiest_nic(0, groups, g, nics));
  return nic_rate(s) / flows;
}

// The rate one GPU's ring traffic sees inside a node: the GPU link, or on PCIe the socket link
// when the ring crosses it (one flow per direction crosses).
double intra_ring_rate(const System& s, const Placement& p) {
  double bw = s.intra.bytes_per_s;
  if (s.intra.kind == LinkKind::pcie && p.socket_b > 0) bw = std::min(bw, s.intra.cross_socket_bytes_per_s);
  return bw;
}

// A ring send/recv step: the slowest hop, crossing or not.
double hop_rate(const System& s, const Placement& p) {
  return p.nodes > 1 ? std::min(crossing_hop_rate(s, p), intra_ring_rate(s, p)) : intra_ring_rate(s, p);
}

// NCCL's ring collectives: per_node per-GPU shares of the node's NICs at each boundary.
double collective_ring_rate(const System& s, const Placement& p) {
  if (p.nodes <= 1) return intra_ring_rate(s, p);
  const double share = nic_count(s) * nic_rate(s) / std::max(1, s.gpus_per_node);
  return std::min(p.per_node * share, intra_ring_rate(s, p));
}

double latency(const System& s, const Placement& p) { return p.nodes > 1 ? s.inter.latency_s : s.intra.latency_s; }

double log2_steps(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(double(n))); }

double all_to_all_time(const System& s, double bytes, const Placement& p) {
  const int n = p.size;
  if (n <= 1) return 0.0;
  const double chunk = bytes / n;
  // Inside the node every pair talks at once: each GPU's link carries its (per_node - 1) chunks;
  // on PCIe the flows between the two sockets also share the socket link.
  double intra = (p.per_node - 1) * chunk / s.intra.bytes_per_s;
  if (s.intra.kind == LinkKind::pcie && p.socket_b > 0)
    intra = std::max(intra, double(p.socket_a) * p.socket_b * chunk / s.intra.cross_socket_bytes_per_s);
  // Across nodes, all of a node's GPUs send (n - per_node) chunks each over all its NICs.
  const double node_nics = nic_count(s) * nic_rate(s);
  const double inter = double(std::max(1, s.gpus_per_node)) * (n - p.per_node) * chunk / node_nics;
  return std::max(intra, inter) + latency(s, p);
}

}  // namespace

double collective_time(const System& s, Collective c, double bytes, const Placement& p) {
  const int n = p.size;
  if (bytes <= 0) return 0.0;
  switch (c) {
    case Collective::all_to_all:
      return all_to_all_time(s, bytes, p);
    case Collective::send_recv:
      return n <= 1 ? 0.0 : latency(s, p) + bytes / hop_rate(s, p);
    case Collective::all_gather:
    case Collective::reduce_scatter:
      if (n <= 1) return 0.0;
      return latency(s, p) * log2_steps(n) + bytes * (n - 1) / n / collective_ring_rate(s, p);
    case Collective::all_reduce:
      if (n <= 1) return 0.0;
      return 2.0 * latency(s, p) * log2_steps(n) + 2.0 * bytes * (n - 1) / n / collective_ring_rate(s, p);
  }
  return 0.0;
}

CommEstimate estimate_collective(const System& s, Collective c, double bytes, int ranks) {
  require_range("gpus", ranks, 1, limits::kMaxGpus);
  if (c == Collective::send_recv && ranks < 2) throw Error("gpus: sendrecv needs at least 2 GPUs");
  if (!(bytes > 0)) throw Error(fmt::format("size: {} bytes must be positive", bytes));
  CommEstimate e;
  e.time_s = collective_time(s, c, bytes, place_group(s, ranks, 1));
  if (e.time_s > 0) {
    e.algbw_gbps = bytes / e.time_s / 1e9;
    e.busbw_gbps = e.algbw_gbps * bus_factor(c, ranks);
  }
  return e;
}

std::vector<std::int64_t> size_range(std::int64_t min, std::int64_t max, double factor, std::int64_t step) {
  if (min <= 0) throw Error(fmt::format("-b {}: the minimum size must be positive", min));
  if (max < min) throw Error(fmt::format("-e {}: the maximum size must be at least -b ({})", max, min));
  if (step < 0) throw Error(fmt::format("-i {}: the step must not be negative", step));
  if (step == 0 && !(factor > 1 && std::isfinite(factor)))
    throw Error(fmt::format("-f {}: the size factor must be greater than 1 (or give -i)", factor));
  // Count the rows before making any, so a range of a trillion rows fails at once instead of
  // filling memory: (max - min) / step + 1 exactly, or the steps of factor from min to max.
  const double rows = step > 0 ? double((max - min) / step) + 1
                               : std::floor(std::log(double(max) / double(min)) / std::log(factor) + 1e-9) + 1;
  if (rows > double(limits::kMaxSizeRows))
    throw Error(fmt::format("{}: -b {} to -e {} gives {:.0f} sizes, more than the limit of {}; {}", step > 0 ? "-i" : "-f",
                            min, max, rows, limits::kMaxSizeRows,
                            step > 0 ? "give a larger -i or a narrower -b..-e" : "give a larger -f or a narrower -b..-e"));
  std::vector<std::int64_t> sizes;
  if (step > 0) {
    for (std::int64_t s = min;; s += step) {  // s + step <= max never overflows: max is an int64
      sizes.push_back(s);
      if (s > max - step) break;
    }
    return sizes;
  }
  double x = double(min);
  for (double k = 0; k < rows; ++k, x *= factor) {
    // Whole bytes; the last row may land a rounding error above max, which it stands for.
    const std::int64_t b = std::min(max, static_cast<std::int64_t>(std::llround(x)));
    if (sizes.empty() || b > sizes.back()) sizes.push_back(b);
  }
  return sizes;
}

}  // namespace seqpar::sim
