// The SP x DP rank layout and the subgroups built from it.
#include <fmt/format.h>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {

RankLayout RankLayout::make(int world, int ulysses_degree, int ring_degree) {
  if (world < 1) throw Error(fmt::format("world size {} must be at least 1", world));
  if (ulysses_degree < 1)
    throw Error(fmt::format("Ulysses degree {} must be at least 1", ulysses_degree));
  if (ring_degree < 1) throw Error(fmt::format("ring degree {} must be at least 1", ring_degree));
  const int sp = ulysses_degree * ring_degree;
  if (world % sp != 0)
    throw Error(fmt::format(
        "SP degree {} (Ulysses degree {} x ring degree {}) does not divide the {} ranks",
        sp, ulysses_degree, ring_degree, world));
  RankLayout l;
  l.world = world;
  l.sp = sp;
  l.ulysses = ulysses_degree;
  l.ring = ring_degree;
  l.dp = world / sp;
  return l;
}

std::vector<int> RankLayout::sp_group(int w) const {
  std::vector<int> g;
  for (int i = 0; i < sp; ++i) g.push_back(dp_index(w) * sp + i);
  return g;
}

std::vector<int> RankLayout::ulysses_group(int w) const {
  std::vector<int> g;
  const int base = dp_index(w) * sp + ring_index(w) * ulysses;
  for (int u = 0; u < ulysses; ++u) g.push_back(base + u);
  return g;
}

std::vector<int> RankLayout::ring_group(int w) const {
  std::vector<int> g;
  const int base = dp_index(w) * sp + ulysses_index(w);
  for (int r = 0; r < ring; ++r) g.push_back(base + r * ulysses);
  return g;
}

std::vector<int> RankLayout::dp_group(int w) const {
  std::vector<int> g;
  for (int d = 0; d < dp; ++d) g.push_back(sp_index(w) + d * sp);
  return g;
}

Groups make_groups(Communicator& world, int ulysses_degree, int ring_degree) {
  Groups g;
  g.layout = RankLayout::make(world.size(), ulysses_degree, ring_degree);
  const int w = world.rank();
  // Same order on every rank: each subgroup() is collective over world.
  g.sp = world.subgroup(g.layout.sp_group(w));
  g.ulysses = world.subgroup(g.layout.ulysses_group(w));
  g.ring = world.subgroup(g.layout.ring_group(w));
  g.dp = world.subgroup(g.layout.dp_group(w));
  return g;
}

}  // namespace seqpar::comm
