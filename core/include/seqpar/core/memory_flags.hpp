// The memory-option flags every program takes (--zero, --checkpoint, --offload-checkpoints,
// --offload-optimizer, --tiled-mlp, --tiled-loss, --offload-params): one registration, so `seqpar simulate` and the
// measuring programs (seqpar-train) spell, explain and parse them the same way.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/plan.hpp"

namespace seqpar {

struct MemoryFlags {
  int zero = 1;
  std::string checkpoint = "none";
  bool offload_checkpoints = false, offload_optimizer = false, tiled_mlp = false, tiled_loss = false;
  bool offload_params = false;
  std::vector<CLI::Option*> given;  // to tell "fixed by the user" from "search them"

  bool any_given() const;
  // The options as given; a bad --checkpoint is a seqpar::Error naming the field.
  MemoryOptions options() const;
  std::optional<MemoryOptions> fixed() const;  // set only when a memory flag was given
  // The flags that were given on top of `defaults` (a program whose own defaults differ, such as
  // seqpar-train's ZeRO 0); all of `defaults` when the flags were never registered.
  MemoryOptions options_over(const MemoryOptions& defaults) const;
  // fixed() on top of `defaults`: set only when a memory flag was given.
  std::optional<MemoryOptions> fixed_over(const MemoryOptions& defaults) const;
};

// Registers the memory flags on `app`, each bound to a field of `m` (kept alive by the caller).
void add_memory_flags(CLI::App* app, MemoryFlags& m);

}  // namespace seqpar
