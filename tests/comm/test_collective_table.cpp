// The collective table (comm/collective.hpp): one entry per collective of core, and through it
// every collective's shape, fill, run and check agree on virtual ranks, while a corrupted input
// is caught. The benchmarks use nothing else to tell collectives apart.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "seqpar/comm/collective.hpp"
#include "seqpar/comm/element.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {
namespace {

TEST(CollectiveTable, EveryCollectiveHasOneEntry) {
  EXPECT_EQ(collective_table().size(), all_collectives.size());
  for (Collective op : all_collectives) {
    EXPECT_EQ(collective_entry(op).op, op);
    int entries = 0;
    for (const CollectiveEntry& e : collective_table()) entries += e.op == op;
    EXPECT_EQ(entries, 1) << to_string(op);
  }
}

TEST(CollectiveTable, ShapesFollowTheEntry) {
  for (const CollectiveEntry& e : collective_table()) {
    const Shape s = make_shape(e.op, 4 * 4 * 6, DType::fp32, 4);  // 24 floats over 4 ranks
    EXPECT_EQ(s.count, 24u);
    EXPECT_EQ(s.call_count, e.split ? 6u : 24u) << to_string(e.op);
    EXPECT_GE(s.send_count, s.call_count);
    EXPECT_GE(s.recv_count, s.call_count);
    // 20 floats do not split into 3 equal chunks: only the split collectives care.
    if (e.split) {
      EXPECT_THROW(make_shape(e.op, 4 * 20, DType::fp32, 3), Error) << to_string(e.op);
    } else {
      EXPECT_NO_THROW(make_shape(e.op, 4 * 20, DType::fp32, 3)) << to_string(e.op);
    }
  }
}

// Each rank fills, runs and checks one collective on a virtual world; returns the wrong
// elements summed over the ranks. `corrupt`: rank 0's first input element is off by 3.
std::size_t wrong_elements(Collective op, int P, DType dt, bool corrupt) {
  auto comms = make_virtual_world(P, false);
  std::vector<std::size_t> wrong(static_cast<std::size_t>(P));
  std::vector<std::thread> threads;
  for (auto& c : comms)
    threads.emplace_back([&, comm = c.get()] {
      const Shape s = make_shape(op, static_cast<std::int64_t>(dtype_size(dt)) * P * 8, dt, P);
      std::vector<unsigned char> send(s.send_count * dtype_size(dt)), recv(s.recv_count * dtype_size(dt), 0xA5);
      fill_send(op, send.data(), s, dt, comm->rank(), P);
      if (corrupt && comm->rank() == 0) store(send.data(), 0, dt, pattern_value(0, 0, dt) + 3);
      run_collective(op, *comm, send.data(), recv.data(), s, dt);
      comm->synchronize();
      wrong[static_cast<std::size_t>(comm->rank())] = count_wrong(op, recv.data(), s, dt, comm->rank(), P);
    });
  for (auto& t : threads) t.join();
  std::size_t total = 0;
  for (std::size_t w : wrong) total += w;
  return total;
}

TEST(CollectiveTable, EveryEntryRunsAndChecksOnVirtualRanks) {
  for (const CollectiveEntry& e : collective_table())
    for (int P : {2, 3, 4})
      for (DType dt : {DType::fp32, DType::bf16, DType::u8}) {
        EXPECT_EQ(wrong_elements(e.op, P, dt, false), 0u) << to_string(e.op) << " P=" << P << " " << to_string(dt);
        EXPECT_GT(wrong_elements(e.op, P, dt, true), 0u) << to_string(e.op) << " P=" << P << " " << to_string(dt);
      }
}

}  // namespace
}  // namespace seqpar::comm
