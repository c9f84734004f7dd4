// Is a sharded training step right? Every low-precision step differs from the exact one, and
// sharding legitimately moves that rounding around (other blocks, other summation orders). So
// three runs of the same step and parameters are compared (docs/ARCHITECTURE.md, "Validation of
// the training step"; the rule of FlashAttention's tests):
//   sharded   - the plan under test, in the chosen back end and precision;
//   unsharded - SP = 1, the same back end and precision;
//   reference - SP = 1 in plain fp32 (the CPU back end).
// Per tensor (the loss, then every gradient tensor) the error of a run is the relative RMS error
// ||x - reference|| / ||reference|| (validation.cpp says why not the largest element), and the
// sharded step passes when
//   sharded_error <= error_factor * unsharded_error + error_atol.
// A real sharding bug (a wrong label, a wrong K,V block) is far outside this; rounding is not.
#pragma once
#include <string>
#include <vector>

#include "seqpar/train/model.hpp"

namespace seqpar::train {

// What one step produced: the loss and every parameter's gradient (host copy).
struct StepValues {
  double loss = 0;
  std::vector<float> grads;
};

struct ValidationRule {
  double error_factor = 2.0;  // FlashAttention's tests use 2
  // Covers fp32 summation-order noise where the unsharded error is 0 (fp32 precision).
  double error_atol = 1e-5;
};
// Throws seqpar::Error naming --error-factor (must be finite and >= 1) or --error-atol (finite and
// >= 0).
void check_rule(const ValidationRule& rule);

struct TensorCheck {
  std::string what;  // "loss" or "grad <tensor name>"
  double sharded_error = 0, unsharded_error = 0;
  double ratio = 0;    // sharded_error / unsharded_error (inf when only the latter is 0)
  double allowed = 0;  // error_factor * unsharded_error + error_atol
  bool ok = false;     // sharded_error <= allowed, every figure finite
};

struct ValidationReport {
  std::vector<TensorCheck> tensors;  // the loss first, then the model's tensors in order
  int failures() const;
  bool ok() const { return failures() == 0; }
  // The check closest to (or furthest past) its bound: largest sharded_error / allowed.
  const TensorCheck& worst() const;
};

// Normalised error of `a` against `ref` for the loss and each tensor, in that order (NaN when
// either holds a NaN, so that a broken step never looks accurate).
std::vector<double> tensor_errors(const std::vector<ParamTensor>& tensors, const StepValues& a,
                                  const StepValues& ref);

ValidationReport compare_step(const std::vector<ParamTensor>& tensors, const StepValues& sharded,
                              const StepValues& unsharded, const StepValues& reference,
                              const ValidationRule& rule);

}  // namespace seqpar::train
