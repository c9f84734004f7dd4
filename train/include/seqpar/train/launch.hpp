// What seqpar-train and seqpar-bench-layer share: the model and plan options, starting the ranks
// (MPI or NCCL processes, virtual-rank threads, or the single-rank loopback proxy) and the
// measurement JSON envelope.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/memory_flags.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/train/backend.hpp"
#include "seqpar/train/model_config.hpp"

namespace seqpar::train {

struct ModelOptions {
  std::string model;  // preset name or JSON path; empty: the tiny default ModelConfig
  std::optional<int> layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
  // --window W: every layer a sliding-window layer of W tokens (a query sees the W keys ending at
  // itself, Hugging Face's `sliding_window`); 0: every layer full causal. Not given: the preset's kinds.
  std::optional<std::int64_t> window;
  void add(CLI::App& app);
  ModelConfig resolve() const;  // preset (if any) with the explicit sizes on top, validated
};

struct RunOptions {
  std::string seq_len = "64";
  std::string method = "ulysses";
  // The plan flags as given (0 and *_given = false where not given). After parsing, sp is --sp,
  // or the SP degree the other flags imply (seqpar::implied_sp: U x R, U for ulysses, R for ring),
  // or 1: the rank count to start when --gpus is not given. plan() then applies sim's rules.
  int sp = 1, ulysses_degree = 0, ring_degree = 0, micro_batch = 1, gpus = 0;
  bool sp_given = false, ulysses_given = false, ring_given = false;
  std::string backend = "cpu";
  // --attention as given (empty: the default, cudnn where available on --backend cuda). The CPU
  // back end has one attention, the reference, and takes no --attention.
  std::string attention;
  std::string comm = "mpi";
  std::string json_path;
  std::uint64_t seed = 1234;
  // The memory flags of `seqpar simulate` (seqpar-train registers them with add_memory; a program
  // that does not runs the plain step).
  seqpar::MemoryFlags mem;
  void add(CLI::App& app);
  void add_memory(CLI::App& app);
  // The memory options of the step: the flags given over train_memory_default() (ZeRO 0).
  seqpar::MemoryOptions memory() const;
  // The flags as seqpar::PlanFlags (nullopt where not given).
  seqpar::PlanFlags plan_flags() const;
  // The plan these options name over world_size ranks: seqpar::plan_from_flags, checked by
  // seqpar::check_plan_structure and the token layout. Throws seqpar::Error on bad input.
  seqpar::Plan plan(int world_size) const;
  // The engine --attention asks for (nullopt: the back end's default). Throws seqpar::Error on an
  // unknown engine, and on any --attention with --backend cpu.
  std::optional<kernels::AttentionEngine> attention_engine() const;
};

// "real-ranks", "virtual-ranks" or "single-rank-proxy" for a communicator back end.
std::string mode_name(comm::Backend b);

// What launch_ranks checks before any rank runs its body.
struct LaunchChecks {
  // The parsed options every MPI rank must share (comm::verify_same_options): run_options_json
  // plus the program's own. Leave out what may differ per rank (-J: only rank 0 writes it).
  nlohmann::json same_options = nlohmann::json::object();
  // --comm-timeout (comm::configure_comm_timeout): the watchdog of every communication call.
  std::optional<double> comm_timeout;
  // Registers --comm-timeout on app.
  void add(CLI::App& app);
};

// The parsed model and run options (65536, not "64K") under their option names, without -J.
// Throws seqpar::Error on a value that does not parse.
nlohmann::json run_options_json(const RunOptions& o, const ModelConfig& cfg);

// Starts the ranks and calls body(world, backend) on each (threads for virtual ranks; only
// rank 0 for loopback). world_size: virtual/loopback rank count (MPI/NCCL: the launcher's).
// On MPI/NCCL, every rank first checks checks.same_options against rank 0's: on a difference
// rank 0 prints the first differing option and every rank returns 2 before any other
// communication. Returns the process exit code: the largest body() returned on any local rank;
// a seqpar::Error thrown on a rank is printed with the rank and gives 2.
using RankBody = std::function<int(comm::Communicator& world, Backend& be)>;
int launch_ranks(int* argc, char*** argv, const RunOptions& o, int world_size,
                 const LaunchChecks& checks, const RankBody& body);

// The back end `name` (cpu | cuda); the CUDA one on the engine `attention` names (RunOptions::attention).
std::unique_ptr<Backend> make_backend(const std::string& name, const std::string& attention = "");

// run_info + {"kind": "measurement", "program", "mode", "device", "environment"}.
nlohmann::json measurement_document(int argc, const char* const* argv, const std::string& program,
                                    const std::string& mode, bool on_gpu);

// Sum of one value over all ranks of `c` (in the communicator's memory space).
double sum_over(comm::Communicator& c, Backend& be, double value);
// Every rank's value, rank order.
std::vector<double> gather_over(comm::Communicator& c, Backend& be, double value);

}  // namespace seqpar::train
