// The human-readable "rejected:" list of advise and maxlen, bounded as the ranked table is: a
// search at thousands of GPUs rejects thousands of plans, most for a handful of reasons, so the
// plans are grouped by their reason (in the order the search met them) and at most `limit`
// reasons are printed; the --json output keeps every rejected plan.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "seqpar/sim/advisor.hpp"

namespace CLI {
class App;
}

namespace seqpar::cli {

// The list's text, empty when nothing was rejected: a "rejected:" line, one line per reason ("plan:
// reason", or "plan and N other plans: reason" where several share it), and where more reasons
// than `limit` exist a last line counting the rest and naming `more_flag` and --json.
std::string rejected_text(const std::vector<sim::Rejection>& rejected, std::size_t limit,
                          const std::string& more_flag);

// --rejected N: the reasons rejected_text prints.
void add_rejected_limit(CLI::App* cmd, int& limit);

}  // namespace seqpar::cli
