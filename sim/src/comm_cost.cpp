#include "seqpar/sim/comm_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "seqpar/core/checked.hpp"
#include "seqpar/sim/moe_cost.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/limits.hpp"

namespace seqpar::sim {

namespace {

// A group of `size` members `stride` world ranks apart on nodes of g GPUs, laid out on the real node
// boundaries: of the instances in one period of the layout (or in the world, when it is smaller),
// the one that spans the most nodes (and of those the fewest members on a node).
struct LaidOut {
  int nodes = 0, fewest = 0, most = 0;
};
LaidOut lay_out(int g, int size, int stride, int world) {
  const std::int64_t block = std::int64_t{std::max(1, size)} * std::max(1, stride);
  std::int64_t period = std::min<std::int64_t>(block / std::gcd(block, std::int64_t{g}) * g, 64 * std::int64_t{g});
  if (world > 0) period = std::min<std::int64_t>(period, world);
  LaidOut w;
  for (std::int64_t start = 0; start < period; start += block)
    for (std::int64_t b = start; b < start + std::max(1, stride); ++b) {
      int nodes = 0, fewest = size, most = 0, run = 0;
      std::int64_t node = -1;
      for (int k = 0; k < size; ++k) {
        const std::int64_t n = (b + std::int64_t{k} * stride) / g;
        if (n != node) {
          if (run > 0) fewest = std::min(fewest, run), most = std::max(most, run);
          node = n, run = 0, ++nodes;
        }
        ++run;
      }
      fewest = std::min(fewest, run), most = std::max(most, run);
      if (nodes > w.nodes || (nodes == w.nodes && fewest < w.fewest)) w = {nodes, fewest, most};
    }
  return w;
}

// lay_out, once per thread for each (node size, size, stride) a search meets: a direct-mapped slot
// per key (a collision lays it out again, never a wrong answer; no allocation).
LaidOut laid_out(int g, int size, int stride, int world) {
  struct Slot {
    int g = 0, size = 0, stride = 0, world = 0;
    LaidOut laid;
  };
  thread_local std::array<Slot, 256> slots;
  Slot& slot =
      slots[(std::size_t(size) * 131 + std::size_t(stride) * 31 + std::size_t(g) + std::size_t(world) * 7) % slots.size()];
  if (!(slot.g == g && slot.size == size && slot.stride == stride && slot.world == world))
    slot = {g, size, stride, world, lay_out(g, size, stride, world)};
  return slot.laid;
}

// The world as far as it changes a layout: below one period of the tiling (lcm of the block and
// the node) the groups past the last rank do not exist; from one period on, the first period's
// nodes are whole and every later node repeats one of them or, partly filled, carries less.
int effective_world(int g, int size, int stride, int world) {
  const std::int64_t block = std::int64_t{std::max(1, size)} * std::max(1, stride);
  const std::int64_t period = block / std::gcd(block, std::int64_t{g}) * g;
  return world > 0 && world < period ? world : 0;
}

}  // namespace

Placement place_group(const System& s, int size, int stride, int world) {
  Placement p;
  p.size = size;
  p.stride = stride;
  const int g = std::max(1, s.gpus_per_node);
  p.world = effective_world(g, size, stride, world);
  const std::int64_t block = std::int64_t{std::max(1, size)} * std::max(1, stride);
  // Groups that tile the nodes (a block inside a node, or blocks of whole nodes whose members sit
  // evenly on them) are alike: the closed form. Otherwise the widest instance on the real node
  // boundaries is the group's.
  const bool tiles = g % block == 0 || (block % g == 0 && (stride % g == 0 || g % stride == 0));
  if (tiles) {
    p.per_node = stride >= g ? 1 : std::min(size, std::max(1, g / stride));
    p.most_per_node = p.per_node;
    p.nodes = (size + p.per_node - 1) / p.per_node;
  } else {
    const LaidOut w = laid_out(g, size, stride, p.world);
    p.nodes = w.nodes, p.per_node = w.fewest, p.most_per_node = w.most;
  }
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
  // TP innermost: consecutive SP ranks are tp world ranks apart.
  const int U = std::max(1, p.ulysses_degree), R = std::max(1, p.ring_degree), T = std::max(1, p.tp);
  if (p.placement == seqpar::GroupPlacement::ring_inner)
    return {place_group(s, U, R * T, p.gpus), place_group(s, R, T, p.gpus)};
  return {place_group(s, U, T, p.gpus), place_group(s, R, U * T, p.gpus)};
}

Placement place_tp_group(const System& s, const seqpar::Plan& p) { return place_group(s, std::max(1, p.tp), 1, p.gpus); }

Placement place_zero_group(const System& s, const seqpar::Plan& p) {
  const int T = std::max(1, p.tp);
  if (p.pp <= 1) return place_group(s, std::max(1, p.gpus / T), T, p.gpus);
  // With stages ([TP, CP, PP, DP]) the group is a stage's sp ranks tp apart, then its dp copies
  // tp x sp x pp apart: two strides, which a Placement (one stride) cannot hold. Without SP or
  // without DP it is one stride, exactly. With both, it is charged as sp x dp ranks tp apart: the
  // same members per node and the same crossing share per member where tp x sp fills whole nodes
  // (Llama 3's TP 8 x CP 16), the stages' groups taking the nodes between; where a stage's SP block
  // shares a node with other stages, this counts more members per node than there are and
  // understates the NIC load.
  const int sp = std::max(1, p.sp), dp = std::max(1, p.dp());
  if (sp == 1) return place_group(s, dp, T * std::max(1, p.pp), p.gpus);
  if (dp == 1) return place_group(s, sp, T, p.gpus);
  return place_group(s, sp * dp, T, p.gpus);
}

System loopback_system(const System& s) {
  System out = s;
  Link copy;
  copy.kind = LinkKind::nvswitch;
  copy.bytes_per_s = s.gpu.hbm_bytes_per_s / 2;
  copy.latency_s = s.gpu.kernel_overhead_s;
  out.intra = copy;
  out.inter = copy;
  out.nics_per_node = 0;
  out.nic_bytes_per_s = 0;
  out.gpus_per_node = limits::kMaxGpusPerNode;
  out.name = s.name + " (loopback)";
  return out;
}

int nic_count(const System& s) { return s.nics_per_node > 0 ? s.nics_per_node : std::max(1, s.gpus_per_node); }
double nic_rate(const System& s) { return s.nics_per_node > 0 ? s.nic_bytes_per_s : s.inter.bytes_per_s; }

namespace {

// ---- Flows per link ----
// Every group of a placement runs the collective at once (groups of `size` ranks `stride` apart
// tile blocks of size x stride world ranks; world ranks fill nodes in order). Each rank's flows
// are charged to the links they cross: inside a node its own port (the NVLink/NVSwitch port, or on
// PCIe its x16 link) and, between the two CPU sockets, the socket link; across nodes the NIC its
// GPU uses (GPU i of a node: NIC i x nics / gpus_per_node, rail-aligned, NICs shared by GPU pairs
// when there are half as many) and, on the way there, the GPU's PCIe link (GPUDirect RDMA through
// the PCIe switch the GPU and its NIC share). The collective ends when its busiest link does.

// What a collective asks of the links, per rank: its pattern and the bytes each flow carries.
enum class Pattern {
  ring_step,        // send_recv: each rank sends `bytes` to its successor in the group
  all_to_all,       // each rank sends bytes / n to every other member
  ring_collective,  // NCCL ring all-gather / reduce-scatter: bytes (n - 1) / n around the ring, the
                    // node-crossing part spread over the NICs of the members in the node (one ring
                    // per NIC, the data split among the rings)
};

// The busiest link of each kind, in bytes per direction, and the most crossing flows one NIC carries.
struct LinkLoads {
  double port = 0, socket = 0, nic = 0, gpu_pcie = 0;
  int nic_flows = 0;
};

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Nodes whose loads are added up: one period of the tiling (whole blocks on whole nodes), or the
// world's nodes when it is smaller (the last one partly filled), at most 64 (beyond that the nodes
// repeat the pattern of those before).
std::int64_t nodes_to_scan(const System& s, const Placement& p) {
  const std::int64_t g = std::max(1, s.gpus_per_node), block = std::int64_t{std::max(1, p.size)} * std::max(1, p.stride);
  std::int64_t ranks = block / std::gcd(block, g) * g;  // lcm(block, g) world ranks
  if (p.world > 0) ranks = std::min<std::int64_t>(ranks, p.world);
  return std::min<std::int64_t>(64, std::max<std::int64_t>(1, (ranks + g - 1) / g));
}

// One node's links, filled flow by flow.
struct NodeLinks {
  std::vector<double> port_tx, port_rx, cross_tx, cross_rx, nic_tx, nic_rx;
  std::vector<int> flows_tx, flows_rx;
  double socket[2] = {0, 0};  // from socket 0 to socket 1, and back
  NodeLinks(int g, int nics)
      : port_tx(g), port_rx(g), cross_tx(g), cross_rx(g), nic_tx(nics), nic_rx(nics), flows_tx(nics), flows_rx(nics) {}
};

LinkLoads link_loads(const System& s, Pattern pattern, double bytes, const Placement& pl) {
  LinkLoads out;
  const int n = pl.size, g = std::max(1, s.gpus_per_node), nics = nic_count(s);
  if (n <= 1) return out;
  const std::int64_t stride = std::max(1, pl.stride), block = std::int64_t{n} * stride;
  const bool pcie = s.intra.kind == LinkKind::pcie;
  const int gps = pcie && s.intra.gpus_per_socket > 0 ? s.intra.gpus_per_socket : g;
  auto socket_of = [&](std::int64_t local) { return local < gps ? 0 : 1; };
  auto nic_of = [&](std::int64_t local) { return int(local * nics / g); };
  for (std::int64_t node = 0, scan = nodes_to_scan(s, pl); node < scan; ++node) {
    const std::int64_t first = node * g;
    NodeLinks L(g, nics);
    auto cross_out = [&](int i, double b, int flows) {
      L.cross_tx[i] += b;
      L.nic_tx[nic_of(i)] += b;
      L.flows_tx[nic_of(i)] += flows;
    };
    auto cross_in = [&](int i, double b, int flows) {
      L.cross_rx[i] += b;
      L.nic_rx[nic_of(i)] += b;
      L.flows_rx[nic_of(i)] += flows;
    };
    // Ranks past the world's last do not exist (a partly filled last node): no flows of their own.
    const int here_gpus = pl.world > 0 ? int(std::min<std::int64_t>(g, pl.world - first)) : g;
    for (int i = 0; i < here_gpus; ++i) {
      const std::int64_t w = first + i, base = w / block * block + w % stride, pos = (w % block) / stride;
      auto member = [&](std::int64_t k) { return base + ((k % n + n) % n) * stride; };
      // Positions of w's group members on this node with local index in [lo, hi): [k_lo, k_hi].
      auto k_lo = [&](std::int64_t lo) { return std::max<std::int64_t>(0, floor_div(first + lo - base + stride - 1, stride)); };
      auto k_hi = [&](std::int64_t hi) { return std::min<std::int64_t>(n - 1, floor_div(first + hi - 1 - base, stride)); };
      auto members_in = [&](std::int64_t lo, std::int64_t hi) { return std::max<std::int64_t>(0, k_hi(hi) - k_lo(lo) + 1); };
      const std::int64_t here = members_in(0, g);
      switch (pattern) {
        case Pattern::ring_step: {
          const std::int64_t to = member(pos + 1), from = member(pos - 1);
          if (to / g == node) {
            L.port_tx[i] += bytes;
            L.port_rx[to - first] += bytes;
            if (socket_of(i) != socket_of(to - first)) L.socket[socket_of(i)] += bytes;
          } else {
            cross_out(i, bytes, 1);
          }
          if (from / g != node) cross_in(i, bytes, 1);
          break;
        }
        case Pattern::all_to_all: {
          const double chunk = bytes / n;
          L.port_tx[i] += chunk * double(here - 1);
          L.port_rx[i] += chunk * double(here - 1);
          L.socket[socket_of(i)] += chunk * double(socket_of(i) == 0 ? members_in(gps, g) : members_in(0, gps));
          const std::int64_t away = n - here;
          if (away > 0) {
            const int flows = int(std::min<std::int64_t>(away, 1 << 20));
            cross_out(i, chunk * double(away), flows);
            cross_in(i, chunk * double(away), flows);
          }
          break;
        }
        case Pattern::ring_collective: {
          const double v = bytes * (n - 1) / n;
          L.port_tx[i] += v;
          L.port_rx[i] += v;
          // A group with members behind both sockets crosses the socket link once each way;
          // counted at its first member on the node.
          if (pcie && pos == k_lo(0) && members_in(0, gps) > 0 && members_in(gps, g) > 0) {
            L.socket[0] += v;
            L.socket[1] += v;
          }
          if (here < n) {  // the group leaves the node: its members here share the crossing
            cross_out(i, v / double(here), 1);
            cross_in(i, v / double(here), 1);
          }
          break;
        }
      }
    }
    for (int i = 0; i < g; ++i) {
      // On a PCIe node the GPU's one link carries its peer traffic and what its NIC moves for it;
      // on an NVLink node the NIC traffic goes over the PCIe link alone (GPUDirect RDMA).
      if (pcie) {
        out.port = std::max({out.port, L.port_tx[i] + L.cross_tx[i], L.port_rx[i] + L.cross_rx[i]});
      } else {
        out.port = std::max({out.port, L.port_tx[i], L.port_rx[i]});
        out.gpu_pcie = std::max({out.gpu_pcie, L.cross_tx[i], L.cross_rx[i]});
      }
    }
    for (int k = 0; k < nics; ++k) {
      out.nic = std::max({out.nic, L.nic_tx[k], L.nic_rx[k]});
      out.nic_flows = std::max({out.nic_flows, L.flows_tx[k], L.flows_rx[k]});
    }
    out.socket = std::max({out.socket, L.socket[0], L.socket[1]});
  }
  return out;
}

// The loads of one byte under a topology, pattern and placement, derived once: they are linear in
// the bytes (nic_flows, a count, does not scale), and a search asks for the same few placements
// millions of times, so each is scanned once per thread and looked up after (no allocation then).
struct LoadKey {
  int gpus_per_node, nics, gpus_per_socket;
  bool pcie;
  Pattern pattern;
  int size, stride, world;
  bool operator==(const LoadKey&) const = default;
};
struct LoadKeyHash {
  std::size_t operator()(const LoadKey& k) const {
    // The placement's fields first and widest: a search varies them, a system's stay the same.
    std::uint64_t h = std::uint64_t(std::uint32_t(k.size)) * 0x9E3779B97F4A7C15ull;
    h ^= std::uint64_t(std::uint32_t(k.stride)) * 0xC2B2AE3D27D4EB4Full + (std::uint64_t(k.pattern) << 7) +
         std::uint64_t(std::uint32_t(k.world)) * 0x94D049BB133111EBull;
    h ^= std::uint64_t(std::uint32_t(k.gpus_per_node) ^ (std::uint32_t(k.nics) << 8) ^
                       (std::uint32_t(k.gpus_per_socket) << 16) ^ (std::uint32_t(k.pcie) << 24)) *
         0x165667B19E3779F9ull;
    return std::size_t(h ^ (h >> 29));
  }
};
LinkLoads unit_link_loads(const System& s, Pattern pattern, const Placement& pl) {
  const bool pcie = s.intra.kind == LinkKind::pcie;
  const LoadKey key{s.gpus_per_node, nic_count(s), pcie ? s.intra.gpus_per_socket : 0, pcie, pattern, pl.size,
                    pl.stride, pl.world};
  // Direct-mapped, a slot per hash: a lookup is a hash and a compare, and a collision derives the
  // loads again (a scan, never a wrong load). A search meets a few dozen placements; the slots are
  // a thread's own, filled once (no allocation after).
  struct Slot {
    bool used = false;
    LoadKey key{};
    LinkLoads loads;
  };
  thread_local std::array<Slot, 1024> cache;
  Slot& slot = cache[LoadKeyHash{}(key) % cache.size()];
  if (!slot.used || !(slot.key == key)) slot = {true, key, link_loads(s, pattern, 1.0, pl)};
  return slot.loads;
}
LinkLoads scaled(LinkLoads l, double bytes) {
  l.port *= bytes;
  l.socket *= bytes;
  l.nic *= bytes;
  l.gpu_pcie *= bytes;
  return l;
}

// The time the busiest link takes.
double link_time(const System& s, const LinkLoads& l) {
  double t = l.port / s.intra.bytes_per_s;
  if (l.socket > 0) t = std::max(t, l.socket / s.intra.cross_socket_bytes_per_s);
  if (l.nic > 0) t = std::max(t, l.nic / nic_rate(s));
  if (l.gpu_pcie > 0 && s.gpu.pcie_bytes_per_s > 0) t = std::max(t, l.gpu_pcie / s.gpu.pcie_bytes_per_s);
  return t;
}

// A collective whose flows cross nodes waits for the network's latency, else the node's. A group
// can cross without spanning two whole nodes: 3 ranks from the 7th GPU of a node straddle two.
double latency(const System& s, const LinkLoads& l) { return l.nic > 0 ? s.inter.latency_s : s.intra.latency_s; }

// ceil(log2 n) for n >= 2, from the bits (log2 of an int is exact at powers of two and at least
// 1e-9 from a whole number elsewhere, so the two agree).
double log2_steps(int n) { return n <= 1 ? 0.0 : double(std::bit_width(unsigned(n - 1))); }

// The steps a ring all-gather or reduce-scatter waits before its pipeline is full: n - 1 hops, of
// which k - 1 cross between the k nodes the group spans (NCCL's ring latency, tuning.cc). The
// latency grows with the group, not with its log: 4,096 ranks on 512 dgx-h100 nodes wait about
// 19 ms per collective, which is why ZeRO-3 over thousands of ranks is rarely run without
// hierarchy. (NCCL's PAT algorithm, logarithmic, serves groups of one GPU per node only and is not
// modelled; the ring is charged there too.)
double ring_fill_latency(const System& s, const Placement& p) {
  const int nodes = std::clamp(p.nodes, 1, p.size);
  return double(p.size - nodes) * s.intra.ring_step_latency_s + double(nodes - 1) * s.inter.ring_step_latency_s;
}

Pattern pattern_of(Collective c) {
  switch (c) {
    case Collective::send_recv: return Pattern::ring_step;
    case Collective::all_to_all: return Pattern::all_to_all;
    default: return Pattern::ring_collective;
  }
}

}  // namespace

double collective_time(const System& s, Collective c, double bytes, const Placement& p) {
  const int n = p.size;
  if (bytes <= 0 || n <= 1) return 0.0;
  const LinkLoads l = scaled(unit_link_loads(s, pattern_of(c), p), bytes);
  switch (c) {
    case Collective::all_to_all:
    case Collective::send_recv:
      return latency(s, l) + link_time(s, l);
    case Collective::all_gather:
    case Collective::reduce_scatter: {
      double start = latency(s, l) + ring_fill_latency(s, p);
      // NCCL picks NVLS inside one NVLink-SHARP node where its flat latency is the smaller
      // (tuning.cc); across nodes NVLS all-gathers need CollNet, so the ring runs.
      if (l.nic <= 0 && s.intra.nvls_latency_s > 0) start = std::min(start, s.intra.nvls_latency_s);
      return start + link_time(s, l);
    }
    case Collective::all_reduce:  // a reduce-scatter and an all-gather
      return 2.0 * latency(s, l) * log2_steps(n) + 2.0 * link_time(s, l);
  }
  return 0.0;
}

int crossing_flows_per_nic(const System& s, Collective c, const Placement& p) {
  return unit_link_loads(s, pattern_of(c), p).nic_flows;
}

std::string describe_placement(const System& s, const seqpar::Plan& p) {
  const std::int64_t g = std::max(1, s.gpus_per_node), nodes = (std::int64_t{p.gpus} + g - 1) / g;
  auto where = [&](std::string_view name, const Placement& pl, Collective c) {
    if (pl.size <= 1) return std::string();
    const int flows = crossing_flows_per_nic(s, c, pl);
    if (flows == 0) return fmt::format("{}{} in a node", name, pl.size);
    const std::string per = pl.most_per_node > pl.per_node ? fmt::format("{}-{}", pl.per_node, pl.most_per_node)
                                                           : fmt::format("{}", pl.per_node);
    const std::string spread = pl.nodes > 1 ? fmt::format("over {} nodes ({}/node)", pl.nodes, per)
                                            : std::string("across a node boundary");
    return fmt::format("{}{} {}, {} crossing flow{} per NIC", name, pl.size, spread, flows, flows == 1 ? "" : "s");
  };
  const std::string tp = where("TP", place_tp_group(s, p), Collective::all_gather);
  auto join = [](const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + "; " + b; };
  if (p.sp <= 1)
    return join(join(tp, fmt::format("no SP group; data parallel over {} node{}", nodes, nodes == 1 ? "" : "s")),
                p.ep > 1 ? where("EP", place_ep_group(s, p), Collective::all_to_all) : std::string());
  const SpGroups groups = place_sp_groups(s, p);
  const std::string u = where("U", groups.ulysses, Collective::all_to_all), r = where("R", groups.ring, Collective::send_recv);
  // The experts' all-to-all group (moe_cost.hpp), where experts are split.
  const std::string ep = p.ep > 1 ? where("EP", place_ep_group(s, p), Collective::all_to_all) : std::string();
  return join(join(tp, join(u, r)), ep);
}

CommEstimate estimate_collective(const System& s, Collective c, double bytes, int ranks) {
  require_range("gpus", ranks, 1, limits::kMaxGpus);
  if (c == Collective::send_recv && ranks < 2) throw Error("gpus: sendrecv needs at least 2 GPUs");
  if (!(bytes > 0)) throw Error(fmt::format("size: {} bytes must be positive", bytes));
  CommEstimate e;
  e.time_s = collective_time(s, c, bytes, place_group(s, ranks, 1, ranks));
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
