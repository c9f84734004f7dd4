#include "seqpar/core/measurement.hpp"

#include <fmt/format.h>

#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/core/run_info.hpp"

namespace seqpar {

const char* to_string(Mode m) {
  switch (m) {
    case Mode::real_ranks: return "real-ranks";
    case Mode::virtual_ranks: return "virtual-ranks";
    case Mode::single_rank_proxy: return "single-rank-proxy";
    case Mode::modelled: return "modelled";
  }
  return "?";
}

Mode parse_mode(std::string_view text, std::string_view field) {
  for (Mode m : all_modes)
    if (text == to_string(m)) return m;
  throw Error(fmt::format("{}: unknown mode '{}'; expected real-ranks, virtual-ranks, single-rank-proxy or modelled",
                          field, text));
}

nlohmann::json measurement_header(int argc, const char* const* argv, std::string_view program, Mode mode,
                                  bool on_gpu) {
  nlohmann::json doc = run_info(argc, argv);
  doc["kind"] = "measurement";
  doc["program"] = std::string(program);
  doc["mode"] = to_string(mode);
  doc["device"] = on_gpu ? "gpu" : "cpu";
  return doc;
}

}  // namespace seqpar
