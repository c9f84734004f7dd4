// Virtual ranks: P communicators in one process, one thread per rank. Every operation is a
// rendezvous: each rank posts its buffers, all meet, each reads what it needs from its peers'
// buffers, all meet again. Reductions sum in rank order, so every rank gets identical bits.
// Each rendezvous waits at most the watchdog's limit (watchdog.hpp): a rank whose thread died or
// stopped would otherwise leave its peers waiting forever; they throw seqpar::Error instead.
#include <fmt/format.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "checks.hpp"
#include "device_ops.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/element.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {
namespace {

enum class Op { all_to_all, send_recv, all_gather, reduce_scatter, all_reduce, barrier, subgroup };

const char* op_name(Op op) {
  switch (op) {
    case Op::all_to_all: return "all_to_all";
    case Op::send_recv: return "send_recv";
    case Op::all_gather: return "all_gather";
    case Op::reduce_scatter: return "reduce_scatter";
    case Op::all_reduce: return "all_reduce";
    case Op::barrier: return "barrier";
    case Op::subgroup: return "subgroup";
  }
  return "?";
}

struct Shared;

struct Slot {
  Slot() = default;
  Slot(Op o, const void* s = nullptr, void* r = nullptr, std::size_t n = 0, DType t = DType::u8)
      : op(o), send(s), recv(r), count(n), dt(t) {}
  Op op = Op::barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  DType dt = DType::u8;
  int dst = -1, src = -1;
  std::vector<int> members;
  std::shared_ptr<Shared> created;
};

struct Shared {
  Shared(int n, bool gpu) : size(n), on_gpu(gpu), slots(static_cast<std::size_t>(n)) {}
  const int size;
  const bool on_gpu;
  std::vector<Slot> slots;  // slot r is written only by rank r, between rendezvous
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  std::uint64_t generation = 0;

  // rank and op name the waiting rank in the timeout error.
  void rendezvous(int rank, Op op) {
    const Deadline deadline;
    std::unique_lock lock(m);
    const std::uint64_t g = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    auto done = [&] { return generation != g; };
    if (deadline.limit_s() <= 0) {
      cv.wait(lock, done);
      return;
    }
    if (!cv.wait_for(lock, std::chrono::duration<double>(deadline.limit_s()), done))
      throw Error(timeout_message(fmt::format("virtual rank {}", rank),
                                  fmt::format("{} ({} of {} ranks arrived)", op_name(op), arrived, size),
                                  deadline.limit_s()));
  }
};

class VirtualComm final : public Communicator {
 public:
  VirtualComm(std::shared_ptr<Shared> sh, int rank) : sh_(std::move(sh)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return sh_->size; }
  Backend backend() const override { return Backend::virtual_ranks; }
  bool device_memory() const override { return sh_->on_gpu; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType dt) override {
    const auto& s = meet({Op::all_to_all, send, recv, count, dt});
    const std::size_t bytes = count * dtype_size(dt);
    for (int p = 0; p < size(); ++p)
      detail::copy_sync(at(recv, p * bytes), at(s[p].send, rank_ * bytes), bytes, sh_->on_gpu);
    sh_->rendezvous(rank_, op_);
  }

  // Completes before returning (every rank of the ring takes part in the same step).
  Request send_recv_async(const void* send, int dst, void* recv, int src, std::size_t count,
                          DType dt) override {
    Slot mine{Op::send_recv, send, recv, count, dt};
    mine.dst = dst;
    mine.src = src;
    const auto& s = meet(std::move(mine));
    for (int p = 0; p < size(); ++p) {
      detail::check_peer(s[p].dst, size(), "send_recv destination");
      detail::check_peer(s[p].src, size(), "send_recv source");
      if (s[s[p].src].dst != p)
        throw Error(fmt::format("send_recv: rank {} receives from rank {}, which sends to rank {}",
                                p, s[p].src, s[s[p].src].dst));
    }
    detail::copy_sync(recv, s[src].send, count * dtype_size(dt), sh_->on_gpu);
    sh_->rendezvous(rank_, op_);
    return {};
  }

  void wait(Request& r) override { r.state.reset(); }

  void all_gather(const void* send, void* recv, std::size_t count, DType dt) override {
    const auto& s = meet({Op::all_gather, send, recv, count, dt});
    const std::size_t bytes = count * dtype_size(dt);
    for (int p = 0; p < size(); ++p)
      detail::copy_sync(at(recv, p * bytes), s[p].send, bytes, sh_->on_gpu);
    sh_->rendezvous(rank_, op_);
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dt) override {
    reduce(Op::reduce_scatter, send, recv, count, dt, rank_ * count * dtype_size(dt));
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType dt) override {
    reduce(Op::all_reduce, send, recv, count, dt, 0);
  }

  void barrier() override {
    meet({Op::barrier});
    sh_->rendezvous(rank_, op_);
  }

  void set_stream(void* s) override { stream_ = s; }
  void synchronize() override {
    if (sh_->on_gpu) detail::sync_stream(stream_);
  }

  std::unique_ptr<Communicator> subgroup(std::span<const int> members) override {
    Slot mine{Op::subgroup};
    mine.members.assign(members.begin(), members.end());
    const auto& s = meet(std::move(mine));
    // Every rank checks every list, so a bad list fails on all threads alike (no hang).
    for (int p = 0; p < size(); ++p) {
      detail::check_members(s[p].members, p, size());
      for (int q : s[p].members)
        if (s[q].members != s[p].members)
          throw Error(fmt::format("subgroup: ranks {} and {} name different member lists", p, q));
    }
    if (members.front() == rank_)
      sh_->slots[rank_].created =
          std::make_shared<Shared>(static_cast<int>(members.size()), sh_->on_gpu);
    sh_->rendezvous(rank_, op_);
    auto group = sh_->slots[members.front()].created;
    sh_->rendezvous(rank_, op_);
    return std::make_unique<VirtualComm>(std::move(group), detail::position_of(members, rank_));
  }

 private:
  static void* at(void* p, std::size_t off) { return static_cast<char*>(p) + off; }
  static const void* at(const void* p, std::size_t off) {
    return static_cast<const char*>(p) + off;
  }

  // Posts this rank's slot, meets the others and checks they called the same operation.
  const std::vector<Slot>& meet(Slot mine) {
    if (sh_->on_gpu) detail::sync_stream(stream_);  // the send data must be ready
    op_ = mine.op;
    sh_->slots[rank_] = std::move(mine);
    sh_->rendezvous(rank_, op_);
    const auto& s = sh_->slots;
    for (int p = 1; p < size(); ++p)
      if (s[p].op != s[0].op || s[p].count != s[0].count || s[p].dt != s[0].dt)
        throw Error(fmt::format(
            "virtual ranks: rank {} called {} with {} x {} while rank 0 called {} with {} x {}",
            p, op_name(s[p].op), s[p].count, to_string(s[p].dt), op_name(s[0].op), s[0].count,
            to_string(s[0].dt)));
    return s;
  }

  // Sums chunk `offset` of every rank's send in rank order into a private buffer, and writes
  // recv only after all ranks have read, so send == recv is safe.
  void reduce(Op op, const void* send, void* recv, std::size_t count, DType dt,
              std::size_t offset) {
    const auto& s = meet({op, send, recv, count, dt});
    const std::size_t bytes = count * dtype_size(dt);
    std::vector<unsigned char> acc(bytes), staged(bytes);
    detail::copy_sync(acc.data(), at(s[0].send, offset), bytes, sh_->on_gpu);
    for (int p = 1; p < size(); ++p) {
      detail::copy_sync(staged.data(), at(s[p].send, offset), bytes, sh_->on_gpu);
      add_into(acc.data(), staged.data(), count, dt);
    }
    sh_->rendezvous(rank_, op_);
    detail::copy_sync(recv, acc.data(), bytes, sh_->on_gpu);
  }

  std::shared_ptr<Shared> sh_;
  int rank_;
  Op op_ = Op::barrier;  // the operation in progress, for the timeout message
  void* stream_ = nullptr;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_virtual_world(int P, bool on_gpu) {
  if (P < 1) throw Error(fmt::format("virtual ranks: {} ranks requested, need at least 1", P));
  std::string why;
  if (on_gpu && !comm::cuda_device_available(&why))
    throw Error(fmt::format("virtual ranks on the GPU need a CUDA device: {}", why));
  auto sh = std::make_shared<Shared>(P, on_gpu);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < P; ++r) comms.push_back(std::make_unique<VirtualComm>(sh, r));
  return comms;
}

}  // namespace seqpar::comm
