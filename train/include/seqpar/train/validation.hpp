// Is a sharded training step right? Every low-precision step differs from the exact one, and
// sharding legitimately moves that rounding around (other blocks, other summation orders). So
// three runs of the same step and parameters are compared (docs/ARCHITECTURE.md, "Validation of
// the training step"):
//   sharded   - the plan under test, in the chosen back end and precision;
//   unsharded - SP = 1, the same back end and precision;
//   reference - SP = 1 in plain fp32 (the CPU back end).
// Per compared quantity X (the loss, then every gradient tensor), with n terms (a tensor's
// elements; for the loss, the per-token losses it is the mean of), the sharded step passes when
//   e_s <= factor(n) x b + floor, where
//   e_s       = ||X_s - X_ref|| / ||X_ref||, the sharded step's error;
//   b         = the unsharded step's error per term: for a tensor ||X_u - X_ref|| / ||X_ref|| (its
//               RMS error over the elements); for the loss the RMS over the tokens of the per-token
//               loss errors, / |L_ref|, which bounds the error of their mean whatever the signs
//               (Cauchy-Schwarz), so a loss whose token errors happen to cancel does not shrink it;
//   factor(n) = g x (1 + 4 / sqrt(n)): g = 2 because the sharded step rounds a value at most twice
//               where the unsharded step rounds it once (a ring's partial outputs and dK,dV are
//               rounded before they are merged), and two roundings add up to at most twice one;
//               1 + 4/sqrt(n) because the RMS of n rounding errors scatters by about 1/sqrt(2n) of
//               itself, and a ratio of two such by 1/sqrt(n): 4 of those;
//   floor     = 2 x 6 x sqrt(K) x u_acc: the probabilistic bound lambda sqrt(K) u of a K-term sum
//               (Higham and Mary 2019; lambda = 6 fails with probability below 1e-7), for the sharded
//               step and the reference each; K = the tokens of the step (weight gradients sum over
//               every token, attention over a sequence's keys: the longest sums sharding reorders);
//               u_acc = the unit roundoff the back end accumulates with (Arithmetic). It is what
//               remains where the unsharded step is exact (fp32 precision: it is the reference).
// A real sharding bug (a wrong label, a wrong K,V block) is far outside this; rounding is not.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/train/trainer.hpp"

namespace seqpar::train {

// What one step produced: the loss, every parameter's gradient (host copy) and the terms of the
// loss (Trainer::token_losses; the rule reads the unsharded and reference steps' ones, which are in
// the same order; empty: the loss counts as one term).
struct StepValues {
  double loss = 0;
  std::vector<float> grads;
  std::vector<float> token_losses = {};
};

// How a back end rounds, as far as the rule's allowance depends on it.
struct Arithmetic {
  std::string name;                   // for the verdict, e.g. "cpu back end, bf16 emulation"
  double accumulation_roundoff = 0;   // u_acc: unit roundoff of the step's sums
  double rounding_growth = 2;         // g: how much sharding may grow a value's rounding error
  std::string accumulation_source;    // where u_acc comes from, for the verdict
};
// The CPU back end accumulates in fp32 (u_acc = 2^-24, its references sum in fp64 or fp32); the
// CUDA back end's GEMMs and attention kernels accumulate on tensor cores, which align the addends
// with fewer guard bits: u_acc = 8 x 2^-24, the bound the CUDA back end's tests hold cuBLAS to
// (tests/train/test_cuda_backend.cpp). In both engines (seqpar's and cuDNN's) attention stores
// each block's outputs once in bf16 and its softmax probabilities in bf16 for the P V product;
// both happen in the unsharded step too (the baseline), so g = 2 holds for every back end.
Arithmetic arithmetic_of(const Backend& be);

struct ValidationRule {
  Arithmetic arithmetic;
  std::int64_t step_tokens = 1;  // K: tokens of the whole step (micro-batch x dp x seq_len)
  // --error-factor and --error-atol: replace factor(n) and the floor (nullopt: the derived ones).
  std::optional<double> error_factor, error_atol;
  double factor(std::int64_t terms) const;
  double floor() const;
};
// Throws seqpar::Error naming --error-factor (must be finite and >= 1) or --error-atol (finite and
// >= 0) when given.
void check_rule(const ValidationRule& rule);

struct TensorCheck {
  std::string what;                  // "loss" or "grad <tensor name>"
  std::int64_t terms = 1;            // n
  double sharded_error = 0;          // e_s
  double unsharded_error = 0;        // ||X_u - X_ref|| / ||X_ref|| (for the loss: of the mean)
  double baseline = 0;               // b: the unsharded error per term
  double factor = 0, floor = 0;      // of the rule above
  double allowed = 0;                // factor x baseline + floor
  double ratio = 0;                  // sharded_error / baseline (inf when only the latter is 0)
  bool ok = false;                   // sharded_error <= allowed, every figure finite
  // sharded_error / allowed: how much of its allowance the check used (> 1: failed; NaN: inf).
  double used() const;
};

struct ValidationReport {
  std::vector<TensorCheck> tensors;  // the loss first, then the model's tensors in order
  int failures() const;
  bool ok() const { return failures() == 0; }
  // The check closest to (or furthest past) its bound: the largest used().
  const TensorCheck& worst() const;
};

// Normalised error of `a` against `ref` for the loss and each tensor, in that order (NaN when
// either holds a NaN, so that a broken step never looks accurate).
std::vector<double> tensor_errors(const std::vector<ParamTensor>& tensors, const StepValues& a,
                                  const StepValues& ref);

ValidationReport compare_step(const std::vector<ParamTensor>& tensors, const StepValues& sharded,
                              const StepValues& unsharded, const StepValues& reference,
                              const ValidationRule& rule);

// One check in words: "grad lm_head: sharded error 5.5e-03 <= allowed 1.2e-02 = 2.06 x unsharded
// error 5.6e-03 per term + floor 1.2e-06" and where the factor and the floor come from.
std::string explain(const TensorCheck& c, const ValidationRule& rule);

// --validate's other two runs beside a sharded trainer: the unsharded step (the sharded step's back
// end kind, engine and precision) and the fp32 reference on the CPU. With a world, its rank 0 runs
// them and shares their results with every rank (one all-reduce, the others adding zeros), so a
// P-rank step costs two unsharded steps, not 2P; every rank still checks its own gradients.
class StepValidator {
 public:
  // sharded: the sharded trainer's setup; dp: its data-parallel degree. unsharded_backend: used
  // where the runs happen (may be null on the other ranks). world, comm_backend: the sharded step's
  // ranks and a back end whose memory the world's collectives move (nullptr: this process runs both).
  StepValidator(std::unique_ptr<Backend> unsharded_backend, const TrainSetup& sharded, int dp,
                comm::Communicator* world = nullptr, Backend* comm_backend = nullptr);
  ~StepValidator();

  // The unsharded and reference steps at the current parameters: what every sharded rank of the
  // step is compared with. Collective over the world.
  struct Baseline {
    StepResult unsharded, reference;
    StepValues unsharded_values, reference_values;
  };
  Baseline baseline();
  // A sharded rank's step (after sharded.compute_gradients() returned r) against the baseline.
  ValidationReport check(Trainer& sharded, const StepResult& r, const Baseline& b, ValidationRule rule) const;
  // The optimizer step of all three; then the sharded and unsharded trainers take the reference's
  // parameters, so that every step is checked at the same point and rounding does not compound.
  // Collective over the world.
  void advance(Trainer& sharded);
  // K of the rule's floor: the tokens of the whole step, micro-batch x dp x seq_len.
  std::int64_t step_tokens() const { return step_tokens_; }

 private:
  bool runs() const { return unsharded_ != nullptr; }
  // Rank 0's values on every rank (sizes agreed beforehand).
  template <class T>
  void share(std::vector<T>& v);

  std::unique_ptr<Backend> unsharded_be_, reference_be_;
  std::unique_ptr<Trainer> unsharded_, reference_;
  comm::Communicator* world_;
  Backend* comm_be_;
  std::int64_t step_tokens_;
};

}  // namespace seqpar::train
