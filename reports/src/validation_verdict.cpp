#include "seqpar/reports/validation_verdict.hpp"

#include <fmt/format.h>

#include <cmath>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/json_input.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

// An error that must be present: a number, or null where seqpar-train wrote a NaN or infinity
// (nlohmann/json writes non-finite numbers as null), which a failed check can hold.
json error_or_null(const json& obj, const char* key, std::string_view where) {
  require(obj, key, where);
  auto v = optional_number(obj, key, where);
  if (v && !(*v >= 0)) throw Error(fmt::format("{}: field '{}' must be a non-negative error, got {}", where, key, *v));
  return v ? json(*v) : json();
}

// Which of the derived rule's parts the run replaced (README: a run that passes only with them is
// not validated), as the flags that replaced them.
std::string overrides_of(const json& v, std::string_view where) {
  std::string out;
  for (auto [key, flag] : {std::pair{"error_factor", "--error-factor"}, std::pair{"error_atol", "--error-atol"}})
    if (auto x = optional_number(v, key, where)) out += fmt::format("{}{} {:g}", out.empty() ? "" : " ", flag, *x);
  return out;
}

}  // namespace

std::string allowance_used_text(const json& closest) {
  const json& used = closest["used"];
  return used.is_number() ? fmt::format("{:.0f}%", used.get<double>() * 100) : "not finite";
}

bool is_validation_result(const json& result) { return result.is_object() && result.contains("validation"); }

json read_validation_verdict(const json& result, std::string_view where) {
  const std::string w = fmt::format("{}: validation", where);
  const json& v = require(result, "validation", where);
  if (!v.is_object()) throw Error(fmt::format("{}: field 'validation' must be an object", where));
  const json& passed = require(v, "passed", w);
  if (!passed.is_boolean()) throw Error(fmt::format("{}: field 'passed' must be true or false", w));
  const double failures = require_number(v, "failures", w);
  if (!std::isfinite(failures) || failures < 0 || failures != std::floor(failures))
    throw Error(fmt::format("{}: field 'failures' must be a count of failed checks, got {}", w, failures));
  if (passed.get<bool>() != (failures == 0))
    throw Error(fmt::format("{}: field 'passed' is {} but 'failures' counts {} failed checks; the verdict contradicts "
                            "itself", w, passed.get<bool>(), failures));
  const json& steps = require_array(v, "steps", w);
  if (steps.empty()) throw Error(fmt::format("{}: field 'steps' is empty: no step was validated", w));

  const std::string cw = fmt::format("{}: closest_to_bound", w);
  const json& closest = require(v, "closest_to_bound", w);
  if (!closest.is_object()) throw Error(fmt::format("{}: field 'closest_to_bound' must be an object", w));
  const json& check = require(closest, "check", cw);
  if (!check.is_object()) throw Error(fmt::format("{}: field 'check' must be an object", cw));
  const std::string kw = fmt::format("{}: check", cw);
  json c = {{"name", require_string(check, "name", kw)},
            {"sharded_error", error_or_null(check, "sharded_error", kw)},
            {"allowed_error", error_or_null(check, "allowed_error", kw)}};
  auto step = optional_number(closest, "step", cw);
  c["step"] = step ? json(*step) : json();
  c["explanation"] = optional_string(closest, "explanation", cw).value_or("");
  // The fraction of its allowance the check used; null when either error is not finite (or the
  // allowance is 0 and the error is not): past any bound.
  c["used"] = nullptr;
  if (c["sharded_error"].is_number() && c["allowed_error"].is_number()) {
    const double e = c["sharded_error"].get<double>(), allowed = c["allowed_error"].get<double>();
    if (allowed > 0) c["used"] = e / allowed;
    else if (e == 0) c["used"] = 0.0;
  }

  return {{"passed", passed.get<bool>()}, {"failures", failures}, {"steps", steps.size()},
          {"arithmetic", require_string(v, "arithmetic", w)},
          {"precision", optional_string(v, "precision", w).value_or("")},
          {"reference", optional_string(v, "reference", w).value_or("")},
          {"rule", require_string(v, "rule", w)}, {"overrides", overrides_of(v, w)}, {"closest", c}};
}

}  // namespace seqpar::reports
