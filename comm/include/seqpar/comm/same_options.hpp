// The start-up check that every rank of an MPI job runs with the same options. mpirun's MPMD syntax,
// a wrapper script or a per-node environment can hand ranks different arguments; unchecked, that
// ends in a crash inside MPI (different message sizes), a hang (different step counts) or, worst,
// a clean exit with a wrong result (different methods). So every MPI program, right after parsing
// and before any other communication, calls verify_same_options with its parsed options.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace seqpar::comm {

// One rank's options as (name, value) texts, sorted by name.
using OptionValues = std::vector<std::pair<std::string, std::string>>;

// options: a JSON object keyed by option name ("--seq-len") holding the PARSED value after
// defaults (65536, not "64K"), so that spellings of the same value agree. Nested objects become
// "outer.inner" names; other values are compared as their JSON text.
OptionValues option_values(const nlohmann::json& options);
// FNV-1a over the names and values: equal lists, equal digests.
std::uint64_t options_digest(const OptionValues& values);

struct OptionDifference {
  std::string name, root_value, other_value;  // "(not set)" where one side lacks the option
};
// The first option, in name order, whose value differs between rank 0's list and another's.
std::optional<OptionDifference> first_difference(const OptionValues& root,
                                                 const OptionValues& other);

// The message every rank gets when rank `rank` differs from rank 0.
std::string mismatch_message(const OptionDifference& d, int rank);

// Collective over MPI_COMM_WORLD (MPI must be initialised), under the watchdog: every rank
// compares the digest of its options with the others'; on a mismatch all ranks gather the lists
// and every rank throws the same seqpar::Error naming the first differing option with rank 0's
// value and the differing rank's value. A rank that called report_start_error instead is named
// with its error. Without MPI in the build: nothing to compare, returns.
void verify_same_options(const nlohmann::json& options);

// For a rank whose argument checks failed before it reached verify_same_options: takes part in
// the same exchange, so that ranks that did reach it stop with this rank's message rather than
// wait for it. Returns the message rank 0 should print (this one when every rank failed alike).
// Returns `message` unchanged when the exchange already happened or MPI is not running.
std::string report_start_error(const std::string& message);

}  // namespace seqpar::comm
