#include "seqpar/comm/collective.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <vector>

#include "seqpar/comm/element.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {

namespace {

void shape_all_to_all(Shape& s, std::size_t per_rank) {
  s.send_count = s.recv_count = s.count;
  s.call_count = per_rank;
}
void shape_all_gather(Shape& s, std::size_t per_rank) {
  s.send_count = per_rank;
  s.recv_count = s.count;
  s.call_count = per_rank;
}
void shape_reduce_scatter(Shape& s, std::size_t per_rank) {
  s.send_count = s.count;
  s.recv_count = per_rank;
  s.call_count = per_rank;
}
void shape_whole(Shape& s, std::size_t) { s.send_count = s.recv_count = s.call_count = s.count; }

// Receive element j of rank `rank` (chunks of `chunk` elements): rank j / chunk's piece for this rank.
InputElement from_all_to_all(std::size_t j, std::size_t chunk, int rank, int) {
  return {static_cast<int>(j / chunk), static_cast<std::size_t>(rank) * chunk + j % chunk};
}
InputElement from_all_gather(std::size_t j, std::size_t chunk, int, int) {
  return {static_cast<int>(j / chunk), j % chunk};
}
InputElement from_left_neighbour(std::size_t j, std::size_t, int rank, int ranks) { return {(rank - 1 + ranks) % ranks, j}; }
// Reductions: the index every rank contributes (the rank is unused: all of them add).
InputElement from_reduce_scatter(std::size_t j, std::size_t chunk, int rank, int) {
  return {-1, static_cast<std::size_t>(rank) * chunk + j};
}
InputElement from_same_index(std::size_t j, std::size_t, int, int) { return {-1, j}; }

void run_all_to_all(Communicator& c, const void* send, void* recv, const Shape& s, DType dt) {
  c.all_to_all(send, recv, s.call_count, dt);
}
void run_all_gather(Communicator& c, const void* send, void* recv, const Shape& s, DType dt) {
  c.all_gather(send, recv, s.call_count, dt);
}
void run_reduce_scatter(Communicator& c, const void* send, void* recv, const Shape& s, DType dt) {
  c.reduce_scatter(send, recv, s.call_count, dt);
}
void run_all_reduce(Communicator& c, const void* send, void* recv, const Shape& s, DType dt) {
  c.all_reduce(send, recv, s.call_count, dt);
}
// One ring step: to rank + 1, from rank - 1, waited on.
void run_send_recv(Communicator& c, const void* send, void* recv, const Shape& s, DType dt) {
  const int P = c.size(), r = c.rank();
  Request req = c.send_recv_async(send, (r + 1) % P, recv, (r - 1 + P) % P, s.call_count, dt);
  c.wait(req);
}

}  // namespace

const std::vector<CollectiveEntry>& collective_table() {
  static const std::vector<CollectiveEntry> table = {
      {Collective::all_to_all, true, false, shape_all_to_all, from_all_to_all, run_all_to_all},
      {Collective::send_recv, false, false, shape_whole, from_left_neighbour, run_send_recv},
      {Collective::all_gather, true, false, shape_all_gather, from_all_gather, run_all_gather},
      {Collective::reduce_scatter, true, true, shape_reduce_scatter, from_reduce_scatter, run_reduce_scatter},
      {Collective::all_reduce, false, true, shape_whole, from_same_index, run_all_reduce},
  };
  return table;
}

const CollectiveEntry& collective_entry(Collective op) {
  for (const CollectiveEntry& e : collective_table())
    if (e.op == op) return e;
  throw Error(fmt::format("op: {} has no entry in the collective table (comm/src/collective.cpp)", to_string(op)));
}

Shape make_shape(Collective op, std::int64_t bytes, DType dt, int ranks) {
  const auto es = static_cast<std::int64_t>(dtype_size(dt));
  if (bytes <= 0) throw Error(fmt::format("message size {} bytes must be positive", bytes));
  if (ranks < 1) throw Error(fmt::format("{} ranks: need at least 1", ranks));
  if (bytes % es != 0)
    throw Error(fmt::format("message size {} bytes is not a multiple of the {}-byte {} element",
                            bytes, es, to_string(dt)));
  const CollectiveEntry& e = collective_entry(op);
  const bool split = e.split;
  if (split && bytes % (es * ranks) != 0)
    throw Error(fmt::format(
        "message size {} bytes is not divisible into {} equal chunks of whole {} elements "
        "({} needs a multiple of {} bytes)",
        bytes, ranks, to_string(dt), to_string(op), es * ranks));
  Shape s;
  s.bytes = static_cast<std::size_t>(bytes);
  s.count = s.bytes / static_cast<std::size_t>(es);
  const std::size_t per_rank = split ? s.count / static_cast<std::size_t>(ranks) : s.count;
  e.shape(s, per_rank);
  return s;
}

void run_collective(Collective op, Communicator& c, const void* send, void* recv,
                    const Shape& s, DType dt) {
  collective_entry(op).run(c, send, recv, s, dt);
}

double pattern_value(int rank, std::size_t i, DType dt) {
  // A hash of (rank, index) into [-15, 15] ([0, 30] for u8): a misrouted chunk shows.
  const std::uint64_t h =
      (static_cast<std::uint64_t>(rank) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull) >> 40;
  const double v = static_cast<double>(h % 31);
  return dt == DType::u8 ? v : v - 15.0;
}

void fill_send(Collective, void* send, const Shape& s, DType dt, int rank, int) {
  for (std::size_t i = 0; i < s.send_count; ++i) store(send, i, dt, pattern_value(rank, i, dt));
}

std::size_t count_wrong(Collective op, const void* recv, const Shape& s, DType dt, int rank,
                        int ranks) {
  // Expected values are built in the element type (store) so rounding and u8 wrap-around
  // match; reductions add in rank order.
  const std::size_t chunk = s.call_count;
  std::vector<unsigned char> expected(s.recv_count * dtype_size(dt));
  std::vector<unsigned char> term(dtype_size(dt));
  const CollectiveEntry& e = collective_entry(op);
  for (std::size_t j = 0; j < s.recv_count; ++j) {
    const InputElement in = e.source(j, chunk, rank, ranks);
    if (!e.reduction) {
      store(expected.data(), j, dt, pattern_value(in.rank, in.index, dt));
      continue;
    }
    store(expected.data(), j, dt, 0.0);
    for (int p = 0; p < ranks; ++p) {
      store(term.data(), 0, dt, pattern_value(p, in.index, dt));
      add_into(expected.data() + j * dtype_size(dt), term.data(), 1, dt);
    }
  }
  // Sums of up to 16 values in [-15, 15] are exact in every type; past that, bf16 and f16
  // partial sums round, and the order a library adds in is its own.
  double tol = 0;
  if (e.reduction && ranks > 16 && (dt == DType::bf16 || dt == DType::fp16))
    tol = 15.0 * ranks * (dt == DType::bf16 ? 0x1p-8 : 0x1p-11);
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < s.recv_count; ++j) {
    const double got = load(recv, j, dt), want = load(expected.data(), j, dt);
    if (!(std::fabs(got - want) <= tol)) ++wrong;
  }
  return wrong;
}

}  // namespace seqpar::comm
