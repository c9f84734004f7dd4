// `seqpar report` on seqpar-train --validate documents (reports/validation_verdict): one verdict row
// per run beside the timing documents, which they leave as they were (no point, benchmark row, step
// or figure of their own); a FAIL opens the section; the gate refuses them as timings; a malformed
// verdict, or a result that is neither timed nor validated, is refused naming the file and field.
#include <gtest/gtest.h>

#include <filesystem>

#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/report_data.hpp"
#include "seqpar/reports/samples.hpp"

using nlohmann::json;
using seqpar::reports::InputDocument;

namespace {

std::string source_path(const std::string& rel) { return std::string(SEQPAR_SOURCE_DIR) + "/" + rel; }

InputDocument source_doc(const std::string& rel) { return {rel, seqpar::reports::load_json_file(source_path(rel))}; }

// One of the H200 --validate documents measure.sh check wrote (reports/results/h200/check/NOTES.md).
const char* const kH200Ring = "reports/results/h200/check/validate_ring_sp_4.json";

json check_json(const std::string& name, double sharded, double allowed) {
  // The allowance is its parts, factor x b + floor, as seqpar-train writes it (the reader checks).
  const double b = sharded / 2, floor = 2.6e-4;
  return {{"name", name}, {"terms", 4096}, {"sharded_error", sharded}, {"unsharded_error", b},
          {"unsharded_error_per_term", b}, {"ratio", 2.0}, {"factor", (allowed - floor) / b}, {"floor", floor},
          {"allowed_error", allowed}, {"passed", sharded <= allowed}};
}

// A --validate document shaped as seqpar-train writes it (bench/train/train_main.cpp), small: the
// plan at the top level, one result with the verdict and no time.
json verdict_doc(json plan, int failures, const json& worst, int steps = 2) {
  json tensors = json::array({check_json("loss", 1e-6, 7.6e-4), worst});
  json step_list = json::array();
  for (int s = 1; s <= steps; ++s)
    step_list.push_back({{"step", s}, {"failures", worst["passed"].get<bool>() ? 0 : 1}, {"tensors", tensors}});
  json validation = {
      {"passed", failures == 0}, {"failures", static_cast<double>(failures)},
      {"rule", "sharded_error <= factor * unsharded_error_per_term + floor, per tensor"},
      {"arithmetic", "cpu back end, bf16"}, {"precision", "bf16"}, {"reference", "cpu back end, fp32, sp = 1"},
      {"error_factor", nullptr}, {"error_atol", nullptr},
      {"closest_to_bound", {{"step", steps}, {"check", worst}, {"explanation", worst["name"].get<std::string>() + ": in words"}}},
      {"steps", step_list}};
  plan.update({{"gpus", plan["sp"]}, {"seq_len", 128}, {"checkpoint", "none"}});
  return {{"kind", "measurement"}, {"program", "seqpar-train"}, {"mode", "virtual-ranks"}, {"device", "cpu"},
          {"command", "seqpar-train --validate"}, {"plan", plan},
          {"config", {{"backend", "cpu"}, {"validate", true}, {"model", {{"name", "tiny"}, {"layers", 2}}}}},
          {"results", json::array({{{"name", "train_step/tiny"}, {"losses", {5.5, 5.2}}, {"validation", validation}}})}};
}

InputDocument passing() {
  return {"pass.json", verdict_doc({{"method", "ulysses"}, {"sp", 4}, {"ulysses_degree", 4}, {"ring_degree", 1}}, 0,
                                   check_json("grad layers.0.wq", 0.006, 0.012))};
}

InputDocument failing() {
  return {"fail.json", verdict_doc({{"method", "hybrid"}, {"sp", 4}, {"ulysses_degree", 2}, {"ring_degree", 2}}, 3,
                                   check_json("grad layers.1.wv", 0.05, 0.0167))};
}

std::string gather_message(const std::vector<InputDocument>& in) {
  try {
    seqpar::reports::gather_report_data(in);
  } catch (const seqpar::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// The timing documents of test_report's fixtures, and a measured training step where the simulator is built.
std::vector<InputDocument> timing_docs() {
  std::vector<InputDocument> in{source_doc("tests/reports/fixtures/sweep.json"),
                                source_doc("tests/reports/fixtures/train.json"),
                                source_doc("tests/reports/fixtures/attention.json")};
#ifdef SEQPAR_TEST_WITH_SIM
  in.push_back(source_doc("tests/reports/fixtures/h100-2026-11/train_sp1.json"));
#endif
  return in;
}

}  // namespace

TEST(ReportValidation, VerdictsBesideTimingsChangeNoTiming) {
  using namespace seqpar::reports;
  const std::vector<InputDocument> timings = timing_docs();
  std::vector<InputDocument> all = timings;
  for (const auto& d : {source_doc(kH200Ring), passing(), failing()}) all.push_back(d);
  const json base = gather_report_data(timings);
  const json d = gather_report_data(all);

  // The verdicts: one row per document, in input order, labelled as the report labels plans.
  const json& v = d["validations"];
  ASSERT_EQ(v.size(), 3u);
  const json h200 = load_json_file(source_path(kH200Ring));
  const json& h200_val = h200["results"][0]["validation"];
  EXPECT_EQ(v[0]["plan_label"], plan_label(h200["plan"]));
  EXPECT_EQ(v[0]["plan_label"], "ring sp=4");
  EXPECT_EQ(v[1]["plan_label"], "ulysses sp=4");
  EXPECT_EQ(v[2]["plan_label"], "hybrid U2xR2");
  EXPECT_EQ(v[0]["passed"], h200_val["passed"]);
  EXPECT_EQ(v[0]["arithmetic"], h200_val["arithmetic"]);
  EXPECT_EQ(v[0]["steps"], h200_val["steps"].size());
  EXPECT_EQ(v[0]["backend"], "cuda");
  EXPECT_EQ(v[0]["model"], "custom");
  const json& h200_check = h200_val["closest_to_bound"]["check"];
  EXPECT_EQ(v[0]["closest"]["name"], h200_check["name"]);
  EXPECT_DOUBLE_EQ(v[0]["closest"]["used"].get<double>(),
                   h200_check["sharded_error"].get<double>() / h200_check["allowed_error"].get<double>());
  EXPECT_TRUE(v[1]["passed"].get<bool>());
  EXPECT_FALSE(v[2]["passed"].get<bool>());
  EXPECT_EQ(v[2]["failures"], 3.0);
  EXPECT_EQ(v[2]["steps"], 2);
  EXPECT_DOUBLE_EQ(v[2]["closest"]["used"].get<double>(), 0.05 / 0.0167);
  EXPECT_EQ(v[2]["overrides"], "");
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i]["source"], d["sources"][timings.size() + i]["id"]);

  // Nothing of theirs in a timing table, figure or comparison: the timings' data as without them.
  for (const char* key : {"points", "best", "comparisons", "benchmarks", "peer_comparisons", "step_comparisons",
                          "method_comparison"})
    EXPECT_EQ(d[key], base[key]) << key;
  EXPECT_EQ(plan_figures(d), plan_figures(base));
  EXPECT_TRUE(base["validations"].empty());

  // The report: the section second (after the answer), the FAIL in its first line and the failing
  // run's worst check in words; every run a row; the count in the inputs line.
  const std::string md = render_markdown(build_document(d, plan_figures(d), {}, "t"));
  const auto section = md.find("## Validation verdicts (seqpar-train --validate)\n");
  ASSERT_NE(section, std::string::npos) << md;
  EXPECT_EQ(section, md.find("\n## ", md.find("## Answer")) + 1);  // right after the answer
  const std::string body = md.substr(section, md.find("\n## ", section + 1) - section);
  EXPECT_EQ(body.find("\n\nFAIL: 1 of 3 validated runs failed."), body.find("\n\n")) << body;
  EXPECT_NE(body.find("- hybrid U2xR2 at 128 [S"), std::string::npos) << body;
  EXPECT_NE(body.find("3 failed checks; worst: grad layers.1.wv: in words"), std::string::npos) << body;
  EXPECT_NE(body.find("| ring sp=4 | 2K | custom | cuda back end, cudnn attention, bf16 | PASS | 0 | 2 |"),
            std::string::npos) << body;
  EXPECT_NE(body.find("| hybrid U2xR2 | 128 | tiny | cpu back end, bf16 | FAIL | 3 | 2 | grad layers.1.wv (2) | 0.05 | "
                      "0.0167 | 299% |"), std::string::npos) << body;
  EXPECT_NE(body.find("| ulysses sp=4 | 128 | tiny | cpu back end, bf16 | PASS | 0 | 2 | grad layers.0.wq (2) | 0.006 | "
                      "0.012 | 50% |"), std::string::npos) << body;
  EXPECT_NE(body.find("Rule: " + h200_val["rule"].get<std::string>()), std::string::npos) << body;
  EXPECT_NE(md.find("3 validation verdicts (1 FAIL)"), std::string::npos);
}

TEST(ReportValidation, AllPassingSaysSoAndAnOverriddenRuleIsMarked) {
  using namespace seqpar::reports;
  InputDocument over = passing();
  over.doc["results"][0]["validation"]["error_factor"] = 3.0;
  const json d = gather_report_data({passing(), over});
  EXPECT_EQ(d["validations"][1]["overrides"], "--error-factor 3");
  const std::string md = render_markdown(build_document(d, plan_figures(d), {}, "t"));
  EXPECT_NE(md.find("\n\nPASS: all 2 validated runs passed.\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| PASS (rule overridden: --error-factor 3) |"), std::string::npos) << md;
  EXPECT_NE(md.find("is not validated"), std::string::npos);
  EXPECT_EQ(md.find("validated runs failed"), std::string::npos);
  EXPECT_EQ(md.find("| FAIL"), std::string::npos);
  // Without a --validate input the section says so in one line.
  const json none = gather_report_data({source_doc("tests/reports/fixtures/train.json")});
  EXPECT_NE(render_markdown(build_document(none, plan_figures(none), {}, "t"))
                .find("No seqpar-train --validate document in the inputs: no verdict."),
            std::string::npos);
}

// A failed check whose error was not finite: seqpar-train writes NaN as null.
TEST(ReportValidation, NonFiniteErrorIsShownAsSuch) {
  using namespace seqpar::reports;
  InputDocument nan = failing();
  nan.doc["results"][0]["validation"]["closest_to_bound"]["check"]["sharded_error"] = nullptr;
  nan.doc["results"][0]["validation"]["closest_to_bound"]["check"]["ratio"] = nullptr;
  for (auto& step : nan.doc["results"][0]["validation"]["steps"]) {
    step["tensors"][1]["sharded_error"] = nullptr;
    step["tensors"][1]["ratio"] = nullptr;  // NaN / b, written as null
  }
  const json d = gather_report_data({nan});
  EXPECT_TRUE(d["validations"][0]["closest"]["used"].is_null());
  const std::string md = render_markdown(build_document(d, plan_figures(d), {}, "t"));
  EXPECT_NE(md.find("| grad layers.1.wv (2) | not finite | 0.0167 | not finite |"), std::string::npos) << md;
}

TEST(ReportValidation, MalformedVerdictIsRefusedNamingTheField) {
  struct Case {
    const char* what;
    void (*edit)(json& doc);
    const char* message;
  };
  const Case cases[] = {
      {"validation not an object", [](json& d) { d["results"][0]["validation"] = 1; },
       "fail.json: results[0]: field 'validation' must be an object"},
      {"no passed", [](json& d) { d["results"][0]["validation"].erase("passed"); },
       "fail.json: results[0]: validation: missing field 'passed'"},
      {"passed a string", [](json& d) { d["results"][0]["validation"]["passed"] = "no"; },
       "fail.json: results[0]: validation: field 'passed' must be true or false"},
      {"failures negative", [](json& d) { d["results"][0]["validation"]["failures"] = -1; },
       "fail.json: results[0]: validation: field 'failures' must be a count of failed checks"},
      {"passed with failures", [](json& d) { d["results"][0]["validation"]["passed"] = true; },
       "fail.json: results[0]: validation: field 'passed' is true but 'failures' counts 3 failed checks"},
      {"no steps", [](json& d) { d["results"][0]["validation"]["steps"] = json::array(); },
       "fail.json: results[0]: validation: field 'steps' is empty"},
      {"no rule", [](json& d) { d["results"][0]["validation"].erase("rule"); },
       "fail.json: results[0]: validation: missing field 'rule'"},
      {"closest not the closest", [](json& d) {
         d["results"][0]["validation"]["closest_to_bound"]["check"] = d["results"][0]["validation"]["steps"][0]["tensors"][0];
       },
       "fail.json: results[0]: validation: closest_to_bound: names 'loss' (0% of its allowance) but 'grad layers.1.wv' "
       "in step 1 is closer to its bound (299%)"},
      {"a failed check marked passed", [](json& d) {
         d["results"][0]["validation"]["steps"][1]["tensors"][1]["passed"] = true;
       },
       "fail.json: results[0]: validation: steps[1]: tensors[1]: field 'passed' is true but sharded_error 0.05 is not "
       "within allowed_error 0.0167"},
      {"a step's count contradicts its checks", [](json& d) { d["results"][0]["validation"]["steps"][0]["failures"] = 0; },
       "fail.json: results[0]: validation: steps[0]: field 'failures' is 0 but 1 of its checks"},
      {"fewer failures than the steps show", [](json& d) { d["results"][0]["validation"]["failures"] = 1; },
       "fail.json: results[0]: validation: field 'failures' is 1 but the steps' checks have 2 outside their allowance"},
      {"a negative error", [](json& d) { d["results"][0]["validation"]["steps"][0]["tensors"][0]["sharded_error"] = -1; },
       "fail.json: results[0]: validation: steps[0]: tensors[0]: field 'sharded_error' must be a non-negative error"},
      {"an allowance that is not its parts", [](json& d) { d["results"][0]["validation"]["steps"][0]["tensors"][0]["floor"] = 1; },
       "field 'allowed_error' is 0.00076 but factor x unsharded_error_per_term + floor is"},
      // The ratio is sharded / unsharded_error_per_term: 0.05 / 0.025 = 2 (check_json); 3 contradicts it,
      // and a number where the baseline is 0 (the ratio infinite, written null) does too.
      {"a ratio that is not its parts", [](json& d) { d["results"][0]["validation"]["steps"][1]["tensors"][1]["ratio"] = 3; },
       "fail.json: results[0]: validation: steps[1]: tensors[1]: field 'ratio' is 3 but sharded_error / "
       "unsharded_error_per_term is 2: the ratio contradicts its parts"},
      {"a ratio in the closest check", [](json& d) { d["results"][0]["validation"]["closest_to_bound"]["check"]["ratio"] = 0.5; },
       "closest_to_bound: check: field 'ratio' is 0.5 but sharded_error / unsharded_error_per_term is 2"},
      {"a finite ratio over a zero baseline", [](json& d) {
         json& t = d["results"][0]["validation"]["steps"][0]["tensors"][0];
         t["unsharded_error_per_term"] = 0.0;
         t["factor"] = 0.0;
         t["allowed_error"] = t["floor"];
       },
       "steps[0]: tensors[0]: field 'ratio' is 2 but sharded_error / unsharded_error_per_term is not finite"},
      {"a ratio not a number", [](json& d) { d["results"][0]["validation"]["steps"][0]["tensors"][0]["ratio"] = "2"; },
       "steps[0]: tensors[0]: field 'ratio' must be a number or null, got \"2\""},
      {"allowed a string", [](json& d) { d["results"][0]["validation"]["closest_to_bound"]["check"]["allowed_error"] = "x"; },
       "fail.json: results[0]: validation: closest_to_bound: check: field 'allowed_error' must be a number or null"},
      {"no sharded error", [](json& d) { d["results"][0]["validation"]["closest_to_bound"]["check"].erase("sharded_error"); },
       "fail.json: results[0]: validation: closest_to_bound: check: missing field 'sharded_error'"},
      {"no plan", [](json& d) { d.erase("plan"); }, "fail.json: missing field 'plan'"},
      {"plan without sp", [](json& d) { d["plan"].erase("sp"); }, "fail.json: plan: missing field 'sp'"},
  };
  for (const auto& c : cases) {
    InputDocument bad = failing();
    c.edit(bad.doc);
    const std::string msg = gather_message({source_doc("tests/reports/fixtures/train.json"), bad});
    EXPECT_NE(msg.find(c.message), std::string::npos) << c.what << ": " << msg;
  }
}

// A measurement result with neither a time nor a verdict is still refused, naming 'time_s'.
TEST(ReportValidation, NeitherTimedNorValidatedIsRefused) {
  InputDocument bad = source_doc(kH200Ring);
  bad.doc["results"][0].erase("validation");
  const std::string msg = gather_message({bad});
  EXPECT_NE(msg.find(std::string(kH200Ring) + ": results[0]: missing field 'time_s'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'validation'"), std::string::npos) << msg;
}

// The gate compares timings: a verdict is refused with the reason, not as a result missing its time.
TEST(ReportValidation, GateRefusesAVerdictAsATiming) {
  try {
    seqpar::reports::read_samples(source_doc(kH200Ring).doc, "v.json");
    FAIL() << "no error";
  } catch (const seqpar::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("v.json: results[0] ('train_step/custom/L2/ring/sp4/seq2048'): a seqpar-train --validate result"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("records a verdict, not a time"), std::string::npos) << msg;
  }
}

// Every JSON the project has committed under reports/results/ is read by the report, each on its
// own (issue 35, case 12): results of every schema it has written (the older --validate documents
// without closest_to_bound among them), and the inputs and script verdicts kept beside them named
// as what they are. One that is neither would be refused, and fail here.
TEST(ReportValidation, EveryCommittedResultFileIsRead) {
  namespace fs = std::filesystem;
  int files = 0, skipped = 0;
  for (const auto& e : fs::recursive_directory_iterator(source_path("reports/results"))) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    ++files;
    const std::string rel = fs::relative(e.path(), source_path("")).string();
    try {
      const json d = seqpar::reports::gather_report_data({source_doc(rel)});
      skipped += static_cast<int>(d["skipped"].size());
    } catch (const seqpar::Error& err) {
      ADD_FAILURE() << rel << ": " << err.what();
    }
  }
  EXPECT_GE(files, 60);
  EXPECT_GE(skipped, 7);  // two model presets, a calibrated system, two maxlen answers, two script verdicts
  // The H100 --validate documents of the older schema are read, their closest check derived.
  const json old = seqpar::reports::gather_report_data({source_doc("reports/results/h100/check/validate_ring_sp_4.json")});
  ASSERT_EQ(old["validations"].size(), 1u);
  EXPECT_EQ(old["validations"][0]["arithmetic"], "not recorded (an older document)");
  EXPECT_NE(old["validations"][0]["closest"]["explanation"].get<std::string>().find("derived from the steps"),
            std::string::npos);
  // Its ratios, without a per-term error, are sharded / unsharded error (grad embed's at step 1:
  // 0.0029749 / 0.0029845 = 0.99677): one that is not is refused by that field's name.
  InputDocument bad = source_doc("reports/results/h100/check/validate_ring_sp_4.json");
  json& embed = bad.doc["results"][0]["validation"]["steps"][0]["tensors"][1];
  ASSERT_EQ(embed["name"], "grad embed");
  ASSERT_FALSE(embed.contains("unsharded_error_per_term"));
  embed["ratio"] = 5;
  EXPECT_NE(gather_message({bad}).find("steps[0]: tensors[1]: field 'ratio' is 5 but sharded_error / unsharded_error "
                                       "is 0.996774"),
            std::string::npos)
      << gather_message({bad});
}
