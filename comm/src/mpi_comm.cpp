// MPI on host memory: the back end for CPU runs and CI. bf16 and f16 travel as 16-bit words
// and are summed by user-defined MPI operations with the same rounding as the other back ends.
// Every operation is posted non-blocking and completed under the watchdog (mpi_watch.hpp), so a
// frozen peer aborts the job with a message naming the rank and the operation.
#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>

#include "checks.hpp"
#include "seqpar/comm/mpi_check.hpp"
#include "seqpar/comm/mpi_watch.hpp"
#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/element.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {
namespace {

void sum_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  add_into(inout, in, static_cast<std::size_t>(*len), DType::bf16);
}
void sum_f16(void* in, void* inout, int* len, MPI_Datatype*) {
  add_into(inout, in, static_cast<std::size_t>(*len), DType::fp16);
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::fp32: return MPI_FLOAT;
    case DType::fp64: return MPI_DOUBLE;
    case DType::bf16: return MPI_UINT16_T;
    case DType::fp16: return MPI_UINT16_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

// "send_recv (send to rank 3: pending; receive from rank 1: done) in world ranks [1, 3]".
std::string send_recv_text(MPI_Comm comm, int dst, int src, const std::vector<bool>& done) {
  std::vector<int> world;
  try {
    world = detail::mpi_world_ranks(comm);
  } catch (const Error&) {
  }
  auto name = [&](int r) {
    return r >= 0 && static_cast<std::size_t>(r) < world.size() ? world[static_cast<std::size_t>(r)]
                                                                 : r;
  };
  return fmt::format("send_recv (receive from rank {}: {}; send to rank {}: {})", name(src),
                     done[0] ? "done" : "pending", name(dst), done[1] ? "done" : "pending");
}

struct MpiRequest : RequestState {
  MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Comm comm = MPI_COMM_NULL;
  int dst = -1, src = -1;
  void complete() {
    detail::mpi_wait_watched(2, reqs, [&](const std::vector<bool>& done) {
      return send_recv_text(comm, dst, src, done);
    });
  }
  ~MpiRequest() override {
    // A request dropped without wait() must still complete before its buffers go away.
    try {
      complete();
    } catch (const Error& e) {
      std::fprintf(stderr, "seqpar: a dropped send_recv failed: %s\n", e.what());
    }
  }
};

class MpiComm final : public Communicator {
 public:
  // Takes ownership of comm unless it is MPI_COMM_WORLD.
  explicit MpiComm(MPI_Comm comm) : comm_(comm) {
    SEQPAR_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    SEQPAR_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    SEQPAR_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    SEQPAR_MPI_CHECK(MPI_Op_create(&sum_bf16, 1, &sum_bf16_));
    SEQPAR_MPI_CHECK(MPI_Op_create(&sum_f16, 1, &sum_f16_));
  }
  ~MpiComm() override {
    MPI_Op_free(&sum_bf16_);
    MPI_Op_free(&sum_f16_);
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::mpi; }
  bool device_memory() const override { return false; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType dt) override {
    detail::mpi_stall_point();
    MPI_Request req = MPI_REQUEST_NULL;
    SEQPAR_MPI_CHECK(MPI_Ialltoall(send, detail::mpi_count(count), mpi_type(dt), recv,
                                   detail::mpi_count(count), mpi_type(dt), comm_, &req));
    complete(req, "all_to_all");
  }

  Request send_recv_async(const void* send, int dst, void* recv, int src, std::size_t count,
                          DType dt) override {
    detail::check_peer(dst, size_, "send_recv destination");
    detail::check_peer(src, size_, "send_recv source");
    detail::mpi_stall_point();
    auto st = std::make_unique<MpiRequest>();
    st->comm = comm_;
    st->dst = dst;
    st->src = src;
    const int n = detail::mpi_count(count);
    SEQPAR_MPI_CHECK(MPI_Irecv(recv, n, mpi_type(dt), src, kRingTag, comm_, &st->reqs[0]));
    SEQPAR_MPI_CHECK(MPI_Isend(send, n, mpi_type(dt), dst, kRingTag, comm_, &st->reqs[1]));
    return Request{std::move(st)};
  }

  void wait(Request& r) override {
    if (!r.pending()) return;
    auto* st = dynamic_cast<MpiRequest*>(r.state.get());
    if (!st) throw Error("wait: the request does not belong to an MPI communicator");
    st->complete();
    r.state.reset();
  }

  void all_gather(const void* send, void* recv, std::size_t count, DType dt) override {
    detail::mpi_stall_point();
    MPI_Request req = MPI_REQUEST_NULL;
    SEQPAR_MPI_CHECK(MPI_Iallgather(send, detail::mpi_count(count), mpi_type(dt), recv,
                                    detail::mpi_count(count), mpi_type(dt), comm_, &req));
    complete(req, "all_gather");
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dt) override {
    detail::mpi_stall_point();
    MPI_Request req = MPI_REQUEST_NULL;
    SEQPAR_MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, detail::mpi_count(count),
                                               mpi_type(dt), sum_op(dt), comm_, &req));
    complete(req, "reduce_scatter");
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType dt) override {
    detail::mpi_stall_point();
    MPI_Request req = MPI_REQUEST_NULL;
    SEQPAR_MPI_CHECK(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv,
                                    detail::mpi_count(count), mpi_type(dt), sum_op(dt), comm_,
                                    &req));
    complete(req, "all_reduce");
  }

  void barrier() override {
    detail::mpi_stall_point();
    MPI_Request req = MPI_REQUEST_NULL;
    SEQPAR_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    complete(req, "barrier");
  }

  std::unique_ptr<Communicator> subgroup(std::span<const int> members) override {
    detail::check_members(members, rank_, size_);
    // MPI has no non-blocking split: a watched barrier first, so that a missing rank is reported
    // here rather than hanging the split.
    barrier();
    // The lowest member names the group; the position in the list orders it.
    MPI_Comm sub = MPI_COMM_NULL;
    SEQPAR_MPI_CHECK(
        MPI_Comm_split(comm_, members.front(), detail::position_of(members, rank_), &sub));
    auto group = std::make_unique<MpiComm>(sub);
    // Every member must have named the same group, or the split silently differs.
    std::vector<int> parents(static_cast<std::size_t>(group->size()));
    MPI_Request req = MPI_REQUEST_NULL;
    SEQPAR_MPI_CHECK(MPI_Iallgather(&rank_, 1, MPI_INT, parents.data(), 1, MPI_INT, sub, &req));
    detail::mpi_wait_watched(req, "the member check of a new subgroup");
    if (!std::equal(parents.begin(), parents.end(), members.begin(), members.end()))
      throw Error(fmt::format("subgroup: rank {} named members [{}] but the group formed is [{}]",
                              rank_, fmt::join(members, ","), fmt::join(parents, ",")));
    return group;
  }

 private:
  static constexpr int kRingTag = 7301;

  // Completes one request under the watchdog: "all_reduce over world ranks [0, 2]".
  void complete(MPI_Request& req, const char* op) const {
    detail::mpi_wait_watched(1, &req, [&](const std::vector<bool>&) {
      return fmt::format("{} over {}", op, detail::mpi_group_text(comm_));
    });
  }

  MPI_Op sum_op(DType dt) const {
    if (dt == DType::bf16) return sum_bf16_;
    if (dt == DType::fp16) return sum_f16_;
    return MPI_SUM;
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  MPI_Op sum_bf16_ = MPI_OP_NULL, sum_f16_ = MPI_OP_NULL;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() {
  int initialized = 0;
  SEQPAR_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) throw Error("make_mpi_world: MPI is not initialised (create an MpiSession)");
  return std::make_unique<MpiComm>(MPI_COMM_WORLD);
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  SEQPAR_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    SEQPAR_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    owns_ = true;
  }
  SEQPAR_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  SEQPAR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  SEQPAR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
}

MpiSession::~MpiSession() {
  if (owns_) MPI_Finalize();
}

}  // namespace seqpar::comm
