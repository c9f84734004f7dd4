// NCCL, one rank per GPU, bootstrapped over MPI. Collectives run on the compute stream (set_stream);
// ring steps run on the communicator's own stream so attention can overlap them.
// Watchdog: the host blocks only in synchronize() (and barrier()), which polls the streams and
// ncclCommGetAsyncError against the deadline; on timeout it names the rank, aborts the NCCL
// communicator and the MPI job. The bootstrap's MPI calls are watched like the MPI back end's.
// Not covered: NCCL's own blocking connection setup inside the first ncclGroupEnd of a
// send/recv pair (a peer that never arrives there hangs NCCL itself).
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>

#include "checks.hpp"
#include "device_ops.hpp"
#include "seqpar/comm/mpi_check.hpp"
#include "seqpar/comm/mpi_watch.hpp"
#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"

#define SEQPAR_NCCL_CHECK(call)                                                          \
  do {                                                                                   \
    ncclResult_t seqpar_nccl_rc_ = (call);                                               \
    if (seqpar_nccl_rc_ != ncclSuccess)                                                  \
      throw ::seqpar::Error(fmt::format("NCCL error at {}:{}: {} failed: {}", __FILE__,  \
                                        __LINE__, #call,                                 \
                                        ncclGetErrorString(seqpar_nccl_rc_)));           \
  } while (0)

namespace seqpar::comm {
namespace {

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::fp32: return ncclFloat32;
    case DType::fp64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::fp16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
  }
  return ncclFloat32;
}

class NcclComm final : public Communicator {
 public:
  explicit NcclComm(ncclComm_t comm) : comm_(comm), world_rank_(detail::mpi_world_rank()) {
    SEQPAR_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
    SEQPAR_NCCL_CHECK(ncclCommCount(comm_, &size_));
    side_ = detail::create_stream();
  }
  ~NcclComm() override {
    if (scratch_) cudaFree(scratch_);
    detail::destroy_stream(side_);
    ncclCommDestroy(comm_);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::nccl; }
  bool device_memory() const override { return true; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType dt) override {
    const std::size_t bytes = count * dtype_size(dt);
    SEQPAR_NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < size_; ++p) {
      SEQPAR_NCCL_CHECK(ncclSend(static_cast<const char*>(send) + p * bytes, count, nccl_type(dt),
                                 p, comm_, stream()));
      SEQPAR_NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + p * bytes, count, nccl_type(dt), p,
                                 comm_, stream()));
    }
    SEQPAR_NCCL_CHECK(ncclGroupEnd());
  }

  Request send_recv_async(const void* send, int dst, void* recv, int src, std::size_t count,
                          DType dt) override {
    detail::check_peer(dst, size_, "send_recv destination");
    detail::check_peer(src, size_, "send_recv source");
    detail::join(side_, stream_);  // the block to send was produced on the compute stream
    auto side = static_cast<cudaStream_t>(side_);
    SEQPAR_NCCL_CHECK(ncclGroupStart());
    SEQPAR_NCCL_CHECK(ncclSend(send, count, nccl_type(dt), dst, comm_, side));
    SEQPAR_NCCL_CHECK(ncclRecv(recv, count, nccl_type(dt), src, comm_, side));
    SEQPAR_NCCL_CHECK(ncclGroupEnd());
    return detail::event_request(side_);
  }

  void wait(Request& r) override { detail::wait_event_request(r, stream_, "an NCCL communicator"); }

  void all_gather(const void* send, void* recv, std::size_t count, DType dt) override {
    SEQPAR_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(dt), comm_, stream()));
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dt) override {
    SEQPAR_NCCL_CHECK(
        ncclReduceScatter(send, recv, count, nccl_type(dt), ncclSum, comm_, stream()));
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType dt) override {
    SEQPAR_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(dt), ncclSum, comm_, stream()));
  }

  void barrier() override {
    if (!scratch_) SEQPAR_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(int)));
    SEQPAR_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream()));
    synchronize();
  }

  void set_stream(void* s) override { stream_ = s; }
  void synchronize() override {
    detail::mpi_stall_point();
    watch_stream(stream_, "the collectives on the compute stream");
    watch_stream(side_, "the ring send/recv steps on the side stream");
  }

  std::unique_ptr<Communicator> subgroup(std::span<const int> members) override {
    detail::check_members(members, rank_, size_);
    // ncclCommSplit blocks until every rank arrives: a watched barrier first names a missing one.
    barrier();
    ncclComm_t sub = nullptr;
    SEQPAR_NCCL_CHECK(
        ncclCommSplit(comm_, members.front(), detail::position_of(members, rank_), &sub, nullptr));
    auto group = std::make_unique<NcclComm>(sub);
    if (group->size() != static_cast<int>(members.size()))
      throw Error(fmt::format("subgroup: rank {} named {} members but the group formed has {}",
                              rank_, members.size(), group->size()));
    return group;
  }

 private:
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_); }

  // cudaStreamSynchronize under the watchdog: polls the stream and NCCL's asynchronous error.
  void watch_stream(void* s, const char* what) {
    const Deadline deadline;
    PollBackoff backoff;
    for (;;) {
      const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(s));
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) SEQPAR_CUDA_CHECK(e);
      ncclResult_t async = ncclSuccess;
      SEQPAR_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress)
        throw Error(fmt::format("NCCL error on rank {} while waiting for {}: {}", world_rank_, what,
                                ncclGetErrorString(async)));
      if (deadline.expired()) break;
      backoff.pause();
    }
    const std::string msg = timeout_message(
        fmt::format("rank {}", world_rank_),
        fmt::format("synchronize ({}, NCCL communicator of {} ranks, as its rank {})", what, size_,
                    rank_),
        deadline.limit_s());
    std::fprintf(stderr, "seqpar: %s; aborting the job\n", msg.c_str());
    std::fflush(stderr);
    ncclCommAbort(comm_);  // frees the kernels stuck waiting for the peer
    MPI_Abort(MPI_COMM_WORLD, 3);
    throw Error(msg);  // not reached
  }

  ncclComm_t comm_;
  int world_rank_ = 0;
  int rank_ = 0, size_ = 1;
  void* stream_ = nullptr;  // compute stream (legacy default unless set)
  void* side_ = nullptr;    // ring steps
  void* scratch_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_world() {
  int initialized = 0;
  SEQPAR_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) throw Error("make_nccl_world: MPI is not initialised (create an MpiSession)");
  int rank = 0, size = 1, local_rank = 0, local_size = 1, devices = 0;
  SEQPAR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  SEQPAR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  MPI_Comm node = MPI_COMM_NULL;
  // Every MPI call of the bootstrap is watched; the blocking ones follow a watched barrier, after
  // which every rank is known to have arrived.
  MPI_Request req = MPI_REQUEST_NULL;
  detail::mpi_stall_point();
  SEQPAR_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, "the NCCL bootstrap (barrier over the world)");
  SEQPAR_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  SEQPAR_MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  SEQPAR_MPI_CHECK(MPI_Comm_size(node, &local_size));
  SEQPAR_MPI_CHECK(MPI_Comm_free(&node));

  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0)
    throw Error(fmt::format("NCCL back end: rank {} sees no CUDA device ({})", rank,
                            err != cudaSuccess ? cudaGetErrorString(err) : "none present"));
  // A launcher that binds one GPU per rank (srun --gpus-per-task=1) leaves one visible device.
  const int device = devices == 1 ? 0 : local_rank;
  if (device >= devices)
    throw Error(fmt::format(
        "NCCL back end: {} ranks on this node but only {} GPUs visible; run one rank per GPU",
        local_size, devices));
  SEQPAR_CUDA_CHECK(cudaSetDevice(device));

  ncclUniqueId id{};
  if (rank == 0) SEQPAR_NCCL_CHECK(ncclGetUniqueId(&id));
  SEQPAR_MPI_CHECK(MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, "the NCCL bootstrap (broadcast of the unique id from rank 0)");
  // ncclCommInitRank blocks until all ranks join: a watched barrier first.
  SEQPAR_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, "the NCCL bootstrap (barrier before ncclCommInitRank)");
  ncclComm_t comm = nullptr;
  SEQPAR_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  return std::make_unique<NcclComm>(comm);
}

}  // namespace seqpar::comm
