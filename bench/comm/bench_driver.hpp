// What the communication benchmarks share: buffers in the communicator's memory, the timed
// loop (warm-up, per-iteration times, slowest rank), NVTX ranges, the measurement JSON and the
// error handling that keeps every rank's exit code meaningful under mpirun/srun.
#pragma once
#include <cstddef>
#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqpar/core/measurement.hpp"
#include "seqpar/comm/communicator.hpp"

namespace seqpar::comm::bench {

// Host or device memory, matching a communicator's device_memory().
class Buffer {
 public:
  Buffer(std::size_t bytes, bool device);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  void fill(unsigned char byte);

 private:
  std::size_t bytes_;
  bool device_;
  void* ptr_ = nullptr;
};

// Marks a region in Nsight Systems timelines; no-op in builds without CUDA.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Runs fn `warmup` times, then `iters` times each timed alone: world barrier, fn, wait for
// the communicator's work. Returns per-iteration seconds of the slowest world rank.
std::vector<double> time_iterations(Communicator& world, Communicator& c, int warmup, int iters,
                                    const std::function<void()>& fn);

// Host name of every world rank (MPI_Get_processor_name), in rank order.
std::vector<std::string> world_hosts();
// {"hosts": [...per world rank], "nodes": distinct hosts among `members`} so that a report or
// `seqpar calibrate` can tell an intra-node from an inter-node measurement.
nlohmann::json placement_json(const std::vector<int>& members);

// Parses the options on every rank; only rank 0 prints help or a parse error. Returns the exit
// code to leave with, or -1 when the program should go on.
int parse_options(CLI::App& app, int argc, char** argv, int world_rank);

// The back end a communication benchmark runs (mpi or nccl), checked to be built in and, for
// nccl, to have a device; errors name --comm and `program`. `deprecated_backend` is the value of the
// flag's old name --backend (empty when not given): taken with a notice, an error when it
// contradicts --comm.
Backend benchmark_backend(const std::string& name, const std::string& deprecated_backend, const char* program);

// Sum of a value over MPI_COMM_WORLD, and its size.
std::size_t world_sum(std::size_t v);
// Element-wise maximum over MPI_COMM_WORLD, in place; `what` names it in errors and timeouts.
void world_max(std::vector<double>& v, const char* what);
int world_size();

// {run_info..., kind, program, mode, device, environment, config, results: []}
nlohmann::json measurement_doc(int argc, char** argv, const std::string& program,
                               Mode mode, bool gpu, nlohmann::json config);

// Runs body(world_rank) inside an MPI session. seqpar::Error before `started` is set (argument
// errors, and the start-up option check): rank 0 prints it, every rank exits 2; a rank that
// fails its argument checks alone takes part in the option exchange (report_start_error), so
// the ranks that passed stop too, with its message. Errors after `started` print on the rank
// that saw them and abort the job, so no peer hangs in a collective.
//
// Every body calls verify_same_options(options_json) after its argument checks and before
// setting `started`; the timeout comes from configure_comm_timeout (watchdog.hpp).
int guarded_main(int argc, char** argv, const std::function<int(int rank, bool& started)>& body);

}  // namespace seqpar::comm::bench
