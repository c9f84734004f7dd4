// The validation rule on the CUDA back end (validation.hpp): its arithmetic there (u_acc = 8 x 2^-24,
// tensor-core accumulation), every method of the simulator's method table passing --validate's rule
// on virtual ranks that share the device, on each attention engine (seqpar's kernels and cuDNN), and
// planted faults failing it. Skips, with the reason, without a CUDA build, a device or (for the cuDNN
// engine) cuDNN: on a machine without a GPU none of this runs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/kernels/attention_engine.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"
#include "validation_cases.hpp"

namespace seqpar::train {
namespace {

class CudaValidation : public ::testing::TestWithParam<kernels::AttentionEngine> {
 protected:
  void SetUp() override {
    if (!cuda_backend_built()) GTEST_SKIP() << "this build has no CUDA back end";
    std::string why;
    if (!comm::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    const kernels::EngineAvailability a = kernels::attention_engine_availability();
    if (GetParam() == kernels::AttentionEngine::cudnn && !a.cudnn)
      GTEST_SKIP() << "the cuDNN attention engine is unavailable: " << a.cudnn_why;
  }
  std::unique_ptr<Backend> gpu() const {
    auto be = make_cuda_backend(0, GetParam());
    be->set_precision(Precision::bf16);
    return be;
  }
  // The flash kernels' head dimension (64), 4 query heads over 2 KV heads.
  static ModelConfig model() {
    return {.layers = 2, .hidden = 128, .heads = 4, .kv_heads = 2, .head_dim = 64, .ffn = 256,
        .vocab = 128, .layer_kinds = {}};
  }
  // One step of `s` on virtual ranks on the GPU, each rank checked against one GPU baseline.
  std::vector<ValidationReport> validate(const TrainSetup& s, int world, StepValidator& val,
                                         const StepValidator::Baseline& b) const {
    auto comms = comm::make_virtual_world(world, true);
    std::vector<ValidationReport> reports(static_cast<std::size_t>(world));
    std::vector<std::string> errors(static_cast<std::size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      threads.emplace_back([&, r] {
        try {
          auto be = gpu();
          Trainer t(*be, comms[static_cast<std::size_t>(r)].get(), s);
          const StepResult st = t.compute_gradients();
          ValidationRule rule;
          rule.arithmetic = arithmetic_of(*be);
          reports[static_cast<std::size_t>(r)] = val.check(t, st, b, rule);
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    return reports;
  }
};

TEST_P(CudaValidation, AccumulatesOnTensorCores) {
  const Arithmetic a = arithmetic_of(*gpu());
  EXPECT_EQ(a.accumulation_roundoff, 8 * std::ldexp(1.0, -24));
  EXPECT_EQ(a.rounding_growth, 2.0);
  EXPECT_NE(a.name.find(kernels::to_string(GetParam())), std::string::npos) << a.name;
}

TEST_P(CudaValidation, EveryMethodPassesAndPlantedFaultsFail) {
  const ModelConfig m = model();
  for (const testing::PlanCase& c : testing::table_plans({2, 4}, m, 256)) {
    SCOPED_TRACE(c.label);
    StepValidator val(gpu(), testing::setup_of(c.plan, m), 1);
    const StepValidator::Baseline b = val.baseline();
    for (const ValidationReport& r : validate(testing::setup_of(c.plan, m), c.plan.sp, val, b)) {
      const TensorCheck& w = r.worst();
      EXPECT_TRUE(r.ok()) << w.what << ": sharded error " << w.sharded_error << " > allowed " << w.allowed;
    }
    for (const Fault f : {Fault::kv_wrong_block, Fault::lse_merge_wrong_max, Fault::gqa_wrong_group,
                          Fault::dkv_return_dropped}) {
      const TrainSetup s = testing::setup_of(c.plan, m, f);
      if (!applies(f, testing::site_of(s))) continue;
      bool caught = false;
      for (const ValidationReport& r : validate(s, c.plan.sp, val, b)) caught |= !r.ok();
      EXPECT_TRUE(caught) << describe(f) << " passed --validate";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, CudaValidation,
                         ::testing::Values(kernels::AttentionEngine::seqpar, kernels::AttentionEngine::cudnn),
                         [](const ::testing::TestParamInfo<kernels::AttentionEngine>& i) {
                           return std::string(kernels::to_string(i.param));
                         });

}  // namespace
}  // namespace seqpar::train
