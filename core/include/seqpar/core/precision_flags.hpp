// The precision flags (--fp8 PARTS, --fp8-recipe, and for the searches --allow-fp8): one
// registration, so simulate, advise, maxlen and sweep spell, explain and parse them the same way.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "seqpar/core/precision.hpp"

namespace seqpar {

struct PrecisionFlags {
  std::string fp8 = "none";
  std::string recipe = "delayed";
  bool allow_fp8 = false;  // searches only: try FP8 plans beside the bf16 ones
  CLI::Option* fp8_option = nullptr;
  CLI::Option* recipe_option = nullptr;

  // The precision as given; a bad part or recipe is a seqpar::Error naming the flag. A recipe
  // without --fp8 is refused: it would change nothing.
  Precision precision() const;
  // What a search tries: the given precision alone when --fp8 was given; with --allow-fp8 bf16 and
  // every FP8 set among `fp8_candidates` (the framework's own, sim's fp8_candidates); else bf16.
  std::vector<Precision> searched(const std::vector<Precision>& fp8_candidates) const;
};

// Registers --fp8 and --fp8-recipe on `app`, and --allow-fp8 where `search` is true.
void add_precision_flags(CLI::App* app, PrecisionFlags& f, bool search);

}  // namespace seqpar
