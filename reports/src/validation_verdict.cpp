#include "seqpar/reports/validation_verdict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
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

namespace {
std::string used_text(double used) { return std::isfinite(used) ? fmt::format("{:.0f}%", used * 100) : "not finite"; }
}  // namespace

std::string allowance_used_text(const json& closest) {
  const json& used = closest["used"];
  return used.is_number() ? fmt::format("{:.0f}%", used.get<double>() * 100) : "not finite";
}

bool is_validation_result(const json& result) { return result.is_object() && result.contains("validation"); }

namespace {

// e / d for two errors (null where not finite): infinite where either is not finite or only d is 0.
double error_quotient(const json& e, const json& d) {
  if (!(e.is_number() && d.is_number())) return HUGE_VAL;
  return d.get<double>() > 0 ? e.get<double>() / d.get<double>() : e.get<double>() == 0 ? 0.0 : HUGE_VAL;
}

// One tensor check of a step, as its numbers say: its errors, and whether the sharded error is within
// the allowance (recomputed here; the document's own "passed" must agree).
struct Check {
  json row;       // {"name", "sharded_error", "allowed_error"} (errors null where not finite)
  double used;    // sharded / allowed; infinite where either is not finite (past any bound)
  bool ok;
};

Check read_check(const json& t, std::string_view where) {
  if (!t.is_object()) throw Error(fmt::format("{}: expected an object", where));
  Check c;
  c.row = {{"name", require_string(t, "name", where)},
           {"sharded_error", error_or_null(t, "sharded_error", where)},
           {"allowed_error", error_or_null(t, "allowed_error", where)}};
  const json &e = c.row["sharded_error"], &a = c.row["allowed_error"];
  c.ok = e.is_number() && a.is_number() && e.get<double>() <= a.get<double>();
  c.used = error_quotient(e, a);
  // The allowance from its parts, where the document gives them: factor x b + floor.
  auto factor = optional_number(t, "factor", where), b = optional_number(t, "unsharded_error_per_term", where),
       floor = optional_number(t, "floor", where);
  if (factor && b && floor && a.is_number()) {
    const double derived = *factor * *b + *floor;
    if (std::fabs(derived - a.get<double>()) > 1e-6 * std::max(derived, a.get<double>()))
      throw Error(fmt::format("{}: field 'allowed_error' is {:g} but factor x unsharded_error_per_term + floor is "
                              "{:g}: the allowance contradicts its parts",
                              where, a.get<double>(), derived));
  }
  if (t.contains("passed")) {
    const json& p = t["passed"];
    if (!p.is_boolean()) throw Error(fmt::format("{}: field 'passed' must be true or false", where));
    if (p.get<bool>() != c.ok)
      throw Error(fmt::format("{}: field 'passed' is {} but sharded_error {} is {} allowed_error {}: the check "
                              "contradicts its numbers",
                              where, p.get<bool>(), dump_json(e, -1), c.ok ? "within" : "not within",
                              dump_json(a, -1)));
  }
  // The ratio to the baseline, where the document gives it: sharded / unsharded error per term
  // (train/validation.hpp), written null where it is not finite (a baseline of 0, an error not
  // finite); an older document, without the per-term error, divided by the unsharded error.
  const char* base = t.contains("unsharded_error_per_term") ? "unsharded_error_per_term" : "unsharded_error";
  if (t.contains("ratio") && t.contains(base)) {
    const std::optional<double> r = optional_number(t, "ratio", where);
    const double derived = error_quotient(e, error_or_null(t, base, where));
    const bool finite = std::isfinite(derived);
    if (r ? !finite || !figures_agree(*r, derived, 1e-6) : finite)
      throw Error(fmt::format("{}: field 'ratio' is {} but sharded_error / {} is {}: the ratio contradicts its parts",
                              where, r ? fmt::format("{:g}", *r) : "null", base,
                              finite ? fmt::format("{:g}", derived) : "not finite"));
  }
  return c;
}

}  // namespace

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

  // Every check recomputed from its numbers: the step counts, the verdict and the closest check
  // follow from them (the first rank's checks; 'failures' counts every rank's, so it is at least theirs).
  double recounted = 0;
  std::optional<Check> worst;
  json worst_step;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string sw = fmt::format("{}: steps[{}]", w, i);
    const json& st = steps[i];
    if (!st.is_object()) throw Error(fmt::format("{}: expected an object", sw));
    const json& tensors = require_array(st, "tensors", sw);
    if (tensors.empty()) throw Error(fmt::format("{}: field 'tensors' is empty: nothing was compared", sw));
    double step_failures = 0;
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      Check c = read_check(tensors[k], fmt::format("{}: tensors[{}]", sw, k));
      step_failures += c.ok ? 0 : 1;
      if (!worst || c.used > worst->used) {
        worst = c;
        auto n = optional_number(st, "step", sw);
        worst_step = n ? json(*n) : json(static_cast<double>(i + 1));
      }
    }
    if (auto f = optional_number(st, "failures", sw); f && *f != step_failures)
      throw Error(fmt::format("{}: field 'failures' is {:g} but {:g} of its checks are not within their allowance", sw,
                              *f, step_failures));
    recounted += step_failures;
  }
  if ((recounted == 0) != (failures == 0) || recounted > failures)
    throw Error(fmt::format("{}: field 'failures' is {:g} but the steps' checks have {:g} outside their allowance: the "
                            "verdict contradicts its numbers",
                            w, failures, recounted));

  // The check closest to its bound: the document's, which must be the closest of the steps' (its
  // fraction used equal to theirs), or derived from the steps where an older document has none.
  json c = worst->row;
  c["step"] = worst_step;
  c["used"] = std::isfinite(worst->used) ? json(worst->used) : json();
  c["explanation"] = "derived from the steps' checks (the document does not record closest_to_bound)";
  if (auto it = v.find("closest_to_bound"); it != v.end()) {
    const std::string cw = fmt::format("{}: closest_to_bound", w);
    if (!it->is_object()) throw Error(fmt::format("{}: field 'closest_to_bound' must be an object", w));
    const json& check = require(*it, "check", cw);
    const Check named = read_check(check, fmt::format("{}: check", cw));
    const bool same = named.used == worst->used ||
                      (std::isfinite(named.used) && std::fabs(named.used - worst->used) <= 1e-9 * worst->used);
    if (!same)
      throw Error(fmt::format("{}: names '{}' ({} of its allowance) but '{}' in step {} is closer to its bound ({}): "
                              "the document contradicts its steps",
                              cw, named.row["name"].get<std::string>(), used_text(named.used),
                              worst->row["name"].get<std::string>(), fmt::format("{:g}", worst_step.get<double>()),
                              used_text(worst->used)));
    c = named.row;
    auto step = optional_number(*it, "step", cw);
    c["step"] = step ? json(*step) : json();
    c["used"] = std::isfinite(named.used) ? json(named.used) : json();
    c["explanation"] = optional_string(*it, "explanation", cw).value_or("");
  }

  return {{"passed", passed.get<bool>()}, {"failures", failures}, {"steps", steps.size()},
          {"arithmetic", optional_string(v, "arithmetic", w).value_or("not recorded (an older document)")},
          {"precision", optional_string(v, "precision", w).value_or("")},
          {"reference", optional_string(v, "reference", w).value_or("")},
          {"rule", require_string(v, "rule", w)}, {"overrides", overrides_of(v, w)}, {"closest", c}};
}

}  // namespace seqpar::reports
