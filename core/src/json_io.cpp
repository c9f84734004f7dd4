#include "seqpar/core/json_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"

namespace seqpar {

namespace {

// Deepest bracket nesting outside strings, stopping early past the limit. A pre-scan rather than a
// parser callback because the SAX parser is not the only recursion: destroying, copying and
// dumping a parsed value recurse too, so a deep document must never be built at all.
void check_depth(std::string_view text, std::string_view where) {
  int depth = 0;
  bool in_string = false, escaped = false;
  std::size_t line = 1;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw Error(fmt::format("{}: malformed JSON: nested deeper than {} levels (at line {})", where,
                                kMaxJsonDepth, line));
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;  // unbalanced brackets are the parser's to report
    }
  }
}

// Refuses an object that names a key twice. nlohmann keeps the last value silently, so
// {"gpus": 8, "gpus": 64} would run on 64 GPUs while the file, read from the top, says 8. Also
// leaves out the keys in `skip` (returning false for a key drops it with its value). An object's
// keys are looked up in a short list (most objects hold a few dozen), and in a set beyond that.
class DuplicateKeys {
 public:
  DuplicateKeys(std::string_view where, const std::vector<std::string_view>& skip) : where_(where), skip_(skip) {}
  // `depth` is the parser's: an object or array opened at depth d holds its keys at d + 1. (The
  // parser reports no end for a value being left out, so the frames follow the depth, not the
  // start and end events.)
  bool operator()(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start: open(static_cast<std::size_t>(depth), true); break;
      case E::array_start: open(static_cast<std::size_t>(depth), false); break;
      case E::object_end:
      case E::array_end: break;
      case E::key: {
        const std::size_t at = static_cast<std::size_t>(depth) - 1;
        Frame& f = frames_[at];
        f.last = parsed.get_ref<const std::string&>();
        if (!f.insert(f.last))
          throw Error(fmt::format("{}: malformed JSON: the key '{}' appears twice in {}; give each key once", where_,
                                  f.last, path(at)));
        return std::find(skip_.begin(), skip_.end(), std::string_view(f.last)) == skip_.end();
      }
      case E::value: break;
    }
    return true;
  }

 private:
  static constexpr std::size_t kListedKeys = 32;
  struct Frame {
    bool object = false;
    std::vector<std::string> list;  // the keys seen, while there are few
    std::set<std::string> many;     // all of them, once there are more than kListedKeys
    std::string last;               // the key being read (objects)
    bool insert(const std::string& k) {
      if (many.empty()) {
        if (std::find(list.begin(), list.end(), k) != list.end()) return false;
        list.push_back(k);
        if (list.size() <= kListedKeys) return true;
        many.insert(list.begin(), list.end());
        return true;
      }
      return many.insert(k).second;
    }
  };
  // frames_[d]: the object or array opened at depth d. Frames are reused (their lists keep their
  // capacity): a document's millions of small objects do not each allocate a new frame.
  void open(std::size_t depth, bool object) {
    if (depth >= frames_.size()) frames_.resize(depth + 1);
    Frame& f = frames_[depth];
    f.object = object;
    f.list.clear();
    f.many.clear();
    f.last.clear();
  }
  // The object at frames_[at]: "the object at gpu.curves[]", or "the top-level object".
  std::string path(std::size_t at) const {
    std::string out;
    for (std::size_t i = 0; i < at; ++i) out += frames_[i].object ? (out.empty() ? "" : ".") + frames_[i].last : "[]";
    return out.empty() ? "the top-level object" : "the object at " + out;
  }
  std::string_view where_;
  const std::vector<std::string_view>& skip_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view where, const std::vector<std::string_view>& skip) {
  check_depth(text, where);
  try {
    return nlohmann::json::parse(text.begin(), text.end(), DuplicateKeys(where, skip));
  } catch (const nlohmann::json::out_of_range& e) {
    // 406: a number such as 1e400 that no double holds.
    throw Error(fmt::format("{}: malformed JSON: a number is out of range: {}", where, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", where, e.what()));
  }
}

nlohmann::json read_json_file(const std::string& path, const std::vector<std::string_view>& skip) {
  std::error_code ec;
  // A directory opens as a stream that reads nothing: "unexpected end of input" would hide the mistake.
  if (std::filesystem::is_directory(path, ec))
    throw Error(fmt::format("{}: is a directory, not a JSON file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open the file for reading", path));
  // Read into one string (not through a stringstream and a copy of it): a 1 GB document is held once.
  std::string text;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > 0) {
    text.resize(static_cast<std::size_t>(size));
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<std::size_t>(in.gcount()));
  } else {  // a pipe or a special file: no size to read up to
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (in.bad()) throw Error(fmt::format("{}: reading the file failed", path));
  return parse_json(text, path, skip);
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {
std::string first_bad_number_at(const nlohmann::json& j, bool allow_negative, const std::string& path) {
  if (j.is_number()) {
    const double v = j.get<double>();
    if (std::isfinite(v) && (allow_negative || v >= 0)) return "";
    return fmt::format("{} = {}", path.empty() ? "(value)" : path, v);
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      std::string b = first_bad_number_at(v, allow_negative, path.empty() ? k : path + "." + k);
      if (!b.empty()) return b;
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      std::string b = first_bad_number_at(j[i], allow_negative, fmt::format("{}[{}]", path, i));
      if (!b.empty()) return b;
    }
  }
  return "";
}
}  // namespace

std::string first_bad_number(const nlohmann::json& j, bool allow_negative) {
  return first_bad_number_at(j, allow_negative, "");
}

void write_json_file(const std::string& path, const nlohmann::json& doc) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("-J {}: cannot open the file for writing", path));
  out << dump_json(doc) << '\n';  // argv and paths may hold invalid UTF-8: replaced, not thrown on
  if (!out) throw Error(fmt::format("-J {}: writing failed", path));
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char b) { out += fmt::format("\\x{:02X}", b); };
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b < 0x20 && b != '\n' && b != '\t') escape(b);
      else if (b == 0x7F) escape(b);
      else out += static_cast<char>(b);
      ++i;
      continue;
    }
    // The length a lead byte announces, and the smallest code point of that length (no overlongs).
    const int n = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size();
    std::uint32_t cp = n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
    for (int k = 1; ok && k < n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    ok = ok && !(n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) && !(n == 4 && (cp < 0x10000 || cp > 0x10FFFF));
    if (!ok) {
      escape(b);
      ++i;
      continue;
    }
    out.append(text.substr(i, static_cast<std::size_t>(n)));
    i += static_cast<std::size_t>(n);
  }
  return out;
}

std::string nearest_name(std::string_view name, std::span<const std::string_view> known) {
  // Levenshtein distance, one row at a time; names are a few dozen characters.
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diag = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  std::size_t best_d = std::max<std::size_t>(1, name.size() / 2) + 1;
  for (std::string_view k : known)
    if (const std::size_t d = distance(name, k); d < best_d) best_d = d, best = std::string(k);
  return best;
}

void check_fields(const nlohmann::json& object, std::span<const std::string_view> known, std::string_view what) {
  if (!object.is_object()) return;
  for (const auto& [key, value] : object.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (ok) continue;
    std::string all;
    for (std::string_view k : known) all += (all.empty() ? "" : ", ") + std::string(k);
    const std::string near = nearest_name(key, known);
    // The key as JSON text: quoted, invalid UTF-8 replaced (it is echoed back to a terminal).
    throw Error(fmt::format("{}: unknown field {} ({}known: {})", what, dump_json(nlohmann::json(key), -1),
                            near.empty() ? "" : fmt::format("did you mean '{}'? ", near), all));
  }
}

}  // namespace seqpar
