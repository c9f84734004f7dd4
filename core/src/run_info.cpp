#include "seqpar/core/run_info.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <string_view>

namespace seqpar {

std::string command_line(int argc, const char* const* argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    if (i) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == a.npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

nlohmann::json run_info(int argc, const char* const* argv) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {{"schema_version", kSchemaVersion},
          {"tool_version", tool_version()},
          {"command", command_line(argc, argv)},
          {"host", host},
          {"created_utc", stamp}};
}

}  // namespace seqpar
