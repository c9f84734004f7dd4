// NVLink domains larger than 8 GPUs (issue 36, part 3): the world bound of a placement (a job on
// part of a 72-GPU rack, or over two racks, has a partly filled last node; only the groups on real
// ranks are laid out and charged), hand-derived on a synthetic 72-GPU node with round numbers, and
// what the GB200 NVL72 and DGX B200 presets change in placement, advise, FP8 and `seqpar comm`.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using testing::plan;
constexpr double kRel = 1e-12;

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }
#define EXPECT_REL(a, b) EXPECT_LT(rel((a), (b)), kRel) << #a " = " << (a) << ", expected " << (b)

// A 72-GPU NVLink domain: 100 GB/s switch port per GPU (10 us); one 1 GB/s NIC per GPU (20 us),
// slow so that a crossing shows; each GPU's PCIe link at 32 GB/s, faster than its NIC.
System rack_system() {
  System s = testing::round_system();
  s.gpus_per_node = 72;
  s.nics_per_node = 72;
  s.nic_bytes_per_s = 1e9;
  s.inter.bytes_per_s = 1e9;
  s.gpu.pcie_bytes_per_s = 32e9;
  return s;
}

TEST(Nvl72WorldBound, SixtyFourGpusOfARackStayOnItsNvlink) {
  const System s = rack_system();
  // 64 ranks, one Ulysses group of 64 on GPUs 0-63 of the rack: every chunk stays on the switch.
  // All-to-all of 64 MB: 63 chunks of 1 MB leave each GPU at 100 GB/s = 630 us, + 10 us.
  const Placement bounded = place_group(s, 64, 1, 64);
  EXPECT_EQ(bounded.world, 64);  // below one period of the tiling, lcm(64, 72) = 576 ranks
  EXPECT_EQ(bounded.nodes, 1);
  EXPECT_EQ(bounded.per_node, 64);
  EXPECT_REL(collective_time(s, Collective::all_to_all, 64e6, bounded), 10e-6 + 630e-6);
  EXPECT_EQ(crossing_flows_per_nic(s, Collective::all_to_all, bounded), 0);
  // Without the bound the groups would repeat past rank 63: the one on ranks 64-127 has 8
  // members on the rack (64-71) and 56 on the next, so each of those 8 sends 56 chunks of 1 MB
  // over its own 1 GB/s NIC: 56 ms + 20 us, a rack that does not exist.
  const Placement endless = place_group(s, 64, 1);
  EXPECT_EQ(endless.world, 0);
  EXPECT_EQ(endless.nodes, 2);
  EXPECT_EQ(endless.per_node, 8);
  EXPECT_EQ(endless.most_per_node, 56);
  EXPECT_REL(collective_time(s, Collective::all_to_all, 64e6, endless), 20e-6 + 56e-3);
  // The ZeRO group of the 64-GPU job (all 64 ranks, ring all-gather of 64 MB): 63 MB through each
  // port at 100 GB/s = 630 us, latency 10 us + 63 ring steps of 1 us = 73 us; no NIC.
  EXPECT_REL(collective_time(s, Collective::all_gather, 64e6, bounded), 73e-6 + 630e-6);
  // The same through a plan: every group of a 64-GPU plan is bounded by its 64 GPUs.
  const Plan p = plan(Method::ulysses, 64, 1 << 20, 64, 64, 1);
  EXPECT_EQ(place_sp_groups(s, p).ulysses.nodes, 1);
  EXPECT_EQ(place_zero_group(s, p).nodes, 1);
  EXPECT_EQ(describe_placement(s, p), "U64 in a node");
}

TEST(Nvl72WorldBound, AGroupOverTwoRacksIsChargedAtItsRealSplit) {
  const System s = rack_system();
  // 128 ranks over two racks, one ZeRO group of all 128: 72 members on rack 0, 56 on rack 1 (the
  // last rack partly filled). An all-gather of 128 MB moves v = 127 MB through every member's
  // port (1.27 ms at 100 GB/s); the part that leaves a rack is shared by its members' NICs, so
  // each of rack 1's 56 carries v / 56 = 2.268 MB at 1 GB/s = 2.268 ms, the busiest link; latency
  // 20 us + the ring's 126 steps inside the racks (1 us) and 1 between them (5 us) = 151 us.
  const double v = 128e6 * 127.0 / 128.0;
  const Placement bounded = place_group(s, 128, 1, 128);
  EXPECT_EQ(bounded.world, 128);
  EXPECT_EQ(bounded.nodes, 2);
  EXPECT_EQ(bounded.per_node, 56);
  EXPECT_EQ(bounded.most_per_node, 72);
  EXPECT_REL(collective_time(s, Collective::all_gather, 128e6, bounded), 151e-6 + v / 56 / 1e9);
  // Endless, groups would repeat every 128 ranks over racks of 72; as gcd(128, 72) = 8, one has 8
  // members on a rack (ranks 640-767: 640-647 on the rack of 576-647), whose NICs would carry
  // v / 8 each: 15.9 ms, for GPUs the job does not have. That group spans three racks (8 + 72 +
  // 48): latency 20 us + 125 steps inside racks (1 us) + 2 between them (5 us) = 155 us.
  const Placement endless = place_group(s, 128, 1);
  EXPECT_EQ(endless.world, 0);
  EXPECT_EQ(endless.per_node, 8);
  EXPECT_EQ(endless.nodes, 3);
  EXPECT_REL(collective_time(s, Collective::all_gather, 128e6, endless), 155e-6 + v / 8 / 1e9);
  // The ring groups of a 128-GPU U64 x R2 hybrid (rank r with r + 64): r = 0-7 meet r + 64 on
  // rack 0; r = 8-63 send to 72-127 on rack 1, 1 MB each over its own NIC: 1 ms + 20 us; the
  // Ulysses groups: 0-63 on rack 0, 64-127 split 8 / 56 as in the endless case above.
  const Plan h = plan(Method::hybrid, 128, 1 << 20, 128, 64, 2);
  const SpGroups g = place_sp_groups(s, h);
  EXPECT_EQ(g.ring.world, 128);
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, g.ring), 20e-6 + 1e-3);
  EXPECT_EQ(g.ulysses.nodes, 2);
  EXPECT_EQ(g.ulysses.per_node, 8);
}

TEST(Nvl72WorldBound, WholePeriodsLayOutAsAnEndlessWorld) {
  // On 8-GPU nodes every power-of-two job holds whole periods (lcm(block, 8) divides the GPUs),
  // so the bound is dropped and placements, keys and times are those of the endless world: the
  // existing systems' outputs do not change (seqpar-sim-digest on the DGX/HGX presets agrees).
  System s = testing::round_system();
  s.gpus_per_node = 8;
  for (const auto& [size, stride, world] : std::vector<std::array<int, 3>>{{16, 1, 64}, {8, 2, 16}, {2, 8, 16}, {64, 1, 64}}) {
    const Placement a = place_group(s, size, stride, world), b = place_group(s, size, stride);
    EXPECT_EQ(a.world, 0) << size << "x" << stride << " of " << world;
    EXPECT_EQ(a.nodes, b.nodes);
    EXPECT_EQ(a.per_node, b.per_node);
    EXPECT_EQ(a.most_per_node, b.most_per_node);
    for (Collective c : {Collective::all_to_all, Collective::send_recv, Collective::all_gather})
      EXPECT_EQ(collective_time(s, c, 1e6, a), collective_time(s, c, 1e6, b));
  }
  // Below one period the bound stays: 12 ranks on 8-GPU nodes (period lcm(12, 8) = 24).
  EXPECT_EQ(place_group(s, 12, 1, 12).world, 12);
}

TEST(Nvl72Presets, TheRackIsOneNodeForPlacement) {
  const System s = load_system("gb200-nvl72");
  EXPECT_EQ(s.gpus_per_node, 72);
  // Ulysses 16, 32 and 64 of a 64-GPU job stay on NVLink; on DGX B200 (8 per node) 16 crosses.
  for (int u : {16, 32, 64}) {
    const Plan p = plan(Method::ulysses, 64, 1 << 20, u, u, 1);
    EXPECT_EQ(place_sp_groups(s, p).ulysses.nodes, 1) << u;
    EXPECT_EQ(crossing_flows_per_nic(s, Collective::all_to_all, place_sp_groups(s, p).ulysses), 0) << u;
  }
  const System b = load_system("dgx-b200");
  EXPECT_EQ(place_sp_groups(b, plan(Method::ulysses, 64, 1 << 20, 16, 16, 1)).ulysses.nodes, 2);
}

TEST(Nvl72Presets, AdviseUsesALargerUlyssesDegreeOnTheRack) {
  // Llama-3-70B at 1M tokens on 64 GPUs. On DGX B200 a Ulysses group beyond 8 leaves the node:
  // its all-to-all moves (U - 8) / U of each rank's q, k, v and output over a 50 GB/s NIC instead
  // of a 900 GB/s NVLink port (18x slower), so the search keeps U = 8 and rings the rest (the ring
  // hop overlaps attention, the all-to-all does not). On GB200 NVL72 the 64 GPUs share one switch,
  // so U = 16 costs no more per byte than U = 8 and cuts the ring steps whose KV blocks and
  // per-step overheads a ring of 8 pays: the search picks a larger inner Ulysses degree.
  const Model m = load_model("llama3-70b");
  const Advice rack = advise(m, load_system("gb200-nvl72"), 64, 1 << 20, SearchSpace{});
  const Advice dgx = advise(m, load_system("dgx-b200"), 64, 1 << 20, SearchSpace{});
  ASSERT_NE(rack.best(), nullptr);
  ASSERT_NE(dgx.best(), nullptr);
  const Plan& r = rack.best()->plan;
  const Plan& d = dgx.best()->plan;
  EXPECT_LE(d.ulysses_degree, 8) << describe(d);
  EXPECT_GT(r.ulysses_degree, d.ulysses_degree) << describe(r) << " vs " << describe(d);
  EXPECT_EQ(place_sp_groups(load_system("gb200-nvl72"), r).ulysses.nodes, 1) << describe(r);
}

TEST(Nvl72Presets, TensorParallelStopsAtTheKvHeadsInARack) {
  // Megatron-Core splits the KV groups over TP (divide(num_query_groups, tp) asserts): Llama-3-70B's
  // 8 KV heads stop the search at TP 8 even where a node has 72 GPUs (64 query heads would allow 64).
  EXPECT_EQ(tp_degrees(load_model("llama3-70b"), load_system_with_framework("gb200-nvl72", "", "megatron-core"), 64),
            (std::vector<int>{1, 2, 4, 8}));
}

TEST(Nvl72Presets, MxFp8RunsOnBlackwellAndIsRefusedOnHopper) {
  // check_fp8: MXFP8's block-scaled tensor cores need compute capability 10 (B200: 10.0).
  const Model m = load_model("llama3-8b");
  Plan p = plan(Method::ulysses, 8, 1 << 16, 8, 8, 1);
  p.precision = {parse_fp8_parts("gemm"), Fp8Recipe::mxfp8};
  std::vector<std::string> errors;
  EXPECT_TRUE(check_plan(m, load_system_with_framework("dgx-b200", "", "megatron-core"), p, errors))
      << (errors.empty() ? "" : errors[0]);
  errors.clear();
  EXPECT_FALSE(check_plan(m, load_system_with_framework("dgx-h100", "", "megatron-core"), p, errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("mxfp8"), std::string::npos) << errors[0];
}

TEST(Nvl72Presets, CommKeepsNvlinkBusBandwidthUpTo72Ranks) {
  // gb200-nvl72: 900 GB/s per direction at efficiency 0.8 = 720 GB/s. An all-gather of 1 GiB
  // over 72 ranks: 1 GiB x 71/72 through each port = 1.4706 ms, + NVLS's flat 25 us (the ring
  // would wait 8 us + 71 steps of 3.4 us = 249.4 us); bus bandwidth = algbw x 71/72. Over 8 ranks on DGX B200 the same link; at 72 ranks on
  // DGX B200 (9 nodes) the ring's crossing shares the NICs (8 x 50 GB/s x 0.85 per node).
  const System s = load_system("gb200-nvl72");
  const double bytes = 1073741824.0, v = bytes * 71 / 72;
  const CommEstimate e = estimate_collective(s, Collective::all_gather, bytes, 72);
  EXPECT_REL(e.time_s, 25e-6 + v / 720e9);
  EXPECT_REL(e.busbw_gbps, bytes / e.time_s / 1e9 * 71 / 72);
  EXPECT_GT(e.busbw_gbps, 690);
  const CommEstimate across = estimate_collective(load_system("dgx-b200"), Collective::all_gather, bytes, 72);
  EXPECT_LT(across.busbw_gbps, 0.5 * e.busbw_gbps);
}

}  // namespace
}  // namespace seqpar::sim
