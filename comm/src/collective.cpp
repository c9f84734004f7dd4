#include "seqpar/comm/collective.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <vector>

#include "seqpar/comm/element.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {

namespace {
bool is_reduction(Collective op) {
  return op == Collective::reduce_scatter || op == Collective::all_reduce;
}
}  // namespace

Shape make_shape(Collective op, std::int64_t bytes, DType dt, int ranks) {
  const auto es = static_cast<std::int64_t>(dtype_size(dt));
  if (bytes <= 0) throw Error(fmt::format("message size {} bytes must be positive", bytes));
  if (ranks < 1) throw Error(fmt::format("{} ranks: need at least 1", ranks));
  if (bytes % es != 0)
    throw Error(fmt::format("message size {} bytes is not a multiple of the {}-byte {} element",
                            bytes, es, to_string(dt)));
  const bool split = op == Collective::all_to_all || op == Collective::all_gather ||
                     op == Collective::reduce_scatter;
  if (split && bytes % (es * ranks) != 0)
    throw Error(fmt::format(
        "message size {} bytes is not divisible into {} equal chunks of whole {} elements "
        "({} needs a multiple of {} bytes)",
        bytes, ranks, to_string(dt), to_string(op), es * ranks));
  Shape s;
  s.bytes = static_cast<std::size_t>(bytes);
  s.count = s.bytes / static_cast<std::size_t>(es);
  const std::size_t per_rank = split ? s.count / static_cast<std::size_t>(ranks) : s.count;
  switch (op) {
    case Collective::all_to_all:
      s.send_count = s.recv_count = s.count;
      s.call_count = per_rank;
      break;
    case Collective::all_gather:
      s.send_count = per_rank;
      s.recv_count = s.count;
      s.call_count = per_rank;
      break;
    case Collective::reduce_scatter:
      s.send_count = s.count;
      s.recv_count = per_rank;
      s.call_count = per_rank;
      break;
    case Collective::all_reduce:
    case Collective::send_recv:
      s.send_count = s.recv_count = s.call_count = s.count;
      break;
  }
  return s;
}

void run_collective(Collective op, Communicator& c, const void* send, void* recv,
                    const Shape& s, DType dt) {
  switch (op) {
    case Collective::all_to_all: c.all_to_all(send, recv, s.call_count, dt); return;
    case Collective::all_gather: c.all_gather(send, recv, s.call_count, dt); return;
    case Collective::reduce_scatter: c.reduce_scatter(send, recv, s.call_count, dt); return;
    case Collective::all_reduce: c.all_reduce(send, recv, s.call_count, dt); return;
    case Collective::send_recv: {
      const int P = c.size(), r = c.rank();
      Request req = c.send_recv_async(send, (r + 1) % P, recv, (r - 1 + P) % P, s.call_count, dt);
      c.wait(req);
      return;
    }
  }
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
  for (std::size_t j = 0; j < s.recv_count; ++j) {
    switch (op) {
      case Collective::all_to_all:
        store(expected.data(), j, dt,
              pattern_value(static_cast<int>(j / chunk), rank * chunk + j % chunk, dt));
        break;
      case Collective::all_gather:
        store(expected.data(), j, dt, pattern_value(static_cast<int>(j / chunk), j % chunk, dt));
        break;
      case Collective::send_recv:
        store(expected.data(), j, dt, pattern_value((rank - 1 + ranks) % ranks, j, dt));
        break;
      case Collective::reduce_scatter:
      case Collective::all_reduce: {
        const std::size_t src = op == Collective::all_reduce ? j : rank * chunk + j;
        store(expected.data(), j, dt, 0.0);
        for (int p = 0; p < ranks; ++p) {
          store(term.data(), 0, dt, pattern_value(p, src, dt));
          add_into(expected.data() + j * dtype_size(dt), term.data(), 1, dt);
        }
        break;
      }
    }
  }
  // Sums of up to 16 values in [-15, 15] are exact in every type; past that, bf16 and f16
  // partial sums round, and the order a library adds in is its own.
  double tol = 0;
  if (is_reduction(op) && ranks > 16 && (dt == DType::bf16 || dt == DType::fp16))
    tol = 15.0 * ranks * (dt == DType::bf16 ? 0x1p-8 : 0x1p-11);
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < s.recv_count; ++j) {
    const double got = load(recv, j, dt), want = load(expected.data(), j, dt);
    if (!(std::fabs(got - want) <= tol)) ++wrong;
  }
  return wrong;
}

}  // namespace seqpar::comm
