// sim/published/runs.json, embedded at build time (see sim/CMakeLists.txt).
#pragma once

namespace seqpar::sim::detail {
const char* published_runs_text();
}
