// Parsing of the human forms users type: sizes with K/M/G suffixes and comma-separated lists.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar {

// "131072", "128K", "1M", "4G" -> count. Suffixes are binary (K = 1024), as sequence lengths
// and message sizes are quoted in this field. `field` names the option in the error message.
std::int64_t parse_count(std::string_view text, std::string_view field);

// "a,b,c" -> {"a","b","c"}; empty items are an error naming `field`.
std::vector<std::string> split_list(std::string_view text, std::string_view field);

// Inverse of parse_count for display: 131072 -> "128K", 1000 -> "1000".
std::string format_count(std::int64_t n);

}  // namespace seqpar
