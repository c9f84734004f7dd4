// The communicator every seqpar measuring program uses: one interface (all-to-all, ring step,
// allgather, reduce-scatter, allreduce) over four back ends, and the SP x DP rank layout.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/measurement.hpp"

namespace seqpar::comm {

// Element types are core's (one enum, spelling and parser for every layer; parse_dtype also
// accepts the nccl-tests names).
using seqpar::DType;
using seqpar::dtype_size;
using seqpar::parse_dtype;
using seqpar::to_string;

enum class Backend { mpi, nccl, virtual_ranks, loopback };
std::string_view to_string(Backend b);
// "mpi", "nccl", "virtual", "loopback"; throws seqpar::Error naming the accepted values.
Backend parse_backend(std::string_view s);
// The measurement mode a run over `b` reports: mpi/nccl real ranks, virtual ranks, loopback a
// single-rank proxy.
Mode measurement_mode(Backend b);

// Back-end state of one outstanding ring step.
struct RequestState {
  virtual ~RequestState() = default;
};

// Handle of an asynchronous send/recv. Empty once waited on; waiting on an empty one is a no-op.
struct Request {
  std::unique_ptr<RequestState> state;
  bool pending() const { return state != nullptr; }
};

// Completion rules:
// - host back ends (mpi, virtual ranks on the CPU, loopback on the CPU): every call has
//   completed when it returns, except send_recv_async, which completes in wait();
// - GPU back ends (nccl, virtual ranks and loopback on the GPU): collectives are enqueued on
//   the stream given to set_stream (default: the legacy default stream) and are ordered with
//   the compute on it. send_recv_async starts after the work already on that stream, runs on
//   the communicator's own stream so compute can overlap it, and wait() orders the compute
//   stream after the transfer without blocking the host. synchronize() blocks the host until
//   everything this communicator enqueued is done.
// All operations are collective over the communicator except send_recv_async/wait, which are
// paired with the peers named. Buffers are host pointers unless device_memory() is true.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  virtual bool device_memory() const = 0;

  // count = elements for EACH peer: send and recv hold size()*count elements; chunk p goes
  // to / came from rank p. send and recv must not overlap.
  virtual void all_to_all(const void* send, void* recv, std::size_t count, DType dt) = 0;
  // One ring step: send count elements to dst, receive count from src. Both directions are
  // posted at once, so a ring where every rank calls this cannot deadlock.
  virtual Request send_recv_async(const void* send, int dst, void* recv, int src,
                                  std::size_t count, DType dt) = 0;
  virtual void wait(Request& r) = 0;
  // count per rank; recv holds size()*count, chunk p from rank p.
  virtual void all_gather(const void* send, void* recv, std::size_t count, DType dt) = 0;
  // Sum; send holds size()*count, recv gets the sum of chunk rank() over all ranks.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t count, DType dt) = 0;
  // Sum; send == recv allowed.
  virtual void all_reduce(const void* send, void* recv, std::size_t count, DType dt) = 0;
  virtual void barrier() = 0;

  // Stream that compute-ordered collectives join (a cudaStream_t); no-op on host back ends.
  virtual void set_stream(void* cuda_stream);
  virtual void synchronize();

  // A communicator over `members` (ranks of this communicator, ascending, including rank()).
  // Collective: every rank calls it with the group it belongs to; groups must not overlap.
  // The new rank is the position of rank() in members.
  virtual std::unique_ptr<Communicator> subgroup(std::span<const int> members) = 0;
};

// One rank layout for SP x DP: world rank w -> dp index w / sp, sp index w % sp; inside the
// SP group, ulysses index = sp_index % ulysses (adjacent ranks, inside a node), ring index =
// sp_index / ulysses.
struct RankLayout {
  int world = 1, sp = 1, ulysses = 1, ring = 1, dp = 1;

  // Validates: all degrees >= 1, world % (ulysses*ring) == 0; else seqpar::Error naming them.
  static RankLayout make(int world, int ulysses_degree, int ring_degree);

  int dp_index(int w) const { return w / sp; }
  int sp_index(int w) const { return w % sp; }
  int ulysses_index(int w) const { return sp_index(w) % ulysses; }
  int ring_index(int w) const { return sp_index(w) / ulysses; }
  // World ranks of the group that world rank w belongs to, ascending.
  std::vector<int> sp_group(int w) const;
  std::vector<int> ulysses_group(int w) const;
  std::vector<int> ring_group(int w) const;
  std::vector<int> dp_group(int w) const;
};

struct Groups {
  std::unique_ptr<Communicator> sp, ulysses, ring, dp;
  RankLayout layout;
};

// Collective over world; sp = ulysses_degree * ring_degree must divide world.size().
Groups make_groups(Communicator& world, int ulysses_degree, int ring_degree);

// Factories. Each throws seqpar::Error with the reason when its back end is not built in or
// cannot start (no MPI, no NCCL, no GPU).
// MPI_COMM_WORLD on host memory; MPI must be initialised (see MpiSession).
std::unique_ptr<Communicator> make_mpi_world();
// One rank per GPU, bootstrapped over MPI_COMM_WORLD: rank 0 creates the unique id and
// broadcasts it, the rank inside the node picks the device.
std::unique_ptr<Communicator> make_nccl_world();
// P communicators of one process; rank r is used by thread r; collectives rendezvous across
// the threads. on_gpu: buffers are device pointers on the current device.
std::vector<std::unique_ptr<Communicator>> make_virtual_world(int P, bool on_gpu);
// Single-rank proxy: size() == P, rank() == rank; moves the bytes that rank would and never
// blocks. Data-movement ops behave as if every peer held this rank's data (recv chunks are
// copies of the matching send chunks); reductions as if peers contributed zeros.
std::unique_ptr<Communicator> make_loopback(int P, int rank = 0, bool on_gpu = false);

// True when the back end is built in; `why` gets the reason when not.
bool backend_available(Backend b, std::string* why = nullptr);

// RAII MPI_Init_thread / MPI_Finalize. Without MPI in the build, constructing one throws.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int world_rank() const { return rank_; }
  int world_size() const { return size_; }

 private:
  int rank_ = 0, size_ = 1;
  bool owns_ = false;
};

}  // namespace seqpar::comm
