// The verdict of a `seqpar-train --validate` run as the report reads it: results[i].validation
// (bench/train/train_main.cpp writes it; README "Validation" states the rule). Such a result
// records whether the sharded step matched the unsharded one within the rule, and no time: the
// run also computed the unsharded and reference steps, so it is never read as a timing.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace seqpar::reports {

// A result row that carries "validation" (whatever its value: a malformed one is refused by
// read_validation_verdict, not taken for a timing that lacks its time).
bool is_validation_result(const nlohmann::json& result);

// The verdict fields of one result's "validation", checked; `where` names the result
// ("a.json: results[0]"). Returns
//   {"passed": bool, "failures": checks that failed (over all ranks and steps), "steps": steps validated,
//    "arithmetic": "...", "precision": "...", "reference": "...", "rule": "...",
//    "overrides": "" or "--error-factor 3 --error-atol 1e-05" (the derived rule replaced: not validated),
//    "closest": {"name", "step" (or null), "sharded_error", "allowed_error",
//                "used": sharded_error / allowed_error (1 = at the bound), "explanation"}}.
// Throws seqpar::Error naming where and the field for anything missing or of the wrong type, and
// for a verdict that contradicts itself ('passed' true with failed checks, or false with none).
nlohmann::json read_validation_verdict(const nlohmann::json& result, std::string_view where);

// A verdict's closest check's "used" as the tables print it: "52%", or "not finite".
std::string allowance_used_text(const nlohmann::json& closest);

}  // namespace seqpar::reports
