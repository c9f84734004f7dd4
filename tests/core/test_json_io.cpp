// The JSON reader every command uses: a key named twice is refused with the path of its object,
// whatever the object's size and wherever a left-out value sat before it; keys a reader asks to
// skip are left out at any depth, with the rest of the document unchanged; any document reads as
// the JSON library's own parser reads it; a streamed top-level array reaches its sink element by
// element, in order.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

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


// A random document of every kind of value (nested objects and arrays, empty ones, integers of
// both signs and past 2^63, floats, escaped and non-ASCII strings), with distinct keys per object.
nlohmann::json random_value(std::mt19937_64& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth >= 5 ? 6 : 8));
  switch (kind) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return -static_cast<std::int64_t>(rng() >> 2);
    case 3: return static_cast<std::uint64_t>(rng());
    case 4: return std::ldexp(static_cast<double>(rng() % 1000003) - 500000.5, static_cast<int>(rng() % 80) - 40);
    case 5: {
      static const char* pieces[] = {"a", "\\", "\"", "\n", "\t", "\u00e9", "\u4e2d", "x y", "/", "\u0001"};
      std::string s;
      for (int i = static_cast<int>(rng() % 6); i > 0; --i) s += pieces[rng() % 10];
      return s;
    }
    case 6: {
      nlohmann::json a = nlohmann::json::array();
      for (int i = static_cast<int>(rng() % 5); i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      nlohmann::json o = nlohmann::json::object();
      for (int i = static_cast<int>(rng() % 6); i > 0; --i) o["k" + std::to_string(rng() % 40)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonIo, EveryDocumentReadsAsTheLibrarysOwnParserReadsIt) {
  std::mt19937_64 rng(20261129);
  for (int i = 0; i < 400; ++i) {
    const nlohmann::json doc = random_value(rng, 0);
    for (int indent : {-1, 2}) {
      const std::string text = doc.dump(indent);
      EXPECT_EQ(parse_json(text, "doc.json"), nlohmann::json::parse(text)) << text;
    }
  }
}

// Broken documents (random bytes cut, repeated or replaced in valid ones) read as the library's own
// parser reads them: the same value where it accepts the text, a seqpar::Error where it refuses it;
// never another exception or a crash. (The reader refuses repeated keys, which the library keeps.)
TEST(JsonIo, BrokenDocumentsAreErrorsWhereTheLibraryRefusesThem) {
  std::mt19937_64 rng(20261130);
  const char noise[] = "{}[],:\"\\0123456789.eE+-truefalsnl \n\xff";
  int refused = 0, read = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string text = random_value(rng, 0).dump(static_cast<int>(rng() % 2) * 2);
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0 && !text.empty(); --edits) {
      const std::size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text.erase(at, 1 + rng() % 4); break;
        case 1: text.insert(at, text.substr(at, 1 + rng() % 6)); break;
        default: text[at] = noise[rng() % (sizeof(noise) - 1)]; break;
      }
    }
    bool library_reads = true;
    nlohmann::json want;
    try {
      want = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      library_reads = false;
    }
    try {
      const nlohmann::json got = parse_json(text, "doc.json");
      EXPECT_TRUE(library_reads) << text;
      EXPECT_EQ(got, want) << text;
      ++read;
    } catch (const Error& e) {
      const bool repeat = std::string(e.what()).find("appears twice") != std::string::npos;
      EXPECT_TRUE(!library_reads || repeat) << text << "\n" << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("doc.json: ", 0), 0u) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 500);  // the edits break most documents, and leave some readable
  EXPECT_GT(read, 50);
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(testing::TempDir()) / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(JsonIo, AStreamedArrayReachesItsSinkInOrderAndTheRestIsKept) {
  std::mt19937_64 rng(7);
  nlohmann::json doc = {{"kind", "prediction"}, {"z", {{"results", {1, 2}}}}, {"results", nlohmann::json::array()}};
  for (int i = 0; i < 200; ++i) doc["results"].push_back(random_value(rng, 1));
  doc["results"].push_back({{"a", 1}, {"memory_terms", {{"x", 1}}}, {"b", {{"memory_terms", 2}, {"c", 3}}}});
  const std::string path = temp_file("streamed.json", doc.dump(2));
  std::vector<nlohmann::json> got;
  const nlohmann::json head = read_json_file_streaming(
      path, "results",
      [&](nlohmann::json&& e, std::size_t index, const nlohmann::json& so_far) {
        EXPECT_EQ(index, got.size());
        EXPECT_EQ(so_far.value("kind", ""), "prediction");  // the keys before the array
        got.push_back(std::move(e));
      },
      {"memory_terms"});
  ASSERT_EQ(got.size(), doc["results"].size());
  for (std::size_t i = 0; i + 1 < got.size(); ++i) EXPECT_EQ(got[i], doc["results"][i]) << i;
  EXPECT_EQ(got.back(), nlohmann::json::parse(R"({"a": 1, "b": {"c": 3}})"));  // skipped inside elements too
  // The head keeps everything else; only the top-level array is streamed (not z.results).
  nlohmann::json want = doc;
  want["results"] = nlohmann::json::array();
  EXPECT_EQ(head, want);
  // Not an array there: nothing is streamed and the value is kept.
  std::size_t calls = 0;
  const nlohmann::json scalar = read_json_file_streaming(temp_file("scalar.json", R"({"results": {"a": [1]}})"),
                                                         "results", [&](nlohmann::json&&, std::size_t, const nlohmann::json&) { ++calls; });
  EXPECT_EQ(calls, 0u);
  EXPECT_EQ(scalar, nlohmann::json::parse(R"({"results": {"a": [1]}})"));
}

TEST(JsonIo, AStreamedDocumentIsCheckedWhole) {
  auto error_streaming = [](const std::string& name, const std::string& text) {
    try {
      read_json_file_streaming(temp_file(name, text), "results", [](nlohmann::json&&, std::size_t, const nlohmann::json&) {});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_streaming("dup_in.json", R"({"results": [{"a": 1}, {"p": {"q": 1, "q": 2}}]})")
                .find("the key 'q' appears twice in the object at results[].p;"),
            std::string::npos);
  // Malformed after the array, when every element has been delivered: still an error.
  EXPECT_NE(error_streaming("late.json", R"({"results": [{"a": 1}], "kind": "prediction", "kind": 2})")
                .find("the key 'kind' appears twice in the top-level object"),
            std::string::npos);
  EXPECT_NE(error_streaming("cut.json", R"({"results": [{"a": 1}, {"b": )").find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_streaming("big.json", R"({"results": [1e400]})").find("a number is out of range"), std::string::npos);
}

}  // namespace
}  // namespace seqpar
