// Loopback: a single-rank proxy with rank `rank`'s exact message shapes. Nothing leaves the
// process; every operation copies the bytes the real rank would receive.
#include <fmt/format.h>

#include <cstring>

#include "checks.hpp"
#include "device_ops.hpp"
#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {
namespace {

class LoopbackComm final : public Communicator {
 public:
  LoopbackComm(int size, int rank, bool on_gpu) : size_(size), rank_(rank), on_gpu_(on_gpu) {}
  ~LoopbackComm() override { detail::destroy_stream(side_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::loopback; }
  bool device_memory() const override { return on_gpu_; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType dt) override {
    copy(recv, send, total(count, dt));
  }

  Request send_recv_async(const void* send, int dst, void* recv, int src, std::size_t count,
                          DType dt) override {
    detail::check_peer(dst, size_, "send_recv destination");
    detail::check_peer(src, size_, "send_recv source");
    const std::size_t bytes = count * dtype_size(dt);
    if (!on_gpu_) {
      if (bytes) std::memcpy(recv, send, bytes);
      return {};
    }
    if (!side_) side_ = detail::create_stream();
    detail::join(side_, stream_);
    detail::copy_async(recv, send, bytes, side_);
    return detail::event_request(side_);
  }

  void wait(Request& r) override { detail::wait_event_request(r, stream_, "a loopback communicator"); }

  void all_gather(const void* send, void* recv, std::size_t count, DType dt) override {
    const std::size_t bytes = count * dtype_size(dt);
    for (int p = 0; p < size_; ++p) copy(static_cast<char*>(recv) + p * bytes, send, bytes);
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dt) override {
    const std::size_t bytes = count * dtype_size(dt);
    copy(recv, static_cast<const char*>(send) + rank_ * bytes, bytes);
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType dt) override {
    if (send != recv) copy(recv, send, count * dtype_size(dt));
  }

  void barrier() override {}
  void set_stream(void* s) override { stream_ = s; }
  void synchronize() override {
    if (!on_gpu_) return;
    detail::sync_stream(stream_);
    if (side_) detail::sync_stream(side_);
  }

  std::unique_ptr<Communicator> subgroup(std::span<const int> members) override {
    detail::check_members(members, rank_, size_);
    return std::make_unique<LoopbackComm>(static_cast<int>(members.size()),
                                          detail::position_of(members, rank_), on_gpu_);
  }

 private:
  std::size_t total(std::size_t count, DType dt) const {
    return static_cast<std::size_t>(size_) * count * dtype_size(dt);
  }
  void copy(void* dst, const void* src, std::size_t bytes) {
    if (on_gpu_)
      detail::copy_async(dst, src, bytes, stream_);
    else if (bytes)
      std::memcpy(dst, src, bytes);
  }

  int size_, rank_;
  bool on_gpu_;
  void* stream_ = nullptr;  // compute stream (legacy default unless set)
  void* side_ = nullptr;    // own stream for ring steps, created on first use
};

}  // namespace

std::unique_ptr<Communicator> make_loopback(int P, int rank, bool on_gpu) {
  if (P < 1) throw Error(fmt::format("loopback: {} ranks requested, need at least 1", P));
  if (rank < 0 || rank >= P)
    throw Error(fmt::format("loopback: rank {} is outside 0..{}", rank, P - 1));
  return std::make_unique<LoopbackComm>(P, rank, on_gpu);
}

}  // namespace seqpar::comm
