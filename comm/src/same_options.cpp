// The pure half of the start-up option check: option lists, digests and the first difference.
// The MPI exchange is in same_options_mpi.cpp (no_mpi.cpp without MPI).
#include <fmt/format.h>

#include <map>

#include "seqpar/comm/same_options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

namespace seqpar::comm {
namespace {

void flatten_into(const nlohmann::json& j, const std::string& prefix, OptionValues& out) {
  for (const auto& [key, value] : j.items()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object())
      flatten_into(value, name, out);
    else
      out.emplace_back(name, dump_json(value, -1));  // argv is bytes: invalid UTF-8 replaced, not thrown on
  }
}

}  // namespace

OptionValues option_values(const nlohmann::json& options) {
  if (!options.is_object())
    throw Error("verify_same_options: the options must be a JSON object keyed by option name");
  OptionValues out;
  flatten_into(options, "", out);  // nlohmann::json objects iterate in key order
  return out;
}

std::uint64_t options_digest(const OptionValues& values) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // separator: ("ab","c") != ("a","bc")
  };
  for (const auto& [name, value] : values) {
    mix(name);
    mix(value);
  }
  return h;
}

std::optional<OptionDifference> first_difference(const OptionValues& root,
                                                 const OptionValues& other) {
  const std::map<std::string, std::string> a(root.begin(), root.end()), b(other.begin(), other.end());
  std::map<std::string, std::pair<std::string, std::string>> all;
  for (const auto& [k, v] : a) all[k] = {v, "(not set)"};
  for (const auto& [k, v] : b) {
    auto it = all.find(k);
    if (it == all.end())
      all[k] = {"(not set)", v};
    else
      it->second.second = v;
  }
  for (const auto& [name, values] : all)
    if (values.first != values.second) return OptionDifference{name, values.first, values.second};
  return std::nullopt;
}

std::string mismatch_message(const OptionDifference& d, int rank) {
  return fmt::format(
      "the ranks were started with different options: {} is {} on rank 0 but {} on rank {}; "
      "start every rank of the job with the same options",
      d.name, d.root_value, d.other_value, rank);
}

}  // namespace seqpar::comm
