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

// Builds the document from the parser's events (nlohmann's SAX interface), refusing an object that
// names a key twice: nlohmann keeps the last value silently, so {"gpus": 8, "gpus": 64} would run on
// 64 GPUs while the file, read from the top, says 8. Keys in `skip` are left out with their values
// (still checked for repeats), and the elements of a streamed top-level array go to a sink one by
// one. Not nlohmann's callback parser: it scans an array's elements each time one of them ends, to
// find a dropped one, which is quadratic in a sweep's 279,296 points.
class DomBuilder {
 public:
  using json = nlohmann::json;
  DomBuilder(std::string_view where, const std::vector<std::string_view>& skip, std::string_view stream,
             const JsonElementSink* sink)
      : where_(where), skip_(skip), stream_(stream), sink_(sink) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool b) { return value(json(b)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return value(json(v)); }
  bool string(json::string_t& s) { return value(json(std::move(s))); }
  bool binary(json::binary_t& b) { return value(json(std::move(b))); }
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    Frame& f = frames_[depth_ - 1];
    f.key.assign(k);
    drop_ = std::find(skip_.begin(), skip_.end(), std::string_view(k)) != skip_.end();
    bool fresh;
    if (f.kept && !drop_) {  // a kept object's own map tells a repeat
      auto [it, inserted] = f.node->get_ref<json::object_t&>().emplace(std::move(k), nullptr);
      fresh = inserted;
      f.slot = &it->second;
    } else {
      fresh = f.insert(f.key);
    }
    if (!fresh)
      throw Error(fmt::format("{}: malformed JSON: the key '{}' appears twice in {}; give each key once", where_,
                              f.key, path(depth_ - 1)));
    return true;
  }
  // The library's own exception, rethrown with its type (parse_json turns it into a seqpar::Error).
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;
  }

  json take() { return std::move(root_); }

 private:
  static constexpr std::size_t kListedKeys = 32;
  struct Frame {
    bool object = false, kept = true, streamed = false;
    json* node = nullptr;  // the value being built (kept frames)
    json* slot = nullptr;  // the value of the key just read (kept objects)
    std::string key;       // the key just read (objects): the path in messages, the streamed array's name
    // The keys of a left-out object (and the left-out keys of a kept one), for repeats: a short
    // list while there are few, a set beyond kListedKeys.
    std::vector<std::string> list;
    std::set<std::string> many;
    bool insert(const std::string& k) {
      if (many.empty()) {
        if (std::find(list.begin(), list.end(), k) != list.end()) return false;
        list.push_back(k);
        if (list.size() > kListedKeys) many.insert(list.begin(), list.end());
        return true;
      }
      return many.insert(k).second;
    }
  };

  // Where a value of the innermost open frame goes: the object's slot for the key just read, the
  // array's end, or the streamed element.
  json* place(Frame& f, json&& v) {
    if (f.streamed) {
      element_ = std::move(v);
      return &element_;
    }
    if (f.object) {
      *f.slot = std::move(v);
      return f.slot;
    }
    json::array_t& a = f.node->get_ref<json::array_t&>();
    a.push_back(std::move(v));
    return &a.back();  // stable while it is open: nothing is added to `a` until it closes
  }

  bool value(json&& v) {
    if (depth_ == 0) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = frames_[depth_ - 1];
    const bool keep = f.kept && !drop_;
    drop_ = false;
    if (keep) {
      place(f, std::move(v));
      if (f.streamed) deliver();
    }
    return true;
  }

  bool open(bool object) {
    json* node = nullptr;
    bool kept = true, streamed = false;
    if (depth_ == 0) {
      root_ = object ? json::object() : json::array();
      node = &root_;
    } else {
      Frame& p = frames_[depth_ - 1];
      kept = p.kept && !drop_;
      drop_ = false;
      if (kept) node = place(p, object ? json::object() : json::array());
      streamed = kept && !object && sink_ != nullptr && depth_ == 1 && p.object && p.key == stream_;
    }
    if (depth_ == frames_.size()) frames_.emplace_back();
    Frame& f = frames_[depth_++];  // reused: a document's millions of small objects allocate no new frame
    f.object = object;
    f.kept = kept;
    f.streamed = streamed;
    f.node = node;
    f.slot = nullptr;
    f.key.clear();
    f.list.clear();
    f.many.clear();
    return true;
  }

  bool close() {
    const bool kept = frames_[--depth_].kept;
    if (kept && depth_ > 0 && frames_[depth_ - 1].streamed) deliver();
    return true;
  }

  void deliver() {
    (*sink_)(std::move(element_), delivered_++, root_);
    element_ = json();
  }

  // The object at frames_[at]: "the object at gpu.curves[]", or "the top-level object".
  std::string path(std::size_t at) const {
    std::string out;
    for (std::size_t i = 0; i < at; ++i) out += frames_[i].object ? (out.empty() ? "" : ".") + frames_[i].key : "[]";
    return out.empty() ? "the top-level object" : "the object at " + out;
  }

  std::string_view where_;
  const std::vector<std::string_view>& skip_;
  std::string_view stream_;
  const JsonElementSink* sink_;
  json root_, element_;
  std::vector<Frame> frames_;
  std::size_t depth_ = 0, delivered_ = 0;
  bool drop_ = false;  // the key just read is left out with its value
};

nlohmann::json parse_with(std::string_view text, std::string_view where, const std::vector<std::string_view>& skip,
                          std::string_view stream, const JsonElementSink* sink) {
  check_depth(text, where);
  try {
    DomBuilder b(where, skip, stream, sink);
    nlohmann::json::sax_parse(text.begin(), text.end(), &b);
    return b.take();
  } catch (const nlohmann::json::out_of_range& e) {
    // 406: a number such as 1e400 that no double holds.
    throw Error(fmt::format("{}: malformed JSON: a number is out of range: {}", where, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", where, e.what()));
  }
}

std::string read_file_text(const std::string& path) {
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
  return text;
}

}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view where, const std::vector<std::string_view>& skip) {
  return parse_with(text, where, skip, {}, nullptr);
}

nlohmann::json read_json_file(const std::string& path, const std::vector<std::string_view>& skip) {
  return parse_with(read_file_text(path), path, skip, {}, nullptr);
}

nlohmann::json read_json_file_streaming(const std::string& path, std::string_view stream, const JsonElementSink& sink,
                                        const std::vector<std::string_view>& skip) {
  return parse_with(read_file_text(path), path, skip, stream, &sink);
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
