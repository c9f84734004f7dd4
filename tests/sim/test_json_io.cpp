// seqpar::parse_json / read_json_file / dump_json / first_bad_number (common/json_io): every JSON
// library failure on user input is a seqpar::Error naming the input, never an escaped exception.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

namespace seqpar {
namespace {

using nlohmann::json;

std::string error_of(std::string_view text, std::string_view where = "in.json") {
  try {
    parse_json(text, where);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonIo, NumbersBeyondDoubleRangeAreAnErrorNamingTheInput) {
  // nlohmann throws out_of_range.406, which no reader caught before.
  const std::string e = error_of(R"({"memory_gib": 1e400})", "gpu.json");
  EXPECT_EQ(e.rfind("gpu.json: ", 0), 0u) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  EXPECT_NE(error_of("[-1e400]"), "");
}

TEST(JsonIo, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string e = error_of(deep, "deep.json");
  EXPECT_EQ(e.rfind("deep.json: ", 0), 0u) << e;
  EXPECT_NE(e.find("nested deeper than 256"), std::string::npos) << e;
  // Unclosed, inside an object value, and as objects.
  EXPECT_NE(error_of("{\"a\": " + std::string(300, '[')), "");
  std::string objects;
  for (int i = 0; i < 300; ++i) objects += "{\"a\":";
  EXPECT_NE(error_of(objects + "1" + std::string(300, '}')).find("nested deeper"), std::string::npos);
}

TEST(JsonIo, TheDepthLimitIsExactAndIgnoresBracketsInStrings) {
  const int n = kMaxJsonDepth;
  EXPECT_NO_THROW(parse_json(std::string(std::size_t(n), '[') + std::string(std::size_t(n), ']'), "x"));
  EXPECT_THROW(parse_json(std::string(std::size_t(n) + 1, '[') + std::string(std::size_t(n) + 1, ']'), "x"), Error);
  const std::string brackets(1000, '[');
  const json j = parse_json("{\"s\": \"" + brackets + "\\\"" + brackets + "\"}", "x");
  EXPECT_EQ(j["s"].get<std::string>().size(), 2001u);
}

TEST(JsonIo, SyntaxErrorsAndInvalidUtf8AreErrors) {
  EXPECT_NE(error_of("{ not json").find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of("{\"name\": \"\xff\"}").find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of("").find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of("[NaN]").find("malformed JSON"), std::string::npos);
}

TEST(JsonIo, ReadJsonFileNamesTheFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("seqpar_json_io_" + std::to_string(getpid()) + ".json")).string();
  std::ofstream(path) << "{\"a\": 1e999}";
  try {
    read_json_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
  std::filesystem::remove(path);
  try {
    read_json_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

TEST(JsonIo, DumpReplacesInvalidUtf8InsteadOfThrowing) {
  const json j = {{"command", "seqpar simulate --model bad\xff.json"}, {"errors", {"bad\xc3"}}};
  EXPECT_THROW((void)j.dump(), json::type_error);  // what every plain dump() of argv did
  std::string out;
  ASSERT_NO_THROW(out = dump_json(j));
  EXPECT_NE(out.find("bad\xef\xbf\xbd.json"), std::string::npos) << out;  // U+FFFD
  json back;
  EXPECT_NO_THROW(back = json::parse(out));
}

// What messages echo goes to a terminal: valid UTF-8 as it is, every other byte escaped.
TEST(JsonIo, PrintableEscapesWhatIsNotUtf8) {
  EXPECT_EQ(printable("8K"), "8K");
  EXPECT_EQ(printable("x\xffy"), "x\\xFFy");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(printable("\xc3"), "\\xC3");                  // a lead byte cut short
  EXPECT_EQ(printable("\xc0\xaf"), "\\xC0\\xAF");          // an overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(printable("a\x1b[31mb\n"), "a\\x1B[31mb\n");   // an escape sequence, the newline kept
}

// A field a reader does not know is refused with the nearest known one, or the list alone.
TEST(JsonIo, CheckFieldsNamesTheNearestKnownField) {
  const json j = {{"allocater", 1}};
  try {
    check_fields(j, {"allocator", "time"}, "f.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "f.json: unknown field \"allocater\" (did you mean 'allocator'? known: allocator, time)");
  }
  EXPECT_NO_THROW(check_fields(json{{"time", 1}}, {"allocator", "time"}, "f.json"));
  EXPECT_EQ(nearest_name("zzzzzz", std::vector<std::string_view>{"allocator", "time"}), "");
}

TEST(JsonIo, FirstBadNumberNamesThePath) {
  json j = {{"time", {{"compute_s", 1.0}, {"comm_s", std::numeric_limits<double>::infinity()}}}};
  EXPECT_EQ(first_bad_number(j), "time.comm_s = inf");
  j["time"]["comm_s"] = 2.0;
  EXPECT_EQ(first_bad_number(j), "");
  j["parts"] = {1.0, -3.0};
  EXPECT_EQ(first_bad_number(j), "parts[1] = -3");
  EXPECT_EQ(first_bad_number(j, true), "");
  j["parts"][0] = std::nan("");
  EXPECT_EQ(first_bad_number(j, true), "parts[0] = nan");
}

}  // namespace
}  // namespace seqpar
