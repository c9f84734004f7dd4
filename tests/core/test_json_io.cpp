// The JSON reader every command uses: a key named twice is refused with the path of its object,
// whatever the object's size and wherever a left-out value sat before it; keys a reader asks to
// skip are left out at any depth, with the rest of the document unchanged.
#include <gtest/gtest.h>

#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

namespace seqpar {
namespace {

std::string error_of(const std::string& text, const std::vector<std::string_view>& skip = {}) {
  try {
    parse_json(text, "doc.json", skip);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// An object of n distinct keys "k0".."k{n-1}", then `extra` keys.
std::string object_of(int n, const std::string& extra = "") {
  std::string s = "{";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + ("\"k" + std::to_string(i) + "\": " + std::to_string(i));
  return s + extra + "}";
}

TEST(JsonIo, AKeyNamedTwiceIsRefusedWithItsObjectsPath) {
  EXPECT_EQ(error_of(R"({"a": 1, "b": {"c": [1, {"d": 2}]}})"), "");
  EXPECT_NE(error_of(R"({"a": 1, "a": 2})").find("doc.json: malformed JSON: the key 'a' appears twice in the top-level object"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"gpu": {"x": 1, "y": 2, "x": 3}})").find("the key 'x' appears twice in the object at gpu;"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"r": [{"a": 1}, {"p": {"q": 1, "q": 2}}]})").find("the key 'q' appears twice in the object at r[].p;"),
            std::string::npos);
  // The same key in sibling objects, and in an object and its parent, is no repeat.
  EXPECT_EQ(error_of(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "c": {"a": {"a": 3}}})"), "");
}

// Objects of 32 keys are checked in a list, larger ones in a set: the repeat is found either way,
// as the first key and as the last.
TEST(JsonIo, RepeatsAreFoundInObjectsOfEverySize) {
  for (int n : {1, 31, 32, 33, 100}) {
    EXPECT_EQ(error_of(object_of(n)), "") << n;
    EXPECT_NE(error_of(object_of(n, ", \"k0\": 9")).find("the key 'k0' appears twice"), std::string::npos) << n;
    const std::string last = "k" + std::to_string(n - 1);
    EXPECT_NE(error_of(object_of(n, ", \"" + last + "\": 9")).find("the key '" + last + "' appears twice"),
              std::string::npos)
        << n;
    // Nested below a large sibling: the inner object's keys are its own.
    EXPECT_EQ(error_of("{\"big\": " + object_of(n) + ", \"inner\": " + object_of(n) + "}"), "") << n;
  }
}

TEST(JsonIo, SkippedKeysAreLeftOutAtAnyDepthAndTheRestIsKept) {
  const std::string text =
      R"({"memory_terms": [{"name": "x"}], "results": [{"a": 1, "memory_terms": {"deep": {"name": 1}}, "b": [2, 3]},)"
      R"( {"memory_phases": 4, "c": {"memory_terms": 5, "d": 6}}], "e": "memory_terms"})";
  const nlohmann::json kept = parse_json(text, "doc.json", {"memory_terms", "memory_phases"});
  const nlohmann::json want = nlohmann::json::parse(
      R"({"results": [{"a": 1, "b": [2, 3]}, {"c": {"d": 6}}], "e": "memory_terms"})");
  EXPECT_EQ(kept, want) << kept.dump();
  EXPECT_EQ(parse_json(text, "doc.json"), nlohmann::json::parse(text));
  // A repeat after a skipped subtree is still found, in the right object; one inside a skipped
  // value too (the document is malformed whatever the reader keeps).
  EXPECT_NE(error_of(R"({"r": [{"memory_terms": {"x": {"y": 1}}, "a": 1, "a": 2}]})", {"memory_terms"})
                .find("the key 'a' appears twice in the object at r[];"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"memory_terms": {"x": 1, "x": 2}})", {"memory_terms"}).find("the key 'x' appears twice"),
            std::string::npos);
}

}  // namespace
}  // namespace seqpar
