#include "seqpar/train/seq_layout.hpp"

#include <fmt/format.h>

#include <limits>

#include "seqpar/core/error.hpp"

namespace seqpar::train {

SeqLayout::SeqLayout(std::int64_t seq_len, int ulysses, int ring, bool zigzag, KvExchange kv)
    : n_(seq_len), u_(ulysses), r_(ring), zigzag_(zigzag && ring > 1), kv_(kv) {
  if (seq_len <= 0) throw Error(fmt::format("seq_len = {}: must be positive", seq_len));
  if (ulysses < 1 || ring < 1)
    throw Error(fmt::format("ulysses_degree = {}, ring_degree = {}: both must be >= 1", ulysses,
                            ring));
  if (seq_len > std::numeric_limits<int>::max())
    throw Error(fmt::format("seq_len = {}: the training step indexes tokens with int", seq_len));
  const std::int64_t div = static_cast<std::int64_t>(ulysses) * ring;
  if (seq_len % div != 0)
    throw Error(fmt::format("seq_len = {} must be divisible by sp = ulysses_degree x ring_degree = {}",
                            seq_len, div));
  if (kv == KvExchange::all_gather && ulysses != 1)
    throw Error(fmt::format("ulysses_degree = {}: all-gather KV context parallelism gathers K,V over the ring group "
                            "alone (ulysses_degree 1)", ulysses));
  if (zigzag_ && seq_len % (2 * static_cast<std::int64_t>(ring)) != 0)
    throw Error(fmt::format("seq_len = {} must be divisible by 2 x ring_degree = {} for zigzag sharding",
                            seq_len, 2 * ring));
}

std::vector<Segment> SeqLayout::group_segments(int g) const {
  std::vector<Segment> segs;
  auto push = [&](std::int64_t pos, int len) {
    if (!segs.empty() && segs.back().pos + segs.back().len == pos) {
      segs.back().len += len;
      return;
    }
    const int offset = segs.empty() ? 0 : segs.back().offset + segs.back().len;
    segs.push_back({pos, len, offset, 0, pos});
  };
  if (!zigzag_) {
    push(static_cast<std::int64_t>(g) * group_len(), group_len());
  } else {
    const int chunk = static_cast<int>(n_ / (2 * r_));
    push(static_cast<std::int64_t>(g) * chunk, chunk);
    push(static_cast<std::int64_t>(2 * r_ - 1 - g) * chunk, chunk);
  }
  return segs;
}

std::vector<int> SeqLayout::positions(int sp_index) const {
  const int g = sp_index / u_, u = sp_index % u_;
  std::vector<int> group;
  group.reserve(static_cast<std::size_t>(group_len()));
  for (const Segment& s : group_segments(g))
    for (int i = 0; i < s.len; ++i) group.push_back(static_cast<int>(s.pos + i));
  const int l = local_len();
  return {group.begin() + static_cast<std::ptrdiff_t>(u) * l,
          group.begin() + static_cast<std::ptrdiff_t>(u + 1) * l};
}

}  // namespace seqpar::train
