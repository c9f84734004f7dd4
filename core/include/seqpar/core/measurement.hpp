// The measurement document's header and its modes, written by every measuring program (the
// Google Benchmark harness, the comm benchmarks, the training step) and compared by the readers
// (reports). The environment record is the comm layer's, so each writer adds "environment" itself.
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <string_view>

namespace seqpar {

// How a number was obtained: real ranks (one process per device), virtual ranks (all ranks in one
// process on one device), a single-rank proxy (communication over a loopback), or the simulator.
enum class Mode { real_ranks, virtual_ranks, single_rank_proxy, modelled };

inline constexpr std::array<Mode, 4> all_modes{Mode::real_ranks, Mode::virtual_ranks, Mode::single_rank_proxy,
                                               Mode::modelled};

// "real-ranks", "virtual-ranks", "single-rank-proxy", "modelled".
const char* to_string(Mode m);
// One of the names above; anything else throws seqpar::Error naming `field` and the names.
Mode parse_mode(std::string_view text, std::string_view field = "mode");

// run_info (schema and tool version, command, host, time) plus "kind": "measurement", "program",
// "mode" and "device" ("gpu" or "cpu"). The caller adds "environment", "config" and "results".
nlohmann::json measurement_header(int argc, const char* const* argv, std::string_view program, Mode mode,
                                  bool on_gpu);

}  // namespace seqpar
