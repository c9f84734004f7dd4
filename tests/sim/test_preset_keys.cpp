// Model and system presets (and the files given to --model / --system) refuse keys they do not
// know, naming the nearest known one: a misspelt optional key would otherwise keep its default
// without a word (issue 35, case 2's rule for framework files, applied to the other presets).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

std::string error_of(const std::string& kind, const json& doc) {
  try {
    if (kind == "gpu") gpu_from_json(doc, "my.json");
    else if (kind == "system") system_from_json(doc, "my.json");
    else model_from_json(doc, "my.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PresetKeys, EveryCommittedModelSystemAndGpuPresetLoads) {
  int seen = 0;
  for (const PresetEntry& p : builtin_presets()) {
    if (p.kind != "model" && p.kind != "system" && p.kind != "gpu") continue;
    EXPECT_EQ(error_of(p.kind, p.document), "") << p.kind << " " << p.name;
    ++seen;
  }
  EXPECT_GE(seen, 17);  // 6 models, 7 systems and 7 GPUs are committed in sim/presets/
}

// One character of a real key dropped: refused, the message naming the key given and the real one.
TEST(PresetKeys, AMisspeltKeyIsRefusedWithTheNearestKnownName) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  int checked = 0;
  for (const PresetEntry& p : builtin_presets()) {
    if (p.kind != "model" && p.kind != "system" && p.kind != "gpu") continue;
    // Links too: the path picks the object whose keys are misspelt.
    for (const char* where : {"", "/intra_node", "/inter_node"}) {
      if (*where && p.kind != "system") continue;
      json doc = p.document;
      json& obj = *where ? doc[json::json_pointer(where)] : doc;
      std::vector<std::string> keys;
      for (const auto& [k, v] : obj.items())
        if (k.size() > 6) keys.push_back(k);  // long enough that one dropped letter is nearest to it alone
      ASSERT_FALSE(keys.empty()) << p.name << where;
      const std::string key = keys[rng() % keys.size()];
      std::string typo = key;
      typo.erase(1 + rng() % (typo.size() - 1), 1);
      // A typo as near another key ("intr_node": intra_node or inter_node) has no one answer: skipped
      // (listed first, a tie goes to the other key).
      bool ambiguous = obj.contains(typo);
      for (const auto& [k, v] : obj.items())
        ambiguous = ambiguous || (k != key && nearest_name(typo, std::vector<std::string_view>{k, key}) != key);
      if (ambiguous) continue;
      obj[typo] = obj[key];
      obj.erase(key);
      ++checked;
      const std::string e = error_of(p.kind, doc);
      EXPECT_NE(e.find("unknown field \"" + typo + "\""), std::string::npos) << "seed " << seed << ": " << e;
      EXPECT_NE(e.find("did you mean '" + key + "'"), std::string::npos) << "seed " << seed << ": " << e;
    }
  }
  EXPECT_GE(checked, 15) << "seed " << seed;  // 20 presets and 14 links drawn; few typos are ties
}

TEST(PresetKeys, AKeyNearNothingIsRefusedListingTheKnownOnes) {
  json model = preset_document("model", "llama3-8b");
  model["lanucher_args"] = "x";
  const std::string e = error_of("model", model);
  EXPECT_EQ(e.rfind("my.json", 0), 0u) << e;
  EXPECT_NE(e.find("\"lanucher_args\""), std::string::npos) << e;
  EXPECT_NE(e.find("known: name"), std::string::npos) << e;
  json system = preset_document("system", "dgx-h100");
  system["rank"] = 3;
  EXPECT_NE(error_of("system", system).find("unknown field \"rank\""), std::string::npos);
}

// A result's model object (to_json: the shape plus "params" and "sources") reads back to the same model.
TEST(PresetKeys, AResultsModelReadsBack) {
  for (const PresetEntry& p : builtin_presets()) {
    if (p.kind != "model") continue;
    const Model m = model_from_json(p.document, p.name);
    json j = to_json(m);
    EXPECT_EQ(to_json(model_from_json(j, "result")), j) << p.name;
  }
}

}  // namespace
}  // namespace seqpar::sim
