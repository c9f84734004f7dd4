// The metadata every seqpar JSON document carries: schema version, tool version, command line.
// Device and library versions are added by the measuring programs (comm/environment.hpp).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace seqpar {

// Bumped when a JSON contract (docs/ARCHITECTURE.md, Conventions) changes incompatibly.
inline constexpr int kSchemaVersion = 1;

const char* tool_version();

// Shell-quoted command line of this process.
std::string command_line(int argc, const char* const* argv);

// {"schema_version", "tool_version", "command", "host", "created_utc"}
nlohmann::json run_info(int argc, const char* const* argv);

}  // namespace seqpar
