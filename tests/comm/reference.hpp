// Single-process reference for the communicator tests: every rank's input is generated from a
// seed, so each rank (process or thread) can compute what every collective must return.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "seqpar/comm/communicator.hpp"

namespace seqpar::comm::test {

using Data = std::vector<std::vector<double>>;  // [rank][element]

// Small integers, exact in every element type and in sums over up to 16 ranks (bf16 holds
// integers up to 256 exactly); u8 gets non-negative values.
Data make_inputs(int ranks, std::size_t elements, DType dt, std::uint64_t seed);

Data ref_all_to_all(const Data& in, std::size_t count);
Data ref_all_gather(const Data& in, std::size_t count);
Data ref_reduce_scatter(const Data& in, std::size_t count, DType dt);
Data ref_all_reduce(const Data& in, DType dt);
// out[r] = in[(r - shift) mod P]: where a block is after `shift` ring steps to the next rank.
Data ref_ring_shift(const Data& in, int shift);

// Typed buffers from / to doubles (host memory).
std::vector<unsigned char> encode(const std::vector<double>& v, DType dt);
std::vector<double> decode(const std::vector<unsigned char>& b, DType dt);

// A buffer in the communicator's memory (host, or device when c.device_memory()).
class CommBuffer {
 public:
  CommBuffer(const Communicator& c, std::vector<unsigned char> init);
  ~CommBuffer();
  CommBuffer(CommBuffer&& o) noexcept
      : device_(o.device_), host_(std::move(o.host_)), dev_(std::exchange(o.dev_, nullptr)) {}
  CommBuffer(const CommBuffer&) = delete;
  CommBuffer& operator=(const CommBuffer&) = delete;
  void* data();
  // Waits for c's work, then returns the contents.
  std::vector<double> read(Communicator& c, DType dt);

 private:
  bool device_;
  std::vector<unsigned char> host_;
  void* dev_ = nullptr;
};

// Runs every operation on `c` with inputs for `world_ranks` (the global rank of each member
// of c, ascending) and EXPECTs the reference result. Call on every rank of c.
void expect_collectives_match(Communicator& c, const std::vector<int>& world_ranks,
                              int world_size, DType dt, std::size_t count);
// P-1 double-buffered ring steps (K and V posted before either is waited on); after each step
// the received blocks must be the reference's.
void expect_ring_rotation_matches(Communicator& c, DType dt, std::size_t count);
// make_groups on `world` and the collectives on each group against the reference.
void expect_groups_match(Communicator& world, int ulysses, int ring, DType dt);

}  // namespace seqpar::comm::test
