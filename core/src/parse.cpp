#include "seqpar/core/parse.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "seqpar/core/error.hpp"

namespace seqpar {

std::int64_t parse_count(std::string_view text, std::string_view field, std::int64_t max) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) throw Error(fmt::format("{}: empty value; expected a count such as 131072, 128K or 1M", field));
  std::int64_t mult = 1;
  switch (std::toupper(static_cast<unsigned char>(s.back()))) {
    case 'K': mult = std::int64_t{1} << 10; break;
    case 'M': mult = std::int64_t{1} << 20; break;
    case 'G': mult = std::int64_t{1} << 30; break;
    case 'T': mult = std::int64_t{1} << 40; break;
    default: break;
  }
  if (mult != 1) s.remove_suffix(1);
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  const bool digits = ptr == s.data() + s.size();
  const auto too_large = [&](std::string_view count) {
    if (max == std::numeric_limits<std::int64_t>::max()) return Error(fmt::format("{}: '{}' is too large", field, text));
    return Error(fmt::format("{}: {} is above the limit of {}", field, count, max));
  };
  // Digits beyond 64 bits: above any limit, said so rather than "not a count".
  if (ec == std::errc::result_out_of_range && digits && s.front() != '-') throw too_large(text);
  if (ec != std::errc{} || !digits)
    throw Error(fmt::format("{}: '{}' is not a count; expected digits with an optional K, M or G suffix", field, text));
  if (v <= 0) throw Error(fmt::format("{}: {} must be positive", field, text));
  if (v > std::numeric_limits<std::int64_t>::max() / mult) throw too_large(text);
  if (v * mult > max) throw too_large(std::to_string(v * mult));
  return v * mult;
}

void normalize_count_text(std::string& text, std::string_view field, std::int64_t max) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos || text[first] == '-' || text.find_first_not_of("0 \t") == std::string::npos) return;
  text = std::to_string(parse_count(text, field, max));
}

std::vector<std::string> split_list(std::string_view text, std::string_view field) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (item.empty()) throw Error(fmt::format("{}: empty item in list '{}'", field, text));
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string format_count(std::int64_t n) {
  static constexpr const char* kSuffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && n != 0 && n % 1024 == 0) {
    n /= 1024;
    ++i;
  }
  return fmt::format("{}{}", n, kSuffix[i]);
}

std::string format_rate(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v); }

std::string format_number(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e18) return fmt::format("{:.0f}", x);
  return fmt::format("{:g}", x);
}

}  // namespace seqpar
