#include "bench_driver.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <set>

#include "seqpar/comm/environment.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/core/usage_exit.hpp"
#include "seqpar/comm/mpi_check.hpp"
#include "seqpar/comm/mpi_watch.hpp"
#include "seqpar/comm/same_options.hpp"

#ifdef SEQPAR_HAVE_CUDA
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "seqpar/core/cuda_check.hpp"
#endif

namespace seqpar::comm::bench {

Buffer::Buffer(std::size_t bytes, bool device) : bytes_(bytes), device_(device) {
  const std::size_t n = bytes ? bytes : 1;
  if (device_) {
#ifdef SEQPAR_HAVE_CUDA
    SEQPAR_CUDA_CHECK(cudaMalloc(&ptr_, n));
#else
    throw Error("device buffers need a CUDA build of seqpar");
#endif
  } else {
    ptr_ = ::operator new(n);
  }
}

Buffer::~Buffer() {
#ifdef SEQPAR_HAVE_CUDA
  if (device_) {
    cudaFree(ptr_);
    return;
  }
#endif
  ::operator delete(ptr_);
}

void Buffer::upload(const void* host, std::size_t bytes) {
#ifdef SEQPAR_HAVE_CUDA
  if (device_) {
    SEQPAR_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
    return;
  }
#endif
  std::memcpy(ptr_, host, bytes);
}

void Buffer::download(void* host, std::size_t bytes) const {
#ifdef SEQPAR_HAVE_CUDA
  if (device_) {
    SEQPAR_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
    return;
  }
#endif
  std::memcpy(host, ptr_, bytes);
}

void Buffer::fill(unsigned char byte) {
#ifdef SEQPAR_HAVE_CUDA
  if (device_) {
    SEQPAR_CUDA_CHECK(cudaMemset(ptr_, byte, bytes_));
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
    return;
  }
#endif
  std::memset(ptr_, byte, bytes_);
}

#ifdef SEQPAR_HAVE_CUDA
NvtxRange::NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }
#else
NvtxRange::NvtxRange(const std::string&) {}
NvtxRange::~NvtxRange() = default;
#endif

namespace {
// One watched all-reduce over the world: the drivers' reductions hang on a frozen rank like any
// collective, so they go through the watchdog too.
void world_allreduce(void* data, int count, MPI_Datatype type, MPI_Op op, const char* what) {
  detail::mpi_stall_point();
  MPI_Request req = MPI_REQUEST_NULL;
  SEQPAR_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, count, type, op, MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, what);
}
}  // namespace

std::vector<double> time_iterations(Communicator& world, Communicator& c, int warmup, int iters,
                                    const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  c.synchronize();
  std::vector<double> t(static_cast<std::size_t>(iters));
  for (auto& s : t) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    c.synchronize();
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // An iteration is done when its slowest rank is.
  world_max(t, "the all-reduce of the iteration times");
  return t;
}

int parse_options(CLI::App& app, int argc, char** argv, int world_rank) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return usage_exit(app, e, world_rank != 0);
  }
  return -1;
}

Backend benchmark_backend(const std::string& comm, const std::string& deprecated_backend, const char* program) {
  std::string name = comm;
  if (!deprecated_backend.empty()) {
    if (comm != "mpi" && comm != deprecated_backend)
      throw Error(fmt::format("--comm {} and --backend {}: --backend is the old name of --comm; give --comm only",
                              comm, deprecated_backend));
    int rank = 0;
    SEQPAR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == 0)
      std::fprintf(stderr, "%s: --backend is deprecated here; use --comm %s\n", program, deprecated_backend.c_str());
    name = deprecated_backend;
  }
  const Backend backend = parse_backend(name);
  if (backend != Backend::mpi && backend != Backend::nccl)
    throw Error(fmt::format("--comm {}: {} runs mpi or nccl", name, program));
  std::string why;
  if (!backend_available(backend, &why)) throw Error(fmt::format("--comm {}: {}", name, why));
  if (backend == Backend::nccl && !seqpar::comm::cuda_device_available(&why))
    throw Error(fmt::format("--comm nccl: no CUDA device: {}", why));
  return backend;
}

std::vector<std::string> world_hosts() {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  SEQPAR_MPI_CHECK(MPI_Get_processor_name(name, &len));
  const int n = world_size();
  std::vector<char> all(std::size_t(n) * MPI_MAX_PROCESSOR_NAME, 0);
  detail::mpi_stall_point();
  MPI_Request req = MPI_REQUEST_NULL;
  SEQPAR_MPI_CHECK(MPI_Iallgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                                  MPI_CHAR, MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, "the all-gather of the host names");
  std::vector<std::string> hosts;
  for (int r = 0; r < n; ++r) hosts.emplace_back(all.data() + std::size_t(r) * MPI_MAX_PROCESSOR_NAME);
  return hosts;
}

nlohmann::json placement_json(const std::vector<int>& members) {
  const std::vector<std::string> hosts = world_hosts();
  std::set<std::string> used;
  for (int w : members) used.insert(hosts.at(std::size_t(w)));
  return {{"hosts", hosts}, {"nodes", used.size()}};
}

std::size_t world_sum(std::size_t v) {
  unsigned long long x = v;
  world_allreduce(&x, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, "the all-reduce of the error counts");
  return static_cast<std::size_t>(x);
}

void world_max(std::vector<double>& v, const char* what) {
  if (v.size() > static_cast<std::size_t>(INT_MAX))
    throw Error(fmt::format("{}: {} values exceed MPI's count limit", what, v.size()));
  world_allreduce(v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, what);
}

int world_size() {
  int n = 0;
  SEQPAR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
  return n;
}

nlohmann::json measurement_doc(int argc, char** argv, const std::string& program,
                               Mode mode, bool gpu, nlohmann::json config) {
  nlohmann::json doc = measurement_header(argc, argv, program, mode, gpu);
  int device = 0;
#ifdef SEQPAR_HAVE_CUDA
  if (gpu) cudaGetDevice(&device);
#endif
  doc["environment"] = seqpar::comm::environment_info(device);
  doc["config"] = std::move(config);
  doc["results"] = nlohmann::json::array();
  return doc;
}

int guarded_main(int argc, char** argv, const std::function<int(int rank, bool& started)>& body) {
  std::unique_ptr<MpiSession> mpi;
  bool started = false;
  int rank = 0;
  try {
    mpi = std::make_unique<MpiSession>(&argc, &argv);
    rank = mpi->world_rank();
    return body(rank, started);
  } catch (const Error& e) {
    if (!started) {
      // Ranks given different arguments may fail differently, or only some may fail: the
      // start-up option exchange lets the others stop with this rank's message instead of
      // waiting in verify_same_options for it.
      const std::string msg = report_start_error(e.what());
      if (rank == 0) std::fprintf(stderr, "error: %s\n", msg.c_str());
      return 2;
    }
    std::fprintf(stderr, "error on rank %d: %s\n", rank, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error on rank %d: %s\n", rank, e.what());
  }
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  return 3;
}

}  // namespace seqpar::comm::bench
