// Checked arithmetic and range checks on sizes users give (GPU counts, degrees, model shapes):
// a product or sum that would not fit its type, or a value outside its accepted range, becomes a
// seqpar::Error naming the field, never a wrapped number that later passes a divisibility rule or
// divides by zero.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "seqpar/core/error.hpp"

namespace seqpar {

// The overflow's error, out of line: the checks inline to an add or multiply and a branch (the
// simulator's parameter counts run through them millions of times in a search).
template <typename T>
[[noreturn, gnu::cold, gnu::noinline]] void throw_overflow(std::string_view field, T a, char op, T b) {
  throw Error(fmt::format("{}: {} {} {} does not fit in {} bits", field, a, op, b, 8 * sizeof(T)));
}

// a x b, or seqpar::Error "field: a x b does not fit in N bits".
template <typename T>
T checked_mul(T a, T b, std::string_view field) {
  static_assert(std::is_integral_v<T>);
  T out{};
  if (__builtin_mul_overflow(a, b, &out)) [[unlikely]]
    throw_overflow(field, a, 'x', b);
  return out;
}

// a + b, or seqpar::Error "field: a + b does not fit in N bits".
template <typename T>
T checked_add(T a, T b, std::string_view field) {
  static_assert(std::is_integral_v<T>);
  T out{};
  if (__builtin_add_overflow(a, b, &out)) [[unlikely]]
    throw_overflow(field, a, '+', b);
  return out;
}

// The message for a value outside [lo, hi], naming the field and the bound it broke; nullopt when
// the value is in range. "must be at least lo" below, "is above the limit of hi" above.
inline std::optional<std::string> range_error(std::string_view field, std::int64_t value, std::int64_t lo,
                                              std::int64_t hi) {
  if (value < lo) return fmt::format("{}: {} must be at least {}", field, value, lo);
  if (value > hi) return fmt::format("{}: {} is above the limit of {}", field, value, hi);
  return std::nullopt;
}

// Throws range_error's message as seqpar::Error.
inline void require_range(std::string_view field, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  if (auto e = range_error(field, value, lo, hi)) throw Error(*e);
}

}  // namespace seqpar
