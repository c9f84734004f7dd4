// Which attention engine runs a program's attention: seqpar's own flash kernels (flash_attention.cuh,
// portable, a kernel project of their own) or cuDNN's fused flash attention (cudnn_attention.hpp,
// what users train with). One vocabulary for every program that takes --attention (DESIGN.md
// section 7); the rules are pure functions of the availability, so they are host-testable.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace seqpar::kernels {

enum class AttentionEngine { seqpar, cudnn };

// "seqpar" or "cudnn": the spelling of the flag and of every result's "attention_engine" field.
const char* to_string(AttentionEngine e);

// Parses a flag value; throws seqpar::Error naming `flag`, the value and the accepted values.
AttentionEngine parse_attention_engine(std::string_view text, std::string_view flag);

// Whether the cuDNN engine can run here, and why not when it cannot (cudnn_attention_available).
// seqpar's own kernels run wherever a CUDA device does, so they need no entry.
struct EngineAvailability {
  bool cudnn = false;
  std::string cudnn_why;  // empty when cudnn is true
};

// The default: cudnn where it is available, else seqpar (DESIGN.md section 7: users measure
// with the kernels they train with; seqpar's kernels are the portable fallback).
AttentionEngine default_attention_engine(const EngineAvailability& a);

// The engine a run uses: the requested one, or the default when none was requested. Asking for
// cudnn where it is absent throws seqpar::Error naming `flag` and why it is absent.
AttentionEngine choose_attention_engine(std::optional<AttentionEngine> requested, const EngineAvailability& a,
                                        std::string_view flag);

// This process's availability: cudnn_attention_available on the current device. Defined in the
// CUDA kernels library (seqpar_kernels), so only CUDA builds may call it.
EngineAvailability attention_engine_availability();

}  // namespace seqpar::kernels
