#include "seqpar/train/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "seqpar/core/error.hpp"

namespace seqpar::train {

namespace {

constexpr double kFp32Roundoff = 0x1p-24;  // unit roundoff of fp32 (round to nearest)
constexpr double kScatterSigmas = 4;        // factor(n)'s allowance for the scatter of an RMS
constexpr double kSumLambda = 6;            // the floor's lambda (Higham and Mary 2019)

}  // namespace

Arithmetic arithmetic_of(const Backend& be) {
  Arithmetic a;
  const std::string prec = be.precision() == Precision::bf16 ? "bf16" : "fp32";
  if (be.on_gpu()) {
    a.name = fmt::format("{} back end, {} attention, {}", be.name(), be.attention_engine(), prec);
    a.accumulation_roundoff = 8 * kFp32Roundoff;
    a.accumulation_source = "8 x 2^-24, fp32 accumulation on tensor cores";
  } else {
    a.name = fmt::format("{} back end, {}{}", be.name(), prec, prec == "bf16" ? " emulation" : "");
    a.accumulation_roundoff = kFp32Roundoff;
    a.accumulation_source = "2^-24, fp32 accumulation";
  }
  return a;
}

double ValidationRule::factor(std::int64_t terms) const {
  if (error_factor) return *error_factor;
  const double n = static_cast<double>(std::max<std::int64_t>(terms, 1));
  return arithmetic.rounding_growth * (1.0 + kScatterSigmas / std::sqrt(n));
}

double ValidationRule::floor() const {
  if (error_atol) return *error_atol;
  const double k = static_cast<double>(std::max<std::int64_t>(step_tokens, 1));
  return 2 * kSumLambda * std::sqrt(k) * arithmetic.accumulation_roundoff;
}

void check_rule(const ValidationRule& r) {
  if (r.error_factor && (!std::isfinite(*r.error_factor) || !(*r.error_factor >= 1.0)))
    throw Error(fmt::format("--error-factor = {}: must be a finite number >= 1 (the sharded step may "
                            "be that many times less accurate than the unsharded one)",
                            *r.error_factor));
  if (r.error_atol && (!std::isfinite(*r.error_atol) || !(*r.error_atol >= 0.0)))
    throw Error(fmt::format("--error-atol = {}: must be a finite number >= 0", *r.error_atol));
}

double TensorCheck::used() const {
  const double s = allowed > 0 ? sharded_error / allowed : (sharded_error > 0 ? HUGE_VAL : 0.0);
  return std::isnan(s) ? HUGE_VAL : s;
}

int ValidationReport::failures() const {
  return static_cast<int>(std::count_if(tensors.begin(), tensors.end(), [](const TensorCheck& t) { return !t.ok; }));
}

const TensorCheck& ValidationReport::worst() const {
  if (tensors.empty()) throw Error("validation report: no tensor was compared");
  return *std::max_element(tensors.begin(), tensors.end(),
                           [](const TensorCheck& a, const TensorCheck& b) { return a.used() < b.used(); });
}

namespace {

// ||a - ref|| / ||ref|| (2-norms; ||a - ref|| when the reference is all zeros). The RMS over the
// tensor, not the largest element: the largest error is an extreme value that moves by tens of
// percent with the data, while the RMS of n errors is steady for large n (the rule's factor widens
// for small n) and a sharding bug still moves it by orders of magnitude. NaN propagates.
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

// The unsharded loss's error per term: the RMS over the tokens of (unsharded - reference) token
// losses, relative to |L_ref|; with no token losses the loss is its own single term.
double loss_baseline(const StepValues& u, const StepValues& ref, std::int64_t& terms) {
  if (u.token_losses.size() != ref.token_losses.size())
    throw Error(fmt::format("validation: {} token losses against {} in the reference (different steps)",
                            u.token_losses.size(), ref.token_losses.size()));
  const double scale = ref.loss != 0 ? std::abs(ref.loss) : 1.0;
  if (u.token_losses.empty()) {
    terms = 1;
    return std::abs(u.loss - ref.loss) / scale;
  }
  double sum = 0;
  for (std::size_t t = 0; t < u.token_losses.size(); ++t) {
    const double d = static_cast<double>(u.token_losses[t]) - static_cast<double>(ref.token_losses[t]);
    sum += d * d;
  }
  terms = static_cast<std::int64_t>(u.token_losses.size());
  return std::sqrt(sum / static_cast<double>(terms)) / scale;
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
    if (i == 0) {
      c.baseline = loss_baseline(unsharded, reference, c.terms);
    } else {
      c.terms = tensors[i - 1].count;
      c.baseline = eu[i];
    }
    c.factor = rule.factor(c.terms);
    c.floor = rule.floor();
    c.ratio = c.baseline > 0 ? es[i] / c.baseline : (es[i] > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    c.allowed = c.factor * c.baseline + c.floor;
    c.ok = std::isfinite(es[i]) && std::isfinite(c.baseline) && std::isfinite(eu[i]) && es[i] <= c.allowed;
    rep.tensors.push_back(std::move(c));
  }
  return rep;
}

std::string explain(const TensorCheck& c, const ValidationRule& rule) {
  const bool loss = c.what == "loss";
  const std::string per = loss ? fmt::format("per token ({} tokens)", c.terms)
                               : fmt::format("per element ({} elements)", c.terms);
  const std::string factor = rule.error_factor ? "--error-factor"
                                                : fmt::format("{:g} x (1 + {:g}/sqrt({}))", rule.arithmetic.rounding_growth,
                                                              kScatterSigmas, c.terms);
  const std::string floor =
      rule.error_atol ? "--error-atol"
                      : fmt::format("{:g} x sqrt({} tokens) x u_acc, u_acc = {} ({})", 2 * kSumLambda, rule.step_tokens,
                                    rule.arithmetic.accumulation_source, rule.arithmetic.name);
  return fmt::format("{}: sharded error {:.3g} {} allowed {:.3g} = {:.3g} x unsharded error {:.3g} {} + floor "
                     "{:.3g}; factor = {}, floor = {}",
                     c.what, c.sharded_error, c.ok ? "<=" : "> ", c.allowed, c.factor, c.baseline, per, c.floor,
                     factor, floor);
}

StepValidator::StepValidator(std::unique_ptr<Backend> unsharded_backend, const TrainSetup& sharded, int dp,
                             comm::Communicator* world, Backend* comm_backend)
    : world_(world && world->size() > 1 ? world : nullptr), comm_be_(comm_backend) {
  const TrainSetup ref = reference_setup(sharded, dp);
  step_tokens_ = static_cast<std::int64_t>(ref.micro_batch) * ref.seq_len;
  if (world_ && !comm_be_) throw Error("StepValidator: a world needs the back end its collectives move memory of");
  if (world_ && world_->rank() != 0) return;  // rank 0 runs the two steps for every rank
  if (!unsharded_backend) throw Error("StepValidator: no back end for the unsharded step");
  unsharded_be_ = std::move(unsharded_backend);
  reference_be_ = make_cpu_backend(Precision::fp32);
  unsharded_ = std::make_unique<Trainer>(*unsharded_be_, nullptr, ref);
  reference_ = std::make_unique<Trainer>(*reference_be_, nullptr, ref);
}

StepValidator::~StepValidator() = default;

template <class T>
void StepValidator::share(std::vector<T>& v) {
  if (!world_) return;
  Array<T> buf(*comm_be_, static_cast<std::int64_t>(v.size()), MemCategory::working);
  if (runs())
    comm_be_->copy_from_host(buf.data(), v.data(), buf.bytes());
  else
    comm_be_->zero(buf.data(), buf.bytes());
  world_->all_reduce(buf.data(), buf.data(), v.size(), std::is_same_v<T, double> ? DType::fp64 : DType::fp32);
  comm_be_->copy_to_host(v.data(), buf.data(), buf.bytes());
}

StepValidator::Baseline StepValidator::baseline() {
  Baseline b;
  if (runs()) {
    b.unsharded = unsharded_->compute_gradients();
    b.reference = reference_->compute_gradients();
    b.unsharded_values = {b.unsharded.loss, unsharded_->grads_host(), unsharded_->token_losses()};
    b.reference_values = {b.reference.loss, reference_->grads_host(), reference_->token_losses()};
  }
  if (!world_) return b;
  // Sizes and scalars first, then the values: [loss, real tokens] of both runs, #grads, #token losses.
  std::vector<double> head = {b.unsharded.loss, b.unsharded.real_tokens, b.reference.loss, b.reference.real_tokens,
                              static_cast<double>(b.unsharded_values.grads.size()),
                              static_cast<double>(b.unsharded_values.token_losses.size())};
  share(head);
  b.unsharded.loss = b.unsharded_values.loss = head[0];
  b.unsharded.real_tokens = head[1];
  b.reference.loss = b.reference_values.loss = head[2];
  b.reference.real_tokens = head[3];
  for (StepValues* v : {&b.unsharded_values, &b.reference_values}) {
    v->grads.resize(static_cast<std::size_t>(head[4]));
    v->token_losses.resize(static_cast<std::size_t>(head[5]));
    share(v->grads);
    share(v->token_losses);
  }
  return b;
}

ValidationReport StepValidator::check(Trainer& sharded, const StepResult& r, const Baseline& b,
                                      ValidationRule rule) const {
  rule.step_tokens = step_tokens_;
  return compare_step(sharded.model().tensors(), {r.loss, sharded.grads_host(), {}}, b.unsharded_values,
                      b.reference_values, rule);
}

void StepValidator::advance(Trainer& sharded) {
  sharded.optimizer_step();
  std::vector<float> params(static_cast<std::size_t>(sharded.model().param_count()));
  if (runs()) {
    unsharded_->optimizer_step();
    reference_->optimizer_step();
    params = reference_->params_host();
    unsharded_->set_params_host(params);
  }
  share(params);
  sharded.set_params_host(params);
}

}  // namespace seqpar::train
