// A result with a non-finite or negative number is never valid: preset figures are bounded when
// loaded (naming the file and field), and simulate() and to_json() check what they produce.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

json document(const char* kind, const char* name) { return preset_document(kind, name); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_rejected(const char* kind, const char* name, const json::json_pointer& field, const json& value) {
  json doc = document(kind, name);
  doc[field] = value;
  const std::string key = field.back() == "value" ? field.parent_pointer().back() : field.back();
  const std::string e = error_of([&] {
    if (std::string(kind) == "gpu") gpu_from_json(doc, "my.json");
    else if (std::string(kind) == "system") system_from_json(doc, "my.json");
    else model_from_json(doc, "my.json");
  });
  EXPECT_EQ(e.rfind("my.json", 0), 0u) << field.to_string() << " = " << value.dump() << ": " << e;
  EXPECT_NE(e.find("'" + key + "'"), std::string::npos) << field.to_string() << " = " << value.dump() << ": " << e;
}

TEST(NonFinite, PresetFiguresOutsidePhysicalBoundsAreRejectedNamingTheField) {
  // Each of these loaded before and gave a "valid" plan with infinite or absurd numbers.
  expect_rejected("gpu", "h100-sxm", "/bf16_tflops/value"_json_pointer, 1e-320);
  expect_rejected("gpu", "h100-sxm", "/memory_gib/value"_json_pointer, 1e308);
  expect_rejected("gpu", "h100-sxm", "/hbm_gbps/value"_json_pointer, 4.9e-324);
  expect_rejected("gpu", "h100-sxm", "/gemm_efficiency/value"_json_pointer, 1e-300);
  expect_rejected("gpu", "h100-sxm", "/kernel_overhead_us/value"_json_pointer, 1e308);
  expect_rejected("gpu", "h100-sxm", "/reserved_gib/value"_json_pointer, -1);
  expect_rejected("gpu", "h100-sxm", "/bf16_tflops/value"_json_pointer, std::numeric_limits<double>::infinity());
  expect_rejected("system", "dgx-h100", "/intra_node/bandwidth_gbps/value"_json_pointer, 1e-320);
  expect_rejected("system", "dgx-h100", "/inter_node/latency_us/value"_json_pointer, 1e300);
  expect_rejected("system", "dgx-h100", "/host_adam_gparams_per_s/value"_json_pointer, 1e-320);
  expect_rejected("system", "dgx-h100", "/gpus_per_node/value"_json_pointer, 1e308);  // was UB: double -> int
  expect_rejected("model", "llama3-8b", "/layers/value"_json_pointer, 1e308);
  expect_rejected("model", "llama3-8b", "/vocab/value"_json_pointer, 4294967297.0);
  expect_rejected("model", "llama3-8b", "/hidden/value"_json_pointer, 2.5);
}

TEST(NonFinite, BuiltInPresetsAreWithinTheBounds) {
  for (const auto& p : builtin_presets()) {
    if (p.kind == "gpu") {
      EXPECT_NO_THROW(load_gpu(p.name)) << p.name;
    } else if (p.kind == "system") {
      EXPECT_NO_THROW(load_system(p.name)) << p.name;
    } else if (p.kind == "framework") {
      EXPECT_NO_THROW(load_framework(p.name)) << p.name;
    } else {
      EXPECT_NO_THROW(load_model(p.name)) << p.name;
    }
  }
}

// Hardware built in code skips the loaders' bounds: simulate() must still refuse to call the
// result valid.
TEST(NonFinite, SimulateMarksInfiniteTimesInvalidNamingTheQuantity) {
  System s = testing::round_system();
  s.gpu.bf16_flops = 1e-320;
  const Model m = testing::tiny_model();
  const Plan p = testing::plan(Method::ulysses, 2, 64, 2, 2, 1);
  const Result r = simulate(m, s, p);
  EXPECT_FALSE(r.valid);
  EXPECT_FALSE(r.fits);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors.front().find("not a finite non-negative number"), std::string::npos) << r.errors.front();
  const json j = to_json(m, s, r);
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_TRUE(j["step_time_s"].is_null());
  EXPECT_EQ(first_bad_number(j), "");

  System fine = testing::round_system();
  EXPECT_TRUE(simulate(m, fine, p).valid) << "the fixture itself must simulate";
}

TEST(NonFinite, SimulateMarksHugeMemoryInvalid) {
  System s = testing::round_system();
  s.gpu.reserved_bytes = std::numeric_limits<double>::infinity();
  const Result r = simulate(testing::tiny_model(), s, testing::plan(Method::ring, 2, 64, 2, 1, 2));
  EXPECT_FALSE(r.valid);
  std::string all;
  for (const auto& e : r.errors) all += e + "\n";
  EXPECT_NE(all.find("memory.reserved_bytes: the model gives inf"), std::string::npos) << all;
}

TEST(NonFinite, ResultJsonNeverCallsANonFiniteResultValid) {
  const Model m = testing::tiny_model();
  const System s = testing::round_system();
  Result r = simulate(m, s, testing::plan(Method::ulysses, 2, 64, 2, 2, 1));
  ASSERT_TRUE(r.valid);
  r.time.comm = std::nan("");  // as if a cost model had produced it unchecked
  const json j = to_json(m, s, r);
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_TRUE(j["time"].is_null());
  ASSERT_FALSE(j["errors"].empty());
  EXPECT_NE(j["errors"].back().get<std::string>().find("time.comm_s"), std::string::npos) << j["errors"];
  EXPECT_EQ(dump_json(j).find("NaN"), std::string::npos);
}

}  // namespace
}  // namespace seqpar::sim
