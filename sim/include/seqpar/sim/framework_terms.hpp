// The framework-level terms of a system profile (hardware.hpp: FrameworkTerms), as the preset
// loader reads them, `seqpar calibrate` writes them and the cost models apply them. JSON: an
// optional "framework" object of a system preset, each field a number or {"value", "source"}:
//   "framework": {"profile": "hf-transformers", "memory_bound_efficiency": 0.62,
//                 "step_overhead_s": 0.031, "reserve_bytes": 2.1e9, "bytes_per_token": 0, "source": "..."}
// "profile" names the framework profile (framework.hpp) the terms were fitted over; the simulator
// uses it for this system unless --framework names another. A missing figure keeps its default
// (efficiency 1, the others 0), which leaves predictions as the inventory gives them. Memory terms
// are never negative.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "seqpar/sim/hardware.hpp"

namespace seqpar::sim {

// Reads the optional "framework" object of a system document into `s.framework`; seqpar::Error
// naming `what`, the field and its bounds for a malformed one.
void read_framework_terms(const nlohmann::json& system, std::string_view what, System& s);

nlohmann::json framework_terms_json(const FrameworkTerms& f, const std::string& profile, const std::string& source);

// Time of memory-bound work (elementwise, optimizer) of `bytes` at the framework's efficiency.
double framework_memory_bound_time(const System& s, double bytes);

// Memory the framework keeps beyond the modelled parts on a rank holding `local_tokens` tokens.
double framework_reserved_bytes(const FrameworkTerms& f, double local_tokens);

}  // namespace seqpar::sim
