// Test helper: one gradient computation of a TrainSetup on `world` virtual ranks (threads, CPU
// back end), each rank's loss and gradients kept, for the tests that hold every rank to a reference.
#pragma once
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"

namespace seqpar::train::testing {

struct VirtualRun {
  std::vector<StepValues> steps;     // per rank
  std::vector<ParamTensor> tensors;  // rank 0's, to name the gradients
  std::vector<std::string> errors;   // per rank; empty where the rank finished
};

// Runs fn(rank, backend, trainer) on each of `world` virtual ranks (threads, a CPU back end of
// `precision` each; a world of 1 runs without a communicator). Returns each rank's error, "" where
// it finished.
template <class F>
std::vector<std::string> on_virtual_ranks(const TrainSetup& s, int world, Precision precision, F&& fn) {
  auto comms = comm::make_virtual_world(world, false);
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto be = make_cpu_backend(precision);
        Trainer t(*be, world > 1 ? comms[static_cast<std::size_t>(r)].get() : nullptr, s);
        fn(r, *be, t);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  return errors;
}

inline VirtualRun run_on_virtual_ranks(const TrainSetup& s, int world) {
  VirtualRun out;
  out.steps.resize(static_cast<std::size_t>(world));
  out.errors = on_virtual_ranks(s, world, Precision::fp32, [&](int r, Backend&, Trainer& t) {
    const StepResult st = t.compute_gradients();
    out.steps[static_cast<std::size_t>(r)] = {st.loss, t.grads_host()};
    if (r == 0) out.tensors = t.model().tensors();
  });
  return out;
}

}  // namespace seqpar::train::testing
