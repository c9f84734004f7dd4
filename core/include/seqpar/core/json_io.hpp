// The one safe way to read and write JSON that users hand us: every failure of the JSON library
// (syntax, numbers beyond double range such as 1e400, nesting deep enough to exhaust the stack,
// invalid UTF-8 in text we echo back) becomes a seqpar::Error naming the file, never an abort.
#pragma once
#include <nlohmann/json.hpp>
#include <cstddef>
#include <functional>
#include <string>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

namespace seqpar {

// Deepest nesting of arrays and objects accepted. The parser, the serializer and every walker
// recurse once per level; real seqpar documents are under 10 deep, so 256 is generous and keeps
// hostile input (100,000 '[') far from the stack limit.
inline constexpr int kMaxJsonDepth = 256;

// Parses `text`; `where` (a file name, "--system", ...) starts every error message:
// "<where>: malformed JSON: ...", "<where>: a number is out of range ...", "<where>: JSON nested
// deeper than 256 levels ...", "<where>: malformed JSON: the key 'gpus' appears twice in ..." (an
// object that names a key twice is refused: the parser would keep the last value silently). The
// depth is checked before the parser runs. A key named in `skip` is left out with its value, at
// any depth, while the document is parsed (a reader that never looks at a bulky field does not
// build it: `seqpar report` on a 1 GB sweep); the rest of the document is checked all the same.
nlohmann::json parse_json(std::string_view text, std::string_view where,
                          const std::vector<std::string_view>& skip = {});

// Reads and parses a file: the errors of parse_json, or "<path>: cannot open the file for reading".
nlohmann::json read_json_file(const std::string& path, const std::vector<std::string_view>& skip = {});

// Receives the elements of a streamed array one by one, with their index and the document read so
// far (the keys before the array: a reader may treat the elements by the document's kind).
using JsonElementSink = std::function<void(nlohmann::json&& element, std::size_t index, const nlohmann::json& head)>;

// read_json_file for a document whose top-level array `stream` may be far larger than the rest (a
// sweep's "results": 279,296 points, 1 GB): each of its elements is built alone and handed to `sink`
// as soon as it is read, and the document returned holds an empty array there. The whole document
// is still checked (syntax, depth, repeated keys); an error after some elements were delivered
// still throws, so a caller keeps nothing of a document that fails.
nlohmann::json read_json_file_streaming(const std::string& path, std::string_view stream, const JsonElementSink& sink,
                                        const std::vector<std::string_view>& skip = {});

// Serializes with invalid UTF-8 replaced by U+FFFD (file names and argv are bytes, not text) rather
// than throwing; indent < 0 gives one line. Non-finite numbers come out as null (nlohmann's rule).
std::string dump_json(const nlohmann::json& j, int indent = 2);

// The first number in `j` that is NaN, infinite or (unless allowed) negative, as "path = value"
// ("time.compute_s = inf"); empty when there is none. Documents that will be dumped are checked
// with it because nlohmann writes non-finite numbers as null, silently.
std::string first_bad_number(const nlohmann::json& j, bool allow_negative = false);

// `text` for a terminal: valid UTF-8 kept, every byte that is not part of it written as \xNN and
// control characters other than newline and tab likewise (argv and file contents echoed in
// messages are bytes, and a raw 0xFF or escape sequence would garble the user's terminal).
std::string printable(std::string_view text);

// Refuses a field of `object` that is not in `known`: "<what>: unknown field 'allocater' (did you
// mean 'allocator'? known: ...)". User-written data (profiles, presets) would otherwise lose a
// misspelt setting silently. A non-object is left to the caller's own check.
void check_fields(const nlohmann::json& object, std::span<const std::string_view> known, std::string_view what);
inline void check_fields(const nlohmann::json& object, std::initializer_list<std::string_view> known,
                         std::string_view what) {
  check_fields(object, std::span<const std::string_view>(known.begin(), known.size()), what);
}
// The entry of `known` nearest `name` by edit distance (ties: the first), or empty when none is
// within half of name's length: a suggestion, not a guess.
std::string nearest_name(std::string_view name, std::span<const std::string_view> known);

// Writes a measurement document to the -J path with dump_json; throws seqpar::Error naming the path
// when the file cannot be opened or written.
void write_json_file(const std::string& path, const nlohmann::json& doc);

}  // namespace seqpar
