// Parsing of the human forms users type: sizes with K/M/G suffixes and comma-separated lists.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar {

// "131072", "128K", "1M", "4G" -> count. Suffixes are binary (K = 1024), as sequence lengths
// and message sizes are quoted in this field. `field` names the option in the error message. A
// count above `max` (digits beyond 64 bits included) is "<field>: <count> is above the limit of <max>".
std::int64_t parse_count(std::string_view text, std::string_view field,
                         std::int64_t max = std::numeric_limits<std::int64_t>::max());

// A count flag's text before its range check, rewritten in place as the count parse_count reads
// ("128K" -> "131072"); throws parse_count's errors (the limit named). Empty, negative and zero
// text is left as given, for the range check that names those. What every program's count
// validators (cli's at_most, the workload flags) run.
void normalize_count_text(std::string& text, std::string_view field, std::int64_t max);

// "a,b,c" -> {"a","b","c"}; empty items are an error naming `field`.
std::vector<std::string> split_list(std::string_view text, std::string_view field);

// Inverse of parse_count for display: 131072 -> "128K", 1000 -> "1000".
std::string format_count(std::int64_t n);

// A rate (tokens/s per GPU) for a table: whole from 100 up (5123), else 3 significant digits
// (0.00186, not "0": a plan a million GPUs run at a token per ten minutes is not free of work).
std::string format_rate(double v);

// A number read from a user's file, for a message: a whole number as its digits (5000000, not
// 5e+06), anything else (8.5, 1e+30, inf) as %g.
std::string format_number(double x);

}  // namespace seqpar
