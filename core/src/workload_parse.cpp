// Parsing of the workload options (--documents, --packing, --doc-seed, --doc-batches) and of the
// two file forms (histogram CSV, lengths list). Every error names the option, the form's field or
// the file and line, and the rule broken.
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/limits.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/workload.hpp"

namespace seqpar {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// A document length (K/M suffixes) within 1..kMaxSeqLen; `field` names it in the error.
std::int64_t length_field(std::string_view text, std::string_view field) {
  return parse_count(trim(text), field, limits::kMaxSeqLen);
}

// A finite real number; `field` names it in the error.
double real_field(std::string_view text, std::string_view field) {
  const std::string_view s = trim(text);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || ptr != s.data() + s.size() || !std::isfinite(v))
    throw Error(fmt::format("{}: '{}' is not a finite number", field, text));
  return v;
}

// The parametric forms' syntax, for messages.
constexpr std::string_view kForms =
    "fixed:L, uniform:A:B, lognormal:MU:SIGMA, powerlaw:ALPHA:MIN:MAX, hist:FILE.csv or lengths:FILE";

void expect_fields(const std::vector<std::string_view>& parts, std::size_t n, std::string_view form,
                   std::string_view syntax) {
  if (parts.size() != n + 1)
    throw Error(fmt::format("documents: '{}' takes {} field{} ({}); got {}", form, n, n == 1 ? "" : "s", syntax,
                            parts.size() - 1));
}

std::string read_file(std::string_view path) {
  std::ifstream in{std::string(path), std::ios::binary};
  if (!in) throw Error(fmt::format("documents: cannot open file '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A whole non-negative number in a file cell: digits only, K/M suffixes allowed for lengths.
std::int64_t file_count(std::string_view cell, std::string_view source, std::size_t line, std::string_view column,
                        bool zero_ok) {
  const std::string field = fmt::format("{} line {} {}", source, line, column);
  if (zero_ok && trim(cell) == "0") return 0;
  return parse_count(trim(cell), field, limits::kMaxSeqLen);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

LengthDistribution parse_histogram_csv(std::string_view text, std::string_view source) {
  LengthDistribution d;
  d.form = LengthForm::histogram;
  int col_min = -1, col_max = -1, col_count = -1;
  std::size_t line_no = 0, columns = 0;
  std::int64_t total = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_no;
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    const std::vector<std::string_view> cells = split(line, ',');
    if (col_min < 0 && col_max < 0 && col_count < 0) {  // the header
      columns = cells.size();
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::string_view name = trim(cells[i]);
        if (name == "min_tokens") col_min = static_cast<int>(i);
        else if (name == "max_tokens") col_max = static_cast<int>(i);
        else if (name == "count") col_count = static_cast<int>(i);
      }
      if (col_min < 0 || col_max < 0 || col_count < 0)
        throw Error(fmt::format("{} line {}: the header must name the columns min_tokens, max_tokens and count; "
                                "got '{}'", source, line_no, line));
      continue;
    }
    if (cells.size() != columns)
      throw Error(fmt::format("{} line {}: {} cells where the header has {}", source, line_no, cells.size(), columns));
    HistogramBin b;
    b.min_tokens = file_count(cells[static_cast<std::size_t>(col_min)], source, line_no, "min_tokens", false);
    b.max_tokens = file_count(cells[static_cast<std::size_t>(col_max)], source, line_no, "max_tokens", false);
    b.count = file_count(cells[static_cast<std::size_t>(col_count)], source, line_no, "count", true);
    if (b.max_tokens < b.min_tokens)
      throw Error(fmt::format("{} line {}: max_tokens {} is below min_tokens {}", source, line_no, b.max_tokens,
                              b.min_tokens));
    total = checked_add(total, b.count, fmt::format("{}: the total count", source));
    if (d.bins.size() >= kMaxLengthEntries)
      throw Error(fmt::format("{}: more than {} bins", source, kMaxLengthEntries));
    if (b.count > 0) d.bins.push_back(b);
  }
  if (col_min < 0) throw Error(fmt::format("{}: no header; expected min_tokens,max_tokens,count", source));
  if (total == 0) throw Error(fmt::format("{}: no bin has a count above 0", source));
  return d;
}

LengthDistribution parse_length_list(std::string_view text, std::string_view source) {
  LengthDistribution d;
  d.form = LengthForm::list;
  std::size_t line_no = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_no;
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    if (d.lengths.size() >= kMaxLengthEntries)
      throw Error(fmt::format("{}: more than {} lengths", source, kMaxLengthEntries));
    d.lengths.push_back(file_count(line, source, line_no, "length", false));
  }
  if (d.lengths.empty()) throw Error(fmt::format("{}: no document lengths (one a line)", source));
  return d;
}

LengthDistribution parse_documents(std::string_view spec_text) {
  const std::string_view spec = trim(spec_text);
  if (spec.empty()) throw Error(fmt::format("documents: empty; expected {}", kForms));
  const std::vector<std::string_view> parts = split(spec, ':');
  const std::string_view form = parts[0];
  LengthDistribution d;
  if (form == "fixed") {
    expect_fields(parts, 1, form, "fixed:L");
    d.form = LengthForm::fixed;
    d.lo = d.hi = length_field(parts[1], "documents: fixed L");
  } else if (form == "uniform") {
    expect_fields(parts, 2, form, "uniform:A:B");
    d.form = LengthForm::uniform;
    d.lo = length_field(parts[1], "documents: uniform A");
    d.hi = length_field(parts[2], "documents: uniform B");
    if (d.hi < d.lo) throw Error(fmt::format("documents: uniform B = {} must be at least A = {}", d.hi, d.lo));
  } else if (form == "lognormal") {
    expect_fields(parts, 2, form, "lognormal:MU:SIGMA, MU and SIGMA of ln(length)");
    d.form = LengthForm::lognormal;
    d.mu = real_field(parts[1], "documents: lognormal MU");
    d.sigma = real_field(parts[2], "documents: lognormal SIGMA");
    // e^MU is the median length; beyond e^28 (~1.4e12) every draw is beyond any sequence.
    if (d.mu < 0 || d.mu > 28) throw Error(fmt::format("documents: lognormal MU = {} must be in [0, 28] (the "
                                                       "median length is e^MU)", parts[1]));
    if (d.sigma < 0 || d.sigma > 10)
      throw Error(fmt::format("documents: lognormal SIGMA = {} must be in [0, 10]", parts[2]));
  } else if (form == "powerlaw") {
    expect_fields(parts, 3, form, "powerlaw:ALPHA:MIN:MAX");
    d.form = LengthForm::powerlaw;
    d.alpha = real_field(parts[1], "documents: powerlaw ALPHA");
    d.lo = length_field(parts[2], "documents: powerlaw MIN");
    d.hi = length_field(parts[3], "documents: powerlaw MAX");
    if (d.alpha < 0 || d.alpha > 10)
      throw Error(fmt::format("documents: powerlaw ALPHA = {} must be in [0, 10]", parts[1]));
    if (d.hi < d.lo) throw Error(fmt::format("documents: powerlaw MAX = {} must be at least MIN = {}", d.hi, d.lo));
  } else if (form == "hist" || form == "lengths") {
    const std::string_view path = trim(spec.substr(form.size() + 1));
    if (parts.size() < 2 || path.empty()) throw Error(fmt::format("documents: '{}:' needs a file path", form));
    d = form == "hist" ? parse_histogram_csv(read_file(path), path) : parse_length_list(read_file(path), path);
  } else if (parts.size() == 1 && !form.empty() && !std::isdigit(static_cast<unsigned char>(form.front()))) {
    // A bare path: a histogram when it ends in .csv, else a lengths list.
    d = ends_with(spec, ".csv") ? parse_histogram_csv(read_file(spec), spec) : parse_length_list(read_file(spec), spec);
  } else {
    throw Error(fmt::format("documents: unknown form '{}'; expected {}", form, kForms));
  }
  d.spec = std::string(spec);
  return d;
}

Packing parse_packing(std::string_view text, int* window, int* balance_window) {
  const std::string_view s = trim(text);
  if (s == "fill") return Packing::fill;
  if (s == "best-fit" || s.starts_with("best-fit:")) {
    int w = kDefaultBestFitWindow;
    if (s.size() > 8) {
      const std::int64_t v = parse_count(s.substr(9), "packing: best-fit WINDOW", kMaxBestFitWindow);
      w = static_cast<int>(v);
    }
    if (window) *window = w;
    return Packing::best_fit;
  }
  if (s.starts_with("balanced:")) {
    const std::int64_t v = parse_count(s.substr(9), "packing: balanced WINDOW", kMaxDocBatches);
    if (balance_window) *balance_window = static_cast<int>(v);
    return Packing::balanced;
  }
  throw Error(fmt::format("packing: unknown policy '{}'; expected fill, best-fit, best-fit:WINDOW or balanced:WINDOW",
                          text));
}

std::string to_string(Packing p) {
  switch (p) {
    case Packing::fill: return "fill";
    case Packing::best_fit: return "best-fit";
    case Packing::balanced: return "balanced";
  }
  return "?";
}

Workload make_workload(std::string_view documents, std::string_view packing, std::uint64_t seed, int batches) {
  Workload w;
  w.documents = parse_documents(documents);
  w.packing = parse_packing(packing, &w.best_fit_window, &w.balance_window);
  w.seed = seed;
  require_range("doc-batches", batches, 1, kMaxDocBatches);
  w.batches = batches;
  return w;
}

}  // namespace seqpar
