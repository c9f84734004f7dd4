// The communication watchdog: how long a rank waits in one blocking communication call before it
// gives up on its peers. A frozen or crashed peer would otherwise hang the job forever; with the
// watchdog, the rank that waits too long names itself and the operation (and the peer of a
// send/recv) and aborts the whole job (MPI_Abort on real ranks; an error on virtual ranks).
//
// The limit is one process-wide setting, because every layer (the communicators, their subgroups,
// the benchmark drivers' world reductions, the start-up option check) must honour the same one:
// `--comm-timeout SECONDS` on every MPI program, else the SEQPAR_COMM_TIMEOUT environment
// variable, else kDefaultCommTimeoutS. 0 turns the watchdog off.
#pragma once
#include <chrono>
#include <optional>
#include <string>

namespace seqpar::comm {

// Long enough for the largest measured message on a slow fabric and for a rank that is legitimately
// behind (a long first step, a lazy NCCL connection setup); short enough that a hung job is noticed.
inline constexpr double kDefaultCommTimeoutS = 300;
inline constexpr const char* kCommTimeoutEnv = "SEQPAR_COMM_TIMEOUT";
// The help text of --comm-timeout, the same in every program.
inline constexpr const char* kCommTimeoutHelp =
    "seconds a rank waits in one communication call before it aborts the job, naming itself and "
    "the call (0: wait forever; default: $SEQPAR_COMM_TIMEOUT, else 300)";

// The current limit in seconds (0: off). Before any configure/set call: the environment variable
// if set and valid, else the default.
double comm_timeout_s();
// Throws seqpar::Error unless seconds is finite and >= 0; `source` names where it came from.
void set_comm_timeout_s(double seconds, const std::string& source = "--comm-timeout");
// The limit a program runs with: the flag's value if given, else the environment variable, else
// the default. Validates it (errors name --comm-timeout or SEQPAR_COMM_TIMEOUT), sets it and
// returns it.
double configure_comm_timeout(std::optional<double> flag_value);

// The end of one wait, taken from comm_timeout_s() when constructed.
class Deadline {
 public:
  Deadline();
  bool expired() const;
  double limit_s() const { return limit_s_; }

 private:
  double limit_s_;
  std::chrono::steady_clock::time_point end_;
};

// Between completion polls: yields for the first second, as MPI's and CUDA's own blocking waits
// spin, so that the benchmarks' timings keep microsecond resolution; after that sleeps a
// millisecond per poll (at most 0.1% of such a wait) so that a long wait does not steal a core
// from the ranks it waits for (CI oversubscribes the cores).
class PollBackoff {
 public:
  void pause();

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// "rank 2 waited 3 s for all_reduce (4 ranks) without completing; a peer has stopped or is far
// behind. Raise --comm-timeout / SEQPAR_COMM_TIMEOUT (0 turns the watchdog off) if it is only slow."
std::string timeout_message(const std::string& who, const std::string& what, double limit_s);

namespace detail {
// Test hook for the frozen-rank tests: when SEQPAR_TEST_STALL_RANK equals `world_rank`, the
// process sleeps forever at the (SEQPAR_TEST_STALL_AFTER + 1)-th call (default: the first), as a
// rank stopped with SIGSTOP would. Called at the start of every watched blocking operation.
void test_stall_point(int world_rank);
}  // namespace detail

}  // namespace seqpar::comm
