#include "seqpar/sim/comm_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "seqpar/common/error.hpp"

namespace seqpar::sim {

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

Collective parse_collective(std::string_view s) {
  for (Collective c : {Collective::all_to_all, Collective::send_recv, Collective::all_gather,
                       Collective::reduce_scatter, Collective::all_reduce})
    if (s == to_string(c)) return c;
  throw Error(fmt::format("op: unknown collective '{}'; expected alltoall, sendrecv, allgather, reducescatter or allreduce", s));
}

Placement place_group(const System& s, int size, int stride) {
  Placement p;
  p.size = size;
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

double bus_factor(Collective c, int n) {
  if (n <= 1) return c == Collective::send_recv ? 1.0 : 0.0;
  switch (c) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::send_recv: return 1.0;
    default: return double(n - 1) / n;
  }
}

namespace {

// The rate one GPU's ring traffic sees inside a node: the GPU link, or on PCIe the socket link
// when the ring crosses it (one flow per direction crosses).
double intra_ring_rate(const System& s, const Placement& p) {
  double bw = s.intra.bytes_per_s;
  if (s.intra.kind == LinkKind::pcie && p.socket_b > 0) bw = std::min(bw, s.intra.cross_socket_bytes_per_s);
  return bw;
}

double ring_rate(const System& s, const Placement& p) {
  return p.nodes > 1 ? std::min(s.inter.bytes_per_s, intra_ring_rate(s, p)) : intra_ring_rate(s, p);
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
  const double inter = (n - p.per_node) * chunk / s.inter.bytes_per_s;
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
      return n <= 1 ? 0.0 : latency(s, p) + bytes / ring_rate(s, p);
    case Collective::all_gather:
    case Collective::reduce_scatter:
      if (n <= 1) return 0.0;
      return latency(s, p) * log2_steps(n) + bytes * (n - 1) / n / ring_rate(s, p);
    case Collective::all_reduce:
      if (n <= 1) return 0.0;
      return 2.0 * latency(s, p) * log2_steps(n) + 2.0 * bytes * (n - 1) / n / ring_rate(s, p);
  }
  return 0.0;
}

CommEstimate estimate_collective(const System& s, Collective c, double bytes, int ranks) {
  if (ranks < 1) throw Error(fmt::format("gpus: {} must be at least 1", ranks));
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

}  // namespace seqpar::sim
