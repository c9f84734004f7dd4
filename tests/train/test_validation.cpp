// The validation rule (validation.hpp): its arithmetic by hand (the factor, the floor, the loss's
// per-token baseline, NaN and inf never passing, the overrides); every method of the simulator's
// method table passing on virtual ranks in bf16 emulation; and the mutation matrix: every planted
// sharding bug (fault.hpp) failing for every method it applies to. With SEQPAR_VALIDATION_MATRIX
// set to a file, the matrix test writes its result there as the README's Markdown table
// (scripts/validation_sweep.py matrix puts it into the README).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"
#include "validation_cases.hpp"
#include "virtual_ranks.hpp"

namespace seqpar::train {
namespace {

using testing::matrix_model;
using testing::PlanCase;
using testing::setup_of;
using testing::site_of;
using testing::table_plans;
using testing::windowed;

// One step of `s` on `world` virtual ranks in bf16 emulation, every rank checked with the derived
// rule against one baseline, as --validate does (StepValidator).
std::vector<ValidationReport> validate_on_virtual_ranks(const TrainSetup& s, int world,
                                                         StepValidator& val, const StepValidator::Baseline& b) {
  std::vector<ValidationReport> reports(static_cast<std::size_t>(world));
  const std::vector<std::string> errors =
      testing::on_virtual_ranks(s, world, Precision::bf16, [&](int r, Backend& be, Trainer& t) {
        const StepResult st = t.compute_gradients();
        ValidationRule rule;
        rule.arithmetic = arithmetic_of(be);
        reports[static_cast<std::size_t>(r)] = val.check(t, st, b, rule);
      });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
  return reports;
}

std::vector<ValidationReport> validate_on_virtual_ranks(const TrainSetup& s, int world) {
  StepValidator val(make_cpu_backend(Precision::bf16), s, world / (s.ulysses * s.ring));
  return validate_on_virtual_ranks(s, world, val, val.baseline());
}

std::string describe(const ValidationReport& rep) {
  std::string out;
  for (const TensorCheck& t : rep.tensors)
    if (!t.ok) out += explain(t, ValidationRule{}) + "\n";
  return out;
}

bool caught(const std::vector<ValidationReport>& reports) {
  for (const ValidationReport& r : reports)
    if (!r.ok()) return true;
  return false;
}

// How far past its allowance the worst check of any rank went (TensorCheck::used).
double worst_used(const std::vector<ValidationReport>& reports) {
  double w = 0;
  for (const ValidationReport& r : reports) w = std::max(w, r.worst().used());
  return w;
}

// ---- the rule's arithmetic, by hand ----

std::vector<ParamTensor> two_tensors() { return {{"a", 0, 2, true}, {"b", 2, 2, false}}; }

ValidationRule cpu_rule(std::int64_t tokens) {
  ValidationRule r;
  r.arithmetic = arithmetic_of(*make_cpu_backend(Precision::bf16));
  r.step_tokens = tokens;
  return r;
}

TEST(ValidationRule, FactorAndFloorFollowFromTheArithmetic) {
  const ValidationRule r = cpu_rule(64);
  EXPECT_EQ(r.arithmetic.accumulation_roundoff, std::ldexp(1.0, -24));
  EXPECT_EQ(r.arithmetic.rounding_growth, 2.0);
  EXPECT_DOUBLE_EQ(r.factor(16), 2.0 * (1 + 4.0 / 4));  // 2 x (1 + 4/sqrt(16)) = 4
  EXPECT_DOUBLE_EQ(r.factor(64), 3.0);
  EXPECT_DOUBLE_EQ(r.factor(1), 10.0);
  EXPECT_DOUBLE_EQ(r.floor(), 12 * 8 * std::ldexp(1.0, -24));  // 12 x sqrt(64) x 2^-24
  ValidationRule o = r;
  o.error_factor = 1.5;
  o.error_atol = 1e-3;
  EXPECT_EQ(o.factor(16), 1.5);
  EXPECT_EQ(o.floor(), 1e-3);
  EXPECT_NE(arithmetic_of(*make_cpu_backend(Precision::fp32)).name, r.arithmetic.name);
}

TEST(ValidationRule, PassesWithinTheFactorAndFailsBeyondIt) {
  // Tensor b (2 elements): factor 2 x (1 + 4/sqrt(2)) = 7.657, unsharded error 0.01/sqrt(2) per
  // element: allowed 0.0541 (+ the floor); 0.05/sqrt(2) = 0.0354 passes, 0.08/sqrt(2) = 0.0566 fails.
  const ValidationRule rule = cpu_rule(4);
  const StepValues ref{1.0, {1.0f, 1.0f, 1.0f, 1.0f}, {}};
  const StepValues unsharded{1.0, {1.0f, 1.0f, 1.01f, 1.0f}, {}};
  const StepValues good{1.0, {1.0f, 1.0f, 1.05f, 1.0f}, {}}, bad{1.0, {1.0f, 1.0f, 1.08f, 1.0f}, {}};
  const ValidationReport ok = compare_step(two_tensors(), good, unsharded, ref, rule);
  EXPECT_TRUE(ok.ok()) << describe(ok);
  EXPECT_NEAR(ok.tensors[2].allowed, 7.657 * 0.01 / std::sqrt(2.0) + rule.floor(), 1e-4);
  EXPECT_NEAR(ok.tensors[2].ratio, 5.0, 1e-3);
  EXPECT_EQ(ok.tensors[2].terms, 2);
  const ValidationReport fail = compare_step(two_tensors(), bad, unsharded, ref, rule);
  ASSERT_EQ(fail.failures(), 1);
  EXPECT_EQ(fail.worst().what, "grad b");
  // Exact in the unsharded step (tensor a): only the floor is allowed.
  const StepValues drift{1.0, {1.0f + 1e-6f, 1.0f, 1.0f, 1.0f}, {}};
  EXPECT_TRUE(compare_step(two_tensors(), drift, unsharded, ref, rule).tensors[1].ok);
  const StepValues off{1.0, {1.001f, 1.0f, 1.0f, 1.0f}, {}};
  const ValidationReport a = compare_step(two_tensors(), off, unsharded, ref, rule);
  EXPECT_FALSE(a.tensors[1].ok);
  EXPECT_TRUE(std::isinf(a.tensors[1].ratio));
}

TEST(ValidationRule, TheLossIsHeldToItsPerTokenErrorsNotToALuckyMean) {
  // The unsharded step's token errors +0.1, -0.1, +0.1, -0.1 cancel in the mean (its loss error is
  // 0), but each token is off by 0.1: b = 0.1 / |L_ref| = 0.05, factor 2 x (1 + 4/sqrt(4)) = 6, so
  // the sharded loss may be off by 6 x 0.05 = 0.3 relative (plus the floor), whatever the signs.
  const ValidationRule rule = cpu_rule(4);
  const StepValues ref{2.0, {1.0f, 1.0f, 1.0f, 1.0f}, {2.0f, 2.0f, 2.0f, 2.0f}};
  const StepValues unsharded{2.0, {1.0f, 1.0f, 1.0f, 1.0f}, {2.1f, 1.9f, 2.1f, 1.9f}};
  const StepValues sharded{2.5, {1.0f, 1.0f, 1.0f, 1.0f}, {}};
  const ValidationReport rep = compare_step(two_tensors(), sharded, unsharded, ref, rule);
  const TensorCheck& loss = rep.tensors[0];
  EXPECT_EQ(loss.terms, 4);
  EXPECT_NEAR(loss.unsharded_error, 0.0, 1e-12);
  EXPECT_NEAR(loss.baseline, 0.05, 1e-6);
  EXPECT_NEAR(loss.allowed, 0.3 + rule.floor(), 1e-6);
  EXPECT_NEAR(loss.sharded_error, 0.25, 1e-12);
  EXPECT_TRUE(loss.ok) << explain(loss, rule);
  const StepValues worse{2.7, {1.0f, 1.0f, 1.0f, 1.0f}, {}};
  EXPECT_FALSE(compare_step(two_tensors(), worse, unsharded, ref, rule).tensors[0].ok);
  // Without token losses the loss is one term: its own error, factor 2 x 5.
  const ValidationReport one = compare_step(two_tensors(), sharded, {2.1, unsharded.grads, {}}, {2.0, ref.grads, {}}, rule);
  EXPECT_EQ(one.tensors[0].terms, 1);
  EXPECT_NEAR(one.tensors[0].baseline, 0.05, 1e-12);
  EXPECT_THROW(compare_step(two_tensors(), sharded, unsharded, {2.0, ref.grads, {2.0f}}, rule), Error);
}

TEST(ValidationRule, NanAndInfinityNeverPass) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const ValidationRule rule = cpu_rule(4);
  const StepValues ref{1.0, {1.0f, 1.0f, 1.0f, 1.0f}, {}};
  for (const float x : {nan, inf}) {
    const StepValues broken{1.0, {x, 1.0f, 1.0f, 1.0f}, {}};
    EXPECT_FALSE(compare_step(two_tensors(), broken, ref, ref, rule).tensors[1].ok) << x;
    // A broken unsharded step must not widen the bound to infinity either.
    EXPECT_FALSE(compare_step(two_tensors(), ref, broken, ref, rule).tensors[1].ok) << x;
    EXPECT_FALSE(compare_step(two_tensors(), ref, ref, broken, rule).ok()) << x;
    const StepValues broken_tokens{1.0, ref.grads, {1.0f, x}};
    EXPECT_FALSE(compare_step(two_tensors(), ref, broken_tokens, {1.0, ref.grads, {1.0f, 1.0f}}, rule).tensors[0].ok);
  }
  const StepValues nan_loss{std::nan(""), {1.0f, 1.0f, 1.0f, 1.0f}, {}};
  EXPECT_FALSE(compare_step(two_tensors(), nan_loss, ref, ref, rule).tensors[0].ok);
  EXPECT_GT(compare_step(two_tensors(), nan_loss, ref, ref, rule).tensors[0].used(), 1e300);
}

TEST(ValidationRule, RejectsNonFiniteOrNegativeOverrides) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const double f : {nan, inf, -1.0, 0.5}) {
    ValidationRule r;
    r.error_factor = f;
    EXPECT_THROW(check_rule(r), Error) << f;
  }
  for (const double a : {nan, inf, -1.0}) {
    ValidationRule r;
    r.error_atol = a;
    EXPECT_THROW(check_rule(r), Error) << a;
  }
  ValidationRule r;
  EXPECT_NO_THROW(check_rule(r));
  r.error_factor = 1.0;
  r.error_atol = 0.0;
  EXPECT_NO_THROW(check_rule(r));
}

TEST(ValidationRule, ExplainsWhereTheAllowanceComesFrom) {
  const ValidationRule rule = cpu_rule(64);
  const StepValues ref{1.0, {1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f}};
  const StepValues u{1.0, {1.01f, 1.0f, 1.0f, 1.0f}, {1.01f, 0.99f}};
  const ValidationReport rep = compare_step(two_tensors(), ref, u, ref, rule);
  const std::string loss = explain(rep.tensors[0], rule), a = explain(rep.tensors[1], rule);
  EXPECT_NE(loss.find("per token (2 tokens)"), std::string::npos) << loss;
  EXPECT_NE(loss.find("2 x (1 + 4/sqrt(2))"), std::string::npos) << loss;
  EXPECT_NE(a.find("per element (2 elements)"), std::string::npos) << a;
  EXPECT_NE(a.find("12 x sqrt(64 tokens) x u_acc, u_acc = 2^-24"), std::string::npos) << a;
  ValidationRule o = rule;
  o.error_factor = 3;
  EXPECT_NE(explain(rep.tensors[1], o).find("factor = --error-factor"), std::string::npos);
}

// ---- every method of the table, without a fault and with the two original faults ----

TEST(Validation, EveryMethodOfTheTablePassesInBf16) {
  const ModelConfig m = matrix_model();
  for (const PlanCase& c : table_plans({2, 4}, m, 32)) {
    SCOPED_TRACE(c.label);
    const auto reports = validate_on_virtual_ranks(setup_of(c.plan, m), c.plan.sp);
    for (std::size_t r = 0; r < reports.size(); ++r) {
      EXPECT_TRUE(reports[r].ok()) << "rank " << r << "\n" << describe(reports[r]);
      // bf16 emulation gives the rule a real baseline: the unsharded step is not exact.
      double largest = 0;
      for (const TensorCheck& t : reports[r].tensors) largest = std::max(largest, t.baseline);
      EXPECT_GT(largest, 1e-4) << "rank " << r << ": bf16 emulation left the unsharded step exact";
    }
  }
}

TEST(Validation, DataParallelTimesSpPasses) {
  // SP 2 on 4 ranks: two SP groups, gradients all-reduced over both.
  const ModelConfig m = matrix_model();
  for (const PlanCase& c : table_plans({2}, m, 32, 2)) {
    SCOPED_TRACE(c.label);
    for (const ValidationReport& r : validate_on_virtual_ranks(setup_of(c.plan, m), c.plan.gpus))
      EXPECT_TRUE(r.ok()) << describe(r);
  }
}

// The failing tensors say why: the wrong label's row of the LM head; attention's own weights.
TEST(Validation, PlantedFaultsFailWhereTheyAct) {
  const ModelConfig m = matrix_model();
  for (const PlanCase& c : table_plans({4}, m, 32)) {
    SCOPED_TRACE(c.label);
    StepValidator val(make_cpu_backend(Precision::bf16), setup_of(c.plan, m), 1);
    const StepValidator::Baseline b = val.baseline();
    auto failed = [](const ValidationReport& r, const std::string& what) {
      for (const TensorCheck& t : r.tensors)
        if (t.what == what && !t.ok) return true;
      return false;
    };
    for (const ValidationReport& r :
         validate_on_virtual_ranks(setup_of(c.plan, m, Fault::label_off_by_one), c.plan.sp, val, b))
      EXPECT_TRUE(failed(r, "grad lm_head")) << describe(r);
    for (const ValidationReport& r :
         validate_on_virtual_ranks(setup_of(c.plan, m, Fault::kv_wrong_block), c.plan.sp, val, b))
      EXPECT_TRUE(failed(r, "grad layers.0.wq") || failed(r, "grad layers.1.wq")) << describe(r);
    for (const ValidationReport& r :
         validate_on_virtual_ranks(setup_of(c.plan, m, Fault::loss_local_normalisation), c.plan.sp, val, b))
      EXPECT_TRUE(failed(r, "loss")) << describe(r);
  }
}

// With a world, rank 0 runs the unsharded and reference steps and every rank gets its results:
// the same values a validator of its own computes, and after advance() the reference's parameters.
TEST(Validation, RankZeroSharesTheBaselineWithEveryRank) {
  seqpar::Plan p;
  p.method = seqpar::Method::ring;
  p.gpus = p.sp = p.ring_degree = 4;
  p.seq_len = 32;
  p.micro_batch = 2;
  p.mem = train_memory_default();
  const TrainSetup s = setup_of(p, matrix_model());
  StepValidator local(make_cpu_backend(Precision::bf16), s, 1);
  const StepValidator::Baseline want = local.baseline();
  auto comms = comm::make_virtual_world(4, false);
  std::vector<StepValidator::Baseline> got(4);
  std::vector<std::vector<float>> params(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      auto be = make_cpu_backend(Precision::bf16);
      Trainer t(*be, comms[static_cast<std::size_t>(r)].get(), s);
      StepValidator val(r == 0 ? make_cpu_backend(Precision::bf16) : nullptr, s, 1,
                        comms[static_cast<std::size_t>(r)].get(), be.get());
      got[static_cast<std::size_t>(r)] = val.baseline();
      t.compute_gradients();
      val.advance(t);
      params[static_cast<std::size_t>(r)] = t.params_host();
    });
  for (auto& t : threads) t.join();
  for (const StepValidator::Baseline& b : got) {
    EXPECT_EQ(b.unsharded.loss, want.unsharded.loss);
    EXPECT_EQ(b.reference.real_tokens, want.reference.real_tokens);
    EXPECT_EQ(b.unsharded_values.grads, want.unsharded_values.grads);
    EXPECT_EQ(b.reference_values.grads, want.reference_values.grads);
    EXPECT_EQ(b.unsharded_values.token_losses, want.unsharded_values.token_losses);
    EXPECT_EQ(b.reference_values.token_losses.size(), 62u);  // 2 sequences of 31 labelled tokens
  }
  for (int r = 1; r < 4; ++r) EXPECT_EQ(params[static_cast<std::size_t>(r)], params[0]) << "rank " << r;
}

TEST(Validation, FaultsNeverReachTheReference) {
  TrainSetup s;
  s.ring = 4;
  s.zigzag = true;
  for (const Fault f : kFaults) {
    s.fault = f;
    EXPECT_EQ(reference_setup(s, 1).fault, Fault::none);
  }
}

// ---- packed documents ----

// A workload of documents that cross every shard edge at SP 2, 4 and 8 over 32 tokens (fixed:5:
// boundaries at 5, 10, ..., 30), so each document fault has a boundary or a shared document to
// break on every rank it sits on.
constexpr const char* kMatrixDocuments = "fixed:5";

bool is_document_fault(Fault f) {
  return f == Fault::document_boundary_ignored || f == Fault::document_chunk_order_wrong ||
         f == Fault::positions_not_restarted;
}

TrainSetup with_documents(TrainSetup s, const std::string& docs, std::optional<Balancer> b, std::uint64_t seed = 1) {
  s.documents = make_workload(docs, "fill", seed, 4);
  s.balancer = b;
  return s;
}

// Every method of the table at SP 2 and 4 under every balancer, on fresh random workloads: the
// validated step passes (the documents' false alarms; scripts/validation_sweep.py documents runs
// thousands of steps).
TEST(Validation, EveryMethodAndBalancerPassesWithDocuments) {
  const ModelConfig m = matrix_model();
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const PlanCase& c : table_plans({2, 4}, m, 32))
    for (const Balancer b : {Balancer::contiguous, Balancer::zigzag, Balancer::per_document, Balancer::balanced}) {
      const std::int64_t hi = std::uniform_int_distribution<std::int64_t>(2, 32)(rng);
      const std::string docs = "uniform:1:" + std::to_string(hi);
      const std::uint64_t doc_seed = rng();
      SCOPED_TRACE(c.label + ", " + to_string(b) + ", " + docs + ", doc seed " + std::to_string(doc_seed));
      for (const ValidationReport& r :
           validate_on_virtual_ranks(with_documents(setup_of(c.plan, m), docs, b, doc_seed), c.plan.sp))
        EXPECT_TRUE(r.ok()) << describe(r);
    }
}

// ---- sliding windows ----

// The window the matrix's window fault runs under: 5 divides neither the 32-token sequence nor any
// rank's share (16, 8, 4 tokens; allgather's head/tail chunks 8, 4, 2), so bands cross every shard edge.
constexpr std::int64_t kMatrixWindow = 5;

// Whether the step takes sliding-window layers under this plan (the simulator's rule, as
// seqpar-train applies it): ulysses and allgather do; ring, ring-zigzag, hybrid and
// allgather-contiguous are refused.
bool takes_window(const seqpar::Plan& p, const ModelConfig& m) {
  try {
    check_window(m, p);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Every method of the table at SP 2, 4 and 8 under windows of awkward sizes: the methods that take
// a window pass --validate (bf16) with it, and exactly ulysses and allgather take one.
TEST(Validation, EveryMethodThatTakesAWindowPassesWithIt) {
  std::set<seqpar::Method> took;
  for (const std::int64_t w : {std::int64_t{1}, std::int64_t{3}, kMatrixWindow, std::int64_t{31}}) {
    const ModelConfig m = windowed(matrix_model(), w);
    for (const PlanCase& c : table_plans({2, 4, 8}, m, 32)) {
      if (!takes_window(c.plan, m)) continue;
      took.insert(c.plan.method);
      SCOPED_TRACE(c.label + ", window " + std::to_string(w));
      for (const ValidationReport& r : validate_on_virtual_ranks(setup_of(c.plan, m), c.plan.sp))
        EXPECT_TRUE(r.ok()) << describe(r);
    }
  }
  EXPECT_EQ(took, (std::set<seqpar::Method>{seqpar::Method::ulysses, seqpar::Method::allgather}));
}

// A window of the sequence or longer is full causal attention: the same sharded step (every rank's
// loss and gradients), bit for bit. W = 30 is not: query 30 (labelled) loses key 0. (W = 31 would
// change only query 31, the last token, whose output no label reads in any layer: a causal model's
// last position feeds nothing, so its gradients would be the same.)
TEST(Validation, AWindowOfTheSequenceIsCausalBitForBit) {
  const ModelConfig m = matrix_model();
  for (const PlanCase& c : table_plans({4}, m, 32)) {
    if (!takes_window(c.plan, windowed(m, kMatrixWindow))) continue;
    SCOPED_TRACE(c.label);
    const testing::VirtualRun full = testing::run_on_virtual_ranks(setup_of(c.plan, m), c.plan.sp);
    for (const std::int64_t w : {std::int64_t{32}, std::int64_t{1000}, std::int64_t{30}}) {
      const testing::VirtualRun band = testing::run_on_virtual_ranks(setup_of(c.plan, windowed(m, w)), c.plan.sp);
      for (int r = 0; r < c.plan.sp; ++r) {
        const auto i = static_cast<std::size_t>(r);
        ASSERT_EQ(band.errors[i], "") << "rank " << r;
        const bool same = band.steps[i].loss == full.steps[i].loss && band.steps[i].grads == full.steps[i].grads;
        EXPECT_EQ(same, w >= 32) << "window " << w << ", rank " << r;
      }
    }
  }
}

// ---- the mutation matrix ----

// Every planted fault against every plan of the method table at SP 2, 4 and 8: caught (some rank's
// --validate fails) wherever it applies; the correct step passes on every plan, also with packed
// documents. The document faults run on kMatrixDocuments (the chunk order's under the per-document
// balancer, the others under the method's own layout); the window's on sliding-window layers of
// kMatrixWindow tokens, under the methods that take them (n/a where the step refuses the plan). The cell lists the degrees (U x R for
// hybrids).
TEST(ValidationMatrix, EveryFaultIsCaughtByEveryMethodItAppliesTo) {
  const ModelConfig m = matrix_model();
  const std::vector<PlanCase> plans = table_plans({2, 4, 8}, m, 32);
  const auto& methods = seqpar::kAllMethods;
  // cells[fault][method]: "caught" / "n/a" / "PASSED" -> the degrees; margin[fault][method]: the
  // least, over the plans that caught it, of how far past its allowance the worst check went.
  std::map<std::size_t, std::map<seqpar::Method, std::map<std::string, std::vector<std::string>>>> cells;  // by row
  std::map<Fault, std::map<seqpar::Method, double>> margin;
  // Fault::none twice: the correct step, then the correct step with documents.
  std::vector<Fault> rows = {Fault::none, Fault::none};
  rows.insert(rows.end(), kFaults.begin(), kFaults.end());
  for (const PlanCase& c : plans) {
    const std::string degree = c.plan.method == seqpar::Method::hybrid
                                   ? std::to_string(c.plan.ulysses_degree) + "x" + std::to_string(c.plan.ring_degree)
                                   : std::to_string(c.plan.sp);
    // One validator (and baseline) per kind of setup: plain, documents, documents per-document.
    std::map<int, std::pair<std::unique_ptr<StepValidator>, StepValidator::Baseline>> vals;
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const Fault f = rows[row];
      const bool docs = row == 1 || is_document_fault(f);
      const bool window = f == Fault::window_ignored;  // sliding-window layers (kMatrixWindow)
      const int kind = window ? 3 : !docs ? 0 : f == Fault::document_chunk_order_wrong ? 2 : 1;
      TrainSetup clean = setup_of(c.plan, window ? windowed(m, kMatrixWindow) : m);
      if (docs)
        clean = with_documents(clean, kMatrixDocuments,
                               kind == 2 ? std::optional<Balancer>(Balancer::per_document) : std::nullopt);
      TrainSetup s = clean;
      s.fault = f;
      std::string outcome = "n/a";
      // A method that takes no window has no window to ignore: the step refuses the plan.
      if (applies(f, site_of(s)) && (!window || takes_window(c.plan, s.model))) {
        auto& [val, b] = vals[kind];
        if (!val) {
          val = std::make_unique<StepValidator>(make_cpu_backend(Precision::bf16), clean, 1);
          b = val->baseline();
        }
        const std::vector<ValidationReport> reports = validate_on_virtual_ranks(s, c.plan.sp, *val, b);
        const bool failed = caught(reports);
        if (failed) {
          const auto it = margin[f].find(c.plan.method);
          margin[f][c.plan.method] = std::min(it == margin[f].end() ? HUGE_VAL : it->second, worst_used(reports));
        }
        if (f == Fault::none) {
          EXPECT_FALSE(failed) << c.label << (docs ? " with documents" : "") << ": the correct step failed --validate";
          outcome = failed ? "FAILED" : "passes";
        } else {
          EXPECT_TRUE(failed) << c.label << ": " << describe(f) << " passed --validate";
          outcome = failed ? "caught" : "MISSED";
        }
      }
      cells[row][c.plan.method][outcome].push_back(degree);
    }
  }
  const char* path = std::getenv("SEQPAR_VALIDATION_MATRIX");
  if (!path || !*path) return;
  std::ofstream out(path);
  out << "| planted bug |";
  for (const seqpar::Method meth : methods) out << " " << seqpar::to_string(meth) << " |";
  out << "\n|---|";
  for (std::size_t i = 0; i < methods.size(); ++i) out << "---|";
  out << "\n";
  for (std::size_t row = 0; row < rows.size(); ++row) {
    const Fault f = rows[row];
    out << "| "
        << (row == 0   ? std::string("none (a correct step)")
            : row == 1 ? std::string("none, packed documents (") + kMatrixDocuments + ")"
                       : std::string(describe(f)))
        << " |";
    for (const seqpar::Method meth : methods) {
      std::string cell;
      const auto& outcomes = cells[row][meth];
      for (const char* outcome : {"passes", "caught", "FAILED", "MISSED", "n/a"}) {
        const auto it = outcomes.find(outcome);
        if (it == outcomes.end()) continue;
        if (outcomes.size() == 1 && it->first == "n/a") {
          cell = "n/a";
          break;
        }
        std::string degrees;
        for (const std::string& d : it->second) degrees += (degrees.empty() ? "" : ", ") + d;
        if (it->first == "caught") {  // a 2-significant-digit multiple of the allowance (at least)
          std::ostringstream x;
          x << std::setprecision(2) << margin[f][meth];
          degrees += "; >= " + x.str() + "x";
        }
        cell += (cell.empty() ? "" : "; ") + std::string(outcome) + " (" + degrees + ")";
      }
      out << " " << (cell.empty() ? "-" : cell) << " |";
    }
    out << "\n";
  }
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

// ---- bf16 emulation itself ----

TEST(Bf16Emulation, RoundsAttentionWhereTheCudaKernelsDo) {
  AttnShape s;
  s.seq_q = s.seq_k = 5;
  s.heads = s.kv_heads = 1;
  s.head_dim = 4;
  s.causal = true;
  std::vector<float> q(20), k(20), v(20);
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = 0.1f + 0.013f * static_cast<float>(i);
    k[i] = 0.3f - 0.011f * static_cast<float>(i);
    v[i] = 1.0f + 0.0007f * static_cast<float>(i);
  }
  std::vector<float> o32(20), o16(20), lse(5);
  make_cpu_backend(Precision::fp32)->attention_forward(s, q.data(), k.data(), v.data(), o32.data(), lse.data());
  auto be = make_cpu_backend();
  EXPECT_EQ(be->precision(), Precision::fp32);
  be->set_precision(Precision::bf16);
  be->attention_forward(s, q.data(), k.data(), v.data(), o16.data(), lse.data());
  for (std::size_t i = 0; i < o16.size(); ++i) {
    float r = o16[i];
    round_to_bf16(&r, 1);
    EXPECT_EQ(r, o16[i]) << "output " << i << " is not a bf16 value";
    EXPECT_NEAR(o16[i], o32[i], 0.02f * std::abs(o32[i]));
  }
  EXPECT_NE(o16, o32);
  float x = 1.0f + 1.0f / 256.0f;  // halfway between two bf16 values: ties to even (1.0)
  round_to_bf16(&x, 1);
  EXPECT_EQ(x, 1.0f);
  EXPECT_THROW(parse_precision("fp16"), Error);
}

}  // namespace
}  // namespace seqpar::train
