#include "seqpar/train/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "seqpar/core/error.hpp"

namespace seqpar::train {

void check_rule(const ValidationRule& r) {
  if (!std::isfinite(r.error_factor) || !(r.error_factor >= 1.0))
    throw Error(fmt::format("--error-factor = {}: must be a finite number >= 1 (the sharded step may "
                            "be that many times less accurate than the unsharded one)",
                            r.error_factor));
  if (!std::isfinite(r.error_atol) || !(r.error_atol >= 0.0))
    throw Error(fmt::format("--error-atol = {}: must be a finite number >= 0", r.error_atol));
}

int ValidationReport::failures() const {
  return static_cast<int>(std::count_if(tensors.begin(), tensors.end(), [](const TensorCheck& t) { return !t.ok; }));
}

const TensorCheck& ValidationReport::worst() const {
  if (tensors.empty()) throw Error("validation report: no tensor was compared");
  auto score = [](const TensorCheck& t) {  // > 1: failed; NaN counts as the worst
    const double s = t.allowed > 0 ? t.sharded_error / t.allowed : (t.sharded_error > 0 ? HUGE_VAL : 0.0);
    return std::isnan(s) ? HUGE_VAL : s;
  };
  return *std::max_element(tensors.begin(), tensors.end(),
                           [&](const TensorCheck& a, const TensorCheck& b) { return score(a) < score(b); });
}

namespace {

// ||a - ref|| / ||ref|| (2-norms; ||a - ref|| when the reference is all zeros). The RMS over the
// tensor, not the largest element: the largest error is an extreme value that moves by tens of
// percent with the data, while the sharded step legitimately rounds at a few more places (each
// ring step's partial output, dK,dV summed from rounded parts), so a max-based ratio sits close to
// 2 for correct plans; the RMS ratio is steady (about 1.0-1.3 for every method in bf16 emulation) and a
// sharding bug still moves it by orders of magnitude. NaN propagates.
template <class T>
double normalised_error(const T* a, const T* ref, std::int64_t n) {
  double err = 0, norm = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double r = static_cast<double>(ref[i]), d = static_cast<double>(a[i]) - r;
    err += d * d;
    norm += r * r;
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

}  // namespace

std::vector<double> tensor_errors(const std::vector<ParamTensor>& tensors, const StepValues& a,
                                  const StepValues& ref) {
  if (a.grads.size() != ref.grads.size())
    throw Error(fmt::format("validation: {} gradients against {} in the reference (different models)",
                            a.grads.size(), ref.grads.size()));
  std::vector<double> e;
  e.push_back(normalised_error(&a.loss, &ref.loss, 1));
  for (const ParamTensor& t : tensors) {
    if (t.offset < 0 || t.count < 0 || static_cast<std::size_t>(t.offset + t.count) > ref.grads.size())
      throw Error(fmt::format("validation: tensor {} lies outside the {} gradients", t.name, ref.grads.size()));
    const auto o = static_cast<std::size_t>(t.offset);
    e.push_back(normalised_error(a.grads.data() + o, ref.grads.data() + o, t.count));
  }
  return e;
}

ValidationReport compare_step(const std::vector<ParamTensor>& tensors, const StepValues& sharded,
                              const StepValues& unsharded, const StepValues& reference,
                              const ValidationRule& rule) {
  const std::vector<double> es = tensor_errors(tensors, sharded, reference);
  const std::vector<double> eu = tensor_errors(tensors, unsharded, reference);
  ValidationReport rep;
  for (std::size_t i = 0; i < es.size(); ++i) {
    TensorCheck c;
    c.what = i == 0 ? "loss" : "grad " + tensors[i - 1].name;
    c.sharded_error = es[i];
    c.unsharded_error = eu[i];
    c.ratio = eu[i] > 0 ? es[i] / eu[i] : (es[i] > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    c.allowed = rule.error_factor * eu[i] + rule.error_atol;
    c.ok = std::isfinite(es[i]) && std::isfinite(eu[i]) && es[i] <= c.allowed;
    rep.tensors.push_back(std::move(c));
  }
  return rep;
}

}  // namespace seqpar::train
