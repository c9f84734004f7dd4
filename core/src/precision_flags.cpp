#include "seqpar/core/precision_flags.hpp"

#include "seqpar/core/error.hpp"

namespace seqpar {

Precision PrecisionFlags::precision() const {
  Precision p;
  p.fp8 = parse_fp8_parts(fp8, "--fp8");
  p.recipe = parse_fp8_recipe(recipe, "--fp8-recipe");
  if (!p.any_fp8() && recipe_option && recipe_option->count() > 0)
    throw Error("--fp8-recipe: given without --fp8 (name what runs in FP8, e.g. --fp8 gemm)");
  return p;
}

std::vector<Precision> PrecisionFlags::searched(const std::vector<Precision>& fp8_candidates) const {
  const Precision given = precision();
  if (allow_fp8 && given.any_fp8())
    throw Error("--allow-fp8: given with --fp8 (--fp8 fixes the precision; --allow-fp8 searches it)");
  if (!allow_fp8) return {given};
  std::vector<Precision> out{Precision{}};
  for (Precision p : fp8_candidates) {
    if (recipe_option && recipe_option->count() > 0) p.recipe = given.recipe;
    out.push_back(p);
  }
  return out;
}

void add_precision_flags(CLI::App* app, PrecisionFlags& f, bool search) {
  f.fp8_option = app->add_option(
      "--fp8", f.fp8,
      "What runs in FP8: gemm (the layers' linear layers), attention, weights (the parameters' all-gather), comm "
      "(sequence parallelism's activation collectives), joined by commas; all; none (default: bf16 throughout)");
  f.recipe_option = app->add_option(
      "--fp8-recipe", f.recipe,
      "FP8 scaling: delayed (per tensor, amax history; default) | current (per tensor, this step's amax) | rowwise | "
      "mxfp8 (32-element blocks, Blackwell)");
  if (search)
    app->add_flag("--allow-fp8", f.allow_fp8,
                  "Search FP8 plans beside bf16 ones: the FP8 parts the framework runs (its profile's \"fp8\")");
}

}  // namespace seqpar
