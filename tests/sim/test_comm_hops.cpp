// Communication per hop and per placement (issue 16, part 2): which flows share which NIC, each
// case against times computed by hand on a synthetic 8-GPU node with round numbers.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {
namespace {

using namespace testing;
constexpr double kRel = 1e-12;

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }
#define EXPECT_REL(a, b) EXPECT_LT(rel((a), (b)), kRel) << #a " = " << (a) << ", expected " << (b)

// 8 GPUs per node on a 100 GB/s switch (10 us); 4 NICs of 20 GB/s (20 us), one per GPU pair:
// GPUs 0-1 use NIC 0, ..., GPUs 6-7 NIC 3. The per-GPU share is 4 x 20 / 8 = 10 GB/s.
System pair_nic_system() {
  System s = round_system();
  // A GPU's crossing traffic also passes its own PCIe link (GPUDirect RDMA): a Gen4 x16 link,
  // faster than one NIC, as in every preset, so the NICs decide the cases below.
  s.gpu.pcie_bytes_per_s = 32e9;
  s.gpus_per_node = 8;
  s.nics_per_node = 4;
  s.nic_bytes_per_s = 20e9;
  s.inter.bytes_per_s = 10e9;
  return s;
}

TEST(CommHops, ARingOverTwoNodesCrossesOnOneNicPerDirection) {
  const System s = pair_nic_system();
  // 16 consecutive ranks on two nodes: only 7 -> 8 and 15 -> 0 cross, each alone on its NIC at
  // 20 GB/s, so a 1 MB step takes 20 us + 50 us; the in-node hops (10 us) finish first. The
  // per-GPU share (10 GB/s) would have given 120 us.
  const Placement two_nodes = place_group(s, 16, 1);
  EXPECT_EQ(two_nodes.nodes, 2);
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, two_nodes), 20e-6 + 50e-6);
  // 16 ranks 8 apart (the ring groups of a U8 x R16 hybrid) sit one per node: all 8 GPUs of a
  // node send across at once, two per NIC, 10 GB/s each: 20 us + 100 us.
  const Placement sixteen_nodes = place_group(s, 16, 8);
  EXPECT_EQ(sixteen_nodes.nodes, 16);
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, sixteen_nodes), 20e-6 + 100e-6);
}

TEST(CommHops, TheSlowestHopSetsTheStepAndNicsFollowTheirGpus) {
  const System s = pair_nic_system();
  // Ring groups 2 apart (U2 x R8 on two nodes): the two groups' crossing hops leave from GPUs 6
  // and 7, which share NIC 3: 10 GB/s each, 20 us + 100 us.
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 8, 2)), 20e-6 + 100e-6);
  // With one NIC per GPU at the same 20 GB/s, GPUs 6 and 7 each have their own: 20 us + 50 us.
  System own = s;
  own.nics_per_node = 8;
  own.inter.bytes_per_s = 20e9;
  EXPECT_REL(collective_time(own, Collective::send_recv, 1e6, place_group(own, 8, 2)), 20e-6 + 50e-6);
  // Inside one node no hop crosses: the switch's 100 GB/s, 10 us + 10 us.
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 8, 1)), 10e-6 + 10e-6);
}

TEST(CommHops, AllToAllInsideANodeUsesTheSwitchAndAcrossSharesAllNics) {
  const System s = pair_nic_system();
  // 8 ranks in one node, 8 MB each: 7 chunks of 1 MB leave each GPU at 100 GB/s: 70 us + 10 us.
  EXPECT_REL(collective_time(s, Collective::all_to_all, 8e6, place_group(s, 8, 1)), 70e-6 + 10e-6);
  // 16 ranks over 2 nodes, 16 MB each: 8 chunks of 1 MB per GPU cross; the node's 8 GPUs send
  // 64 MB over 4 x 20 GB/s = 800 us (the 7 in-node chunks take 70 us), + 20 us.
  EXPECT_REL(collective_time(s, Collective::all_to_all, 16e6, place_group(s, 16, 1)), 800e-6 + 20e-6);
  // Pairs 8 apart (the Ulysses groups of a ring-inner U2 x R8): 1 MB per GPU crosses, 8 MB per
  // node over 80 GB/s: 100 us + 20 us.
  EXPECT_REL(collective_time(s, Collective::all_to_all, 2e6, place_group(s, 2, 8)), 100e-6 + 20e-6);
}

TEST(CommHops, RingCollectivesAcrossNodesUseTheMembersNicShares) {
  const System s = pair_nic_system();
  // NCCL runs one ring per NIC, so a group filling its node gets all 4 NICs (80 GB/s) at each
  // boundary: all-gather of 16 MB over 16 ranks = 20 us + the ring's fill (14 steps inside the
  // two nodes at 1 us, 1 across at 5 us) + 15 MB / 80 GB/s.
  EXPECT_REL(collective_time(s, Collective::all_gather, 16e6, place_group(s, 16, 1)), 39e-6 + 187.5e-6);
  EXPECT_REL(collective_time(s, Collective::all_reduce, 16e6, place_group(s, 16, 1)), 160e-6 + 375e-6);
  // A group with one member per node (16 ranks 8 apart) gets that member's share, 10 GB/s; every
  // one of its 15 ring steps crosses (5 us each): 20 us + 75 us + 1.5 ms.
  EXPECT_REL(collective_time(s, Collective::reduce_scatter, 16e6, place_group(s, 16, 8)), 95e-6 + 1500e-6);
}

// A ring all-gather or reduce-scatter waits one step per member before its pipeline is full
// (NCCL's tuning model): the latency grows with the group, not with its log. dgx-h100: start 15
// us across nodes, 3.4 us a step inside a node, 14 us a step between nodes.
TEST(CommHops, RingLatencyGrowsWithTheGroupAndNvlsFlattensItInANode) {
  const System s = load_system("dgx-h100");
  EXPECT_REL(s.intra.ring_step_latency_s, 3.4e-6);
  EXPECT_REL(s.inter.ring_step_latency_s, 14e-6);
  EXPECT_REL(s.intra.nvls_latency_s, 25e-6);
  // 64 bytes leave every port almost at once: the time is the latency. 4,096 ranks on 512 nodes:
  // 15 us + 3,584 steps inside nodes x 3.4 us + 511 between them x 14 us = 19.35 ms, a hundred
  // times the log2 rule's 12 x 15 us that ZeRO-3 over thousands of ranks was charged before.
  const Placement zero = place_group(s, 4096, 1);
  ASSERT_EQ(zero.nodes, 512);
  EXPECT_NEAR(collective_time(s, Collective::all_gather, 64, zero), 15e-6 + 3584 * 3.4e-6 + 511 * 14e-6, 1e-7);
  EXPECT_NEAR(collective_time(s, Collective::reduce_scatter, 64, zero), 15e-6 + 3584 * 3.4e-6 + 511 * 14e-6, 1e-7);
  // Inside one NVSwitch node of Hopper GPUs NCCL takes NVLS's flat 25 us over the ring's 8 us +
  // 7 x 3.4 us = 31.8 us; an A100 node has no NVLS and waits for the ring; 2 ranks, 8 + 3.4 us,
  // is faster than NVLS.
  EXPECT_NEAR(collective_time(s, Collective::all_gather, 64, place_group(s, 8, 1)), 25e-6, 1e-8);
  EXPECT_NEAR(collective_time(s, Collective::all_gather, 64, place_group(s, 2, 1)), 11.4e-6, 1e-8);
  const System a100 = load_system("dgx-a100-80g");
  EXPECT_EQ(a100.intra.nvls_latency_s, 0);
  EXPECT_NEAR(collective_time(a100, Collective::all_gather, 64, place_group(a100, 8, 1)), 8e-6 + 7 * 3.4e-6, 1e-8);
  // All-to-all and send/recv are not rings: one start whatever the group.
  EXPECT_NEAR(collective_time(s, Collective::all_to_all, 64, zero), 15e-6, 1e-7);
}

TEST(CommHops, NvlsBelongsToTheNodeAndAFileWithoutStepsGetsNcclsFigures) {
  nlohmann::json doc = preset_document("system", "dgx-h100");
  doc["inter_node"]["nvls_latency_us"] = 25;
  try {
    (void)system_from_json(doc, "mine");
    ADD_FAILURE() << "nvls_latency_us in inter_node was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mine: inter_node: 'nvls_latency_us' belongs to intra_node"),
              std::string::npos)
        << e.what();
  }
  doc = preset_document("system", "h100-pcie-server");
  doc["intra_node"].erase("ring_step_latency_us");
  doc["inter_node"].erase("ring_step_latency_us");
  const System pcie = system_from_json(doc, "mine");
  EXPECT_REL(pcie.intra.ring_step_latency_s, 5.7e-6);  // NCCL's PCIe ring step
  EXPECT_REL(pcie.inter.ring_step_latency_s, 14e-6);
  EXPECT_EQ(pcie.intra.nvls_latency_s, 0);
}

TEST(CommHops, PlacementSwapsWhichGroupCrossesNodes) {
  const System s = pair_nic_system();
  Plan p = plan(Method::hybrid, 16, 1 << 16, 16, 2, 8);
  const SpGroups inner_u = place_sp_groups(s, p);
  EXPECT_EQ(inner_u.ulysses.nodes, 1);  // U2 on consecutive GPUs
  EXPECT_EQ(inner_u.ring.stride, 2);
  EXPECT_EQ(inner_u.ring.nodes, 2);
  p.placement = GroupPlacement::ring_inner;
  const SpGroups inner_r = place_sp_groups(s, p);
  EXPECT_EQ(inner_r.ulysses.stride, 8);
  EXPECT_EQ(inner_r.ulysses.nodes, 2);
  EXPECT_EQ(inner_r.ring.nodes, 1);  // R8 fills one node
  // Ulysses inside: a 2 MB all-to-all moves 1 MB over the switch (10 + 10 us); the ring's 1 MB
  // hop crosses on the NIC GPUs 6 and 7 share (20 + 100 us). Ring inside: the reverse, the
  // all-to-all crosses (20 + 100 us) and the hop stays on the switch (10 + 10 us).
  EXPECT_REL(collective_time(s, Collective::all_to_all, 2e6, inner_u.ulysses), 20e-6);
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, inner_u.ring), 120e-6);
  EXPECT_REL(collective_time(s, Collective::all_to_all, 2e6, inner_r.ulysses), 120e-6);
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, inner_r.ring), 20e-6);
}

TEST(CommHops, AttentionCostChargesThePlansPlacement) {
  // The attention layer's communication is built from the placed groups: the plan's field, not
  // a fixed Ulysses-inside layout, decides which collective crosses the nodes.
  const System s = pair_nic_system();
  Model m = tiny_model();
  m.heads = 8;
  m.kv_heads = 8;
  Plan p = plan(Method::hybrid, 16, 1 << 12, 16, 2, 8);
  for (GroupPlacement g : {GroupPlacement::ulysses_inner, GroupPlacement::ring_inner}) {
    p.placement = g;
    const SpGroups pl = place_sp_groups(s, p);
    const AttentionShapes a = attention_shapes(m, p);
    const double a2a = collective_time(s, Collective::all_to_all, a.qkv_a2a_bytes, pl.ulysses) +
                       collective_time(s, Collective::all_to_all, a.o_a2a_bytes, pl.ulysses);
    const double hop = collective_time(s, Collective::send_recv, a.kv_block_bytes, pl.ring);
    EXPECT_REL(attention_layer_cost(m, s, p).fwd_comm_s, a2a + 7 * hop) << to_string(g);
  }
}

TEST(CommHops, NamedNicsModelExactlyAsTheirPerGpuShare) {
  // A System without NICs (one per GPU at the share) and the same share spelled as 8 NICs give
  // the same times: presets that only give bandwidth_gbps keep their results.
  const System bare = [] {
    System s = pair_nic_system();
    s.nics_per_node = 0;
    s.nic_bytes_per_s = 0;
    return s;
  }();
  System named = bare;
  named.nics_per_node = 8;
  named.nic_bytes_per_s = 10e9;
  for (Collective c : {Collective::all_to_all, Collective::send_recv, Collective::all_gather, Collective::reduce_scatter,
                       Collective::all_reduce})
    for (int stride : {1, 2, 8}) {
      const Placement p = place_group(bare, 16, stride);
      EXPECT_REL(collective_time(named, c, 4e6, p), collective_time(bare, c, 4e6, p));
    }
}

TEST(CommHops, PresetsNameTheirNicsAndDeriveTheShare) {
  // a800-nvlink: 4 HDR NICs of 25 GB/s at 85% for 8 GPUs = 10.625 GB/s per GPU.
  const System a800 = load_system("a800-nvlink");
  EXPECT_EQ(a800.nics_per_node, 4);
  EXPECT_REL(a800.nic_bytes_per_s, 25e9 * 0.85);
  EXPECT_REL(a800.inter.bytes_per_s, 4 * 25e9 * 0.85 / 8);
  nlohmann::json doc = preset_document("system", "a800-nvlink");
  doc["inter_node"].erase("nic_gbps");
  try {
    (void)system_from_json(doc, "a800");
    ADD_FAILURE() << "nics_per_node without nic_gbps was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a800: inter_node: give both 'nics_per_node' and 'nic_gbps'"), std::string::npos)
        << e.what();
  }
  // A calibrated profile keeps the NIC count and writes the fitted share: the share stands and
  // the NIC rate follows it.
  doc = preset_document("system", "a800-nvlink");
  doc["inter_node"]["bandwidth_gbps"] = 8.0;
  doc["inter_node"]["efficiency"] = 1.0;
  const System fitted = system_from_json(doc, "fitted");
  EXPECT_REL(fitted.inter.bytes_per_s, 8e9);
  EXPECT_REL(fitted.nic_bytes_per_s, 16e9);
}

// Links shared the way they are (issue 27, part 4): flows of different groups on one link add up,
// wherever the link is.
TEST(CommLinks, GroupsThatCrossTheSocketsShareTheSocketLink) {
  // 8 PCIe GPUs, 4 per socket (20 GB/s each, 5 GB/s between the sockets). One ring of 8 crosses
  // the socket link once each way: 1 MB at 5 GB/s, 200 us. Two rings of 4, 2 apart (the ring
  // groups of a U2 x R4 hybrid), cross it twice each way: their flows share it, 400 us.
  System s = round_pcie_system();
  s.gpus_per_node = 8;
  s.intra.gpus_per_socket = 4;
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 8, 1)), 10e-6 + 200e-6);
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 4, 2)), 10e-6 + 400e-6);
  // NCCL rings: one group crossing the sockets moves (n-1)/n of 8 MB = 7 MB through the socket
  // link each way (1.4 ms); two groups of 4 with members behind both sockets, 2 x 6 MB (2.4 ms).
  // Latency: 10 us to start, then 7 (or 3) ring steps of 1 us.
  EXPECT_REL(collective_time(s, Collective::all_gather, 8e6, place_group(s, 8, 1)), 17e-6 + 1.4e-3);
  EXPECT_REL(collective_time(s, Collective::all_gather, 8e6, place_group(s, 4, 2)), 13e-6 + 2.4e-3);
}

TEST(CommLinks, APcieGpusOneLinkCarriesItsPeersAndItsNicTraffic) {
  // Two 4-GPU PCIe nodes, a NIC per GPU at 10 GB/s, each GPU's link 20 GB/s. An all-to-all of 8
  // ranks, 8 MB each: a GPU sends 3 chunks of 1 MB to node-mates and 4 across, all through its
  // own link (7 MB at 20 GB/s = 350 us); its NIC carries the 4 (400 us) and the socket link
  // 2 x 2 chunks of the node (800 us) -- the socket link is the busiest, + 20 us.
  const System s = round_pcie_system();
  EXPECT_REL(collective_time(s, Collective::all_to_all, 8e6, place_group(s, 8, 1)), 800e-6 + 20e-6);
  // With a fast socket link the NIC is next: its 4 MB at 10 GB/s (400 us) against the GPU link's
  // 7 MB at 20 GB/s (350 us); with a 10 GB/s GPU link, peers and NIC traffic together, 700 us.
  System fast = s;
  fast.intra.cross_socket_bytes_per_s = 1e12;
  EXPECT_REL(collective_time(fast, Collective::all_to_all, 8e6, place_group(fast, 8, 1)), 400e-6 + 20e-6);
  fast.intra.bytes_per_s = 10e9;  // now the GPU link: 7 MB at 10 GB/s
  EXPECT_REL(collective_time(fast, Collective::all_to_all, 8e6, place_group(fast, 8, 1)), 700e-6 + 20e-6);
}

TEST(CommLinks, ANicFasterThanItsGpusPcieLinkWaitsForTheLink) {
  // GPUDirect RDMA: what a GPU sends across nodes passes its own PCIe link first.
  System s = pair_nic_system();
  s.nic_bytes_per_s = 40e9;  // one NIC per pair at 40 GB/s, the GPU's PCIe link at 32 GB/s
  // Ring of 16 on two nodes: GPU 7's hop is alone on its NIC but limited to 32 GB/s: 1 MB in 31.25 us.
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 16, 1)), 20e-6 + 31.25e-6);
}

TEST(CommLinks, AGroupThatStraddlesTwoNodesCrosses) {
  // Rings of 3 consecutive ranks on 8-GPU nodes: ranks 6, 7, 8 straddle the first two nodes, so
  // 7 -> 8 and 8 -> 6 cross on NIC 3 (alone there, 20 GB/s): 1 MB in 50 us + the network's 20 us,
  // where a model of whole nodes alone saw 3 ranks in one node (10 + 10 us).
  const System s = pair_nic_system();
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 3, 1)), 20e-6 + 50e-6);
  EXPECT_EQ(describe_placement(s, plan(Method::ring_zigzag, 12, 3 * 1024, 3, 1, 3)),
            "R3 over 2 nodes (1-2/node), 1 crossing flow per NIC");
}

// Nodes that the groups do not tile (issue 35, case 7): 12 GPUs on 6-GPU nodes, TP 4 and a ring of
// 3. TP groups 0-3, 4-7, 8-11: the middle one crosses (4, 5 | 6, 7); rings 0, 4, 8 and the like sit
// 2 + 1 on the two nodes, never on three. The placement says so, and the costs come from the real
// ranks (link_loads walks them), so the crossing TP group is what the step pays for.
TEST(CommLinks, GroupsOnNodesTheyDoNotTileAreLaidOnTheRealBoundaries) {
  System s = pair_nic_system();
  s.gpus_per_node = 6;
  s.nics_per_node = 6;
  const Plan p = plan(Method::ring, 12, 48 * 1024, 3, 1, 3, 4);
  const Placement tp = place_tp_group(s, p), ring = place_sp_groups(s, p).ring;
  EXPECT_EQ(tp.nodes, 2);
  EXPECT_EQ(tp.per_node, 2);
  EXPECT_EQ(ring.nodes, 2);
  EXPECT_EQ(ring.per_node, 1);
  EXPECT_EQ(ring.most_per_node, 2);
  const std::string label = describe_placement(s, p);
  EXPECT_NE(label.find("TP4 over 2 nodes (2/node)"), std::string::npos) << label;
  EXPECT_NE(label.find("R3 over 2 nodes (1-2/node)"), std::string::npos) << label;
  // A TP group inside one node pays no network; this one does.
  EXPECT_GT(crossing_flows_per_nic(s, Collective::all_gather, tp), 0);
  // Nodes the groups tile keep the closed form: TP 2 and rings of 3, 2 apart, on 6-GPU nodes.
  const Placement whole = place_sp_groups(s, plan(Method::ring, 12, 48 * 1024, 6, 1, 6, 2)).ring;
  EXPECT_EQ(whole.nodes, 2);
  EXPECT_EQ(whole.per_node, 3);
  EXPECT_EQ(whole.most_per_node, 3);
}

TEST(CommLinks, CountsTheCrossingFlowsPerNicAndNamesThePlacement) {
  const System s = pair_nic_system();  // 8 GPUs, 4 NICs: one per GPU pair
  EXPECT_EQ(crossing_flows_per_nic(s, Collective::send_recv, place_group(s, 16, 1)), 1);
  EXPECT_EQ(crossing_flows_per_nic(s, Collective::send_recv, place_group(s, 2, 8)), 2);  // all 8 GPUs cross
  EXPECT_EQ(crossing_flows_per_nic(s, Collective::send_recv, place_group(s, 8, 1)), 0);
  EXPECT_EQ(crossing_flows_per_nic(s, Collective::all_to_all, place_group(s, 16, 1)), 16);  // 2 GPUs x 8 remote peers
  Plan p = plan(Method::hybrid, 16, 1 << 16, 16, 8, 2);
  EXPECT_EQ(describe_placement(s, p), "U8 in a node; R2 over 2 nodes (1/node), 2 crossing flows per NIC");
  p.placement = GroupPlacement::ring_inner;
  EXPECT_EQ(describe_placement(s, p), "U8 over 2 nodes (4/node), 8 crossing flows per NIC; R2 in a node");
  EXPECT_EQ(describe_placement(s, plan(Method::ring_zigzag, 16, 1 << 16, 16, 1, 16)),
            "R16 over 2 nodes (8/node), 1 crossing flow per NIC");
  EXPECT_EQ(describe_placement(s, plan(Method::ulysses, 16, 1 << 16, 1, 1, 1)), "no SP group; data parallel over 2 nodes");
}

// The USP-style question: SP over all 16 GPUs of two 8-GPU A800 nodes (NVLink 200 GB/s per
// direction, 4 HDR NICs per node) at 64K tokens, llama3-8b, ZeRO-1 and full checkpointing (one
// memory setting for all, so only the structure differs). docs/simulator.md prints the table.
TEST(CommHops, UspQuestionOnTwoA800NodesRanksTheHybridsByWhereTheyCommunicate) {
  const System s = load_system("a800-nvlink");
  const Model m = load_model("llama3-8b");
  auto step = [&](Method method, int u, int r, GroupPlacement g = GroupPlacement::ulysses_inner) {
    Plan p = plan(method, 16, 64 * 1024, 16, u, r);
    p.placement = g;
    p.mem.zero = 1;
    p.mem.checkpoint = Checkpoint::full;
    const Result res = simulate(m, s, p);
    EXPECT_TRUE(res.valid && res.fits) << describe(p);
    return res;
  };
  const auto ring_inner = GroupPlacement::ring_inner;
  const Result u8r2 = step(Method::hybrid, 8, 2), u4r4 = step(Method::hybrid, 4, 4), u2r8 = step(Method::hybrid, 2, 8);
  const Result u8r2_x = step(Method::hybrid, 8, 2, ring_inner), u4r4_x = step(Method::hybrid, 4, 4, ring_inner),
               u2r8_x = step(Method::hybrid, 2, 8, ring_inner);
  const Result ulysses = step(Method::ulysses, 16, 1), zigzag = step(Method::ring_zigzag, 1, 16),
               ring = step(Method::ring, 1, 16);
  // Ulysses inside the nodes: the all-to-alls ride NVLink and only the ring crosses. Its hops
  // (two GPUs per HDR NIC) hide under a block's attention, so fewer, larger ring steps win:
  // U8xR2 > U4xR4 > U2xR8, and U8xR2 is the best plan of all.
  EXPECT_LT(u8r2.step_time_s, u4r4.step_time_s);
  EXPECT_LT(u4r4.step_time_s, u2r8.step_time_s);
  for (const Result* other : {&u8r2_x, &u4r4_x, &u2r8_x, &ulysses, &zigzag, &ring})
    EXPECT_LT(u2r8.step_time_s, other->step_time_s) << describe(other->plan);
  // The ring inside the nodes puts the all-to-all across them instead: half of every rank's
  // all-to-all bytes (U/2 of U chunks) cross on a 10.6 GB/s NIC share whatever U is, so the
  // three placements expose the same attention communication and each is slower than its
  // Ulysses-inner twin; among them the fewer ring steps still win.
  EXPECT_NEAR(u8r2_x.time.exposed_attention_comm / u2r8_x.time.exposed_attention_comm, 1.0, 1e-9);
  EXPECT_NEAR(u4r4_x.time.exposed_attention_comm / u2r8_x.time.exposed_attention_comm, 1.0, 1e-9);
  EXPECT_LT(u8r2.step_time_s, u8r2_x.step_time_s);
  EXPECT_LT(u4r4.step_time_s, u4r4_x.step_time_s);
  EXPECT_LT(u2r8.step_time_s, u2r8_x.step_time_s);
  EXPECT_LT(u8r2_x.step_time_s, u4r4_x.step_time_s);
  EXPECT_LT(u4r4_x.step_time_s, u2r8_x.step_time_s);
  // Pure Ulysses 16 crosses with half its all-to-all too, and replicates llama3-8b's 8 KV heads;
  // the zigzag ring's only crossing hops have a NIC each and hide under compute, but its 4K-token
  // blocks run below the kernels' best rate. Those two and the ring-inner hybrids land within a
  // few percent of each other (their order there is not pinned). The contiguous ring is last:
  // under the causal mask its last rank computes a full block at every one of 16 steps.
  EXPECT_LT(zigzag.step_time_s, ring.step_time_s);
  for (const Result* other : {&u8r2_x, &u4r4_x, &u2r8_x, &ulysses, &zigzag})
    EXPECT_LT(other->step_time_s, ring.step_time_s) << describe(other->plan);
}

// "When does all-gather beat p2p?" (Transformer Engine's cp_comm_type=all_gather against p2p):
// Llama-3-8B on DGX H100 nodes, SP over every GPU, one memory setting for both. The ring hides a
// hop under a block's attention, but a hop that crosses nodes has one NIC; the all-gather is
// exposed, but NCCL runs it over every NIC of the node. So on one NVLink node the ring always wins
// (its hops hide, the gather does not), while across nodes the all-gather wins at short sequences
// (blocks too small to hide the crossing hops) and loses at long ones (every hop hidden, the
// gather still exposed); the more nodes, the longer the sequence where the ring takes over.
TEST(CommHops, AllGatherBeatsTheRingWhereTheRingCannotHideItsHops) {
  const System s = load_system("dgx-h100");
  const Model m = load_model("llama3-8b");
  auto step = [&](Method method, int gpus, std::int64_t n) {
    Plan p = plan(method, gpus, n, gpus, 1, gpus);
    p.mem.zero = 3;
    p.mem.checkpoint = Checkpoint::full;
    const Result r = simulate(m, s, p);
    EXPECT_TRUE(r.valid) << describe(p);
    return r;
  };
  auto ratio = [&](int gpus, std::int64_t n) {  // all-gather's step time over the zigzag ring's
    return step(Method::allgather, gpus, n).step_time_s / step(Method::ring_zigzag, gpus, n).step_time_s;
  };
  const std::int64_t K = 1024;
  for (std::int64_t n : {8 * K, 32 * K, 128 * K, 1024 * K}) {
    EXPECT_GT(ratio(8, n), 1.0) << "one node, " << n << " tokens: the ring hides its NVLink hops";
  }
  std::int64_t last_crossover = 0;
  for (int gpus : {16, 32, 64}) {
    EXPECT_LT(ratio(gpus, 8 * K), 1.0) << gpus << " GPUs at 8K: the ring's crossing hops show";
    EXPECT_GT(ratio(gpus, 1024 * K), 1.0) << gpus << " GPUs at 1M: every hop hides, the gather does not";
    // Where the ring takes over: at a longer sequence on more nodes, never earlier.
    std::int64_t crossover = 0;
    for (std::int64_t n = 8 * K; n <= 1024 * K && !crossover; n *= 2)
      if (ratio(gpus, n) > 1.0) crossover = n;
    EXPECT_GE(crossover, last_crossover) << gpus << " GPUs";
    last_crossover = crossover;
    // Why: at 8K the ring leaves more communication exposed than the whole gather costs.
    const Result ag = step(Method::allgather, gpus, 8 * K), rz = step(Method::ring_zigzag, gpus, 8 * K);
    EXPECT_LT(ag.time.exposed_attention_comm, rz.time.exposed_attention_comm) << gpus << " GPUs";
  }
  EXPECT_GT(last_crossover, 64 * K);  // 64 GPUs: the gather still wins at 64K per sequence
}

}  // namespace
}  // namespace seqpar::sim
