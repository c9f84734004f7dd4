#include "seqpar/core/memory_flags.hpp"

namespace seqpar {

bool MemoryFlags::any_given() const {
  for (const CLI::Option* o : given)
    if (o->count() > 0) return true;
  return false;
}

MemoryOptions MemoryFlags::options() const {
  MemoryOptions m;
  m.zero = zero;
  m.checkpoint = parse_checkpoint(checkpoint);
  m.offload_checkpoints = offload_checkpoints;
  m.offload_optimizer = offload_optimizer;
  m.tiled_mlp = tiled_mlp;
  m.tiled_loss = tiled_loss;
  m.offload_params = offload_params;
  return m;
}

std::optional<MemoryOptions> MemoryFlags::fixed() const {
  if (!any_given()) return std::nullopt;
  return options();
}

MemoryOptions MemoryFlags::options_over(const MemoryOptions& defaults) const {
  MemoryOptions m = defaults;
  if (given.size() != 7) return m;  // not registered
  const MemoryOptions f = options();
  // In add_memory_flags' order.
  if (given[0]->count() > 0) m.zero = f.zero;
  if (given[1]->count() > 0) m.checkpoint = f.checkpoint;
  if (given[2]->count() > 0) m.offload_checkpoints = f.offload_checkpoints;
  if (given[3]->count() > 0) m.offload_optimizer = f.offload_optimizer;
  if (given[4]->count() > 0) m.tiled_mlp = f.tiled_mlp;
  if (given[5]->count() > 0) m.tiled_loss = f.tiled_loss;
  if (given[6]->count() > 0) m.offload_params = f.offload_params;
  return m;
}

std::optional<MemoryOptions> MemoryFlags::fixed_over(const MemoryOptions& defaults) const {
  if (!any_given()) return std::nullopt;
  return options_over(defaults);
}

void add_memory_flags(CLI::App* app, MemoryFlags& m) {
  m.given = {
      app->add_option("--zero", m.zero, "ZeRO stage 0..3 over the data x sequence parallel group (default 1, or the framework's lowest where it runs no ZeRO-1)"),
      app->add_option("--checkpoint", m.checkpoint, "Activation checkpointing: none | selective | full (default none)"),
      app->add_flag("--offload-checkpoints", m.offload_checkpoints, "Keep full-checkpoint layer inputs in host memory"),
      app->add_flag("--offload-optimizer", m.offload_optimizer, "Optimizer states and step on the host"),
      app->add_flag("--tiled-mlp", m.tiled_mlp, "Compute the MLP in sequence tiles (ALST)"),
      app->add_flag("--tiled-loss", m.tiled_loss, "Compute logits and loss in sequence tiles (ALST)"),
      app->add_flag("--offload-params", m.offload_params,
                    "Keep ZeRO-3's parameter shards in host memory, gathered layer by layer (needs --zero 3)"),
  };
}

}  // namespace seqpar
