// What of a training step runs in FP8, and how its scales are chosen: part of the plan, so a
// prediction, an advice and a measurement name the same precision. bf16 is the default (no part
// in FP8). Defined once here; the simulator's FP8 cost table (sim/fp8_cost.hpp) reads it.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace seqpar {

// The parts that can run in FP8 (flag and JSON spelling in quotes):
//   gemm:      the transformer layers' linear layers (QKV, output projection, MLP), forward and
//              backward (Transformer Engine's fp8_autocast, torchao's Float8Linear); the LM head
//              stays bf16, as both leave it;
//   attention: the attention kernel (Transformer Engine's fp8_dpa: cuDNN's FP8 SDPA; FlashAttention-3's FP8 forward);
//   weights:   the parameters' all-gather (Megatron's --fp8-param-gather, torchao's
//              enable_fsdp_float8_all_gather): half the bytes of a bf16 gather;
//   comm:      the activation collectives of sequence parallelism (the forward's all-to-alls and K,V exchange).
enum class Fp8Part : std::uint8_t { gemm = 1, attention = 2, weights = 4, comm = 8 };
inline constexpr std::array<Fp8Part, 4> kAllFp8Parts = {Fp8Part::gemm, Fp8Part::attention, Fp8Part::weights,
                                                        Fp8Part::comm};
// How the FP8 scales are chosen (Transformer Engine's recipes; torchao's tensorwise and rowwise):
//   delayed: per tensor, from an amax history of earlier steps (TE's DelayedScaling): the amax
//            is reduced inside the cast, no extra pass;
//   current: per tensor, from this tensor's own amax (TE's Float8CurrentScaling, torchao's
//            tensorwise): one more read of the tensor before the cast;
//   rowwise: one scale per row (torchao's rowwise): the transposed operand is quantized on its own;
//   mxfp8:   a scale per 32 elements (MXFP8, Blackwell tensor cores only).
enum class Fp8Recipe { delayed, current, rowwise, mxfp8 };

struct Precision {
  std::uint8_t fp8 = 0;  // Fp8Part bits
  Fp8Recipe recipe = Fp8Recipe::delayed;
  bool has(Fp8Part part) const { return (fp8 & static_cast<std::uint8_t>(part)) != 0; }
  bool any_fp8() const { return fp8 != 0; }
  bool operator==(const Precision&) const = default;
};

std::string_view to_string(Fp8Part p);
std::string_view to_string(Fp8Recipe r);
// "none" for bf16, else the parts in kAllFp8Parts order joined by commas ("gemm,attention").
std::string fp8_parts_text(const Precision& p);
// "gemm,attention" (any order, no repeats), "none" or "" for bf16, "all" for every part; throws
// seqpar::Error naming `field` and the accepted parts.
std::uint8_t parse_fp8_parts(std::string_view text, std::string_view field = "--fp8");
Fp8Recipe parse_fp8_recipe(std::string_view text, std::string_view field = "--fp8-recipe");

}  // namespace seqpar
