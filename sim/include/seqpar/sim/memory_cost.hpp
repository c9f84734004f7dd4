// Peak GPU memory of one rank, over the framework's inventory (framework.hpp): its states per
// parameter (ZeRO 0-3 over the data x sequence parallel group, offload), what each layer stores
// for its backward, and the transients of the phase where the peak falls: a layer's backward
// (recompute, MLP, attention with the method's buffers, QKV) at the top or the bottom layer, the
// loss (head, final norm), or the optimizer step.
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/sim/framework.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/plan.hpp"

namespace seqpar::sim {

// The parts of the peak, in the categories seqpar-train reports (train/memory.hpp), plus the
// reserve the device and the allocator hold beyond the tracked tensors.
struct MemoryBreakdown {
  double parameters = 0, gradients = 0, optimizer_states = 0, activations = 0, checkpoints = 0;
  double attention_buffers = 0, working = 0, logits = 0, reserved = 0;
  double tracked() const {
    return parameters + gradients + optimizer_states + activations + checkpoints + attention_buffers + working +
           logits;
  }
  double total() const { return tracked() + reserved; }
};

// One named term of the peak: a state, a stored tensor, a transient, a buffer.
struct MemoryTerm {
  std::string name;
  MemPart part;
  double bytes;
};

struct MemoryEstimate {
  MemoryBreakdown peak;            // the parts alive at the peak; they add up to peak.total()
  std::string_view peak_phase;     // "layer-backward", "loss" or "optimizer"
  std::string_view peak_subphase;  // e.g. "attention" (layer) or "head" (loss)
  double layer_phase_bytes = 0;    // total at each phase too, for the report
  double loss_phase_bytes = 0;
  double optimizer_phase_bytes = 0;
  double host_bytes = 0;           // offloaded checkpoints and optimizer states, per GPU
  double device_checkpoint_bytes = 0;  // full checkpointing's layer inputs on the GPU at most
  double loss_logits_bytes = 0;    // the logits the loss phase holds, peak or not
  int peak_stage = 0;              // the pipeline stage whose peak this is (0 without stages)
  std::vector<MemoryTerm> terms;   // what the peak is made of, term by term (the reserve aside); MemoryDetail::terms only
  double device_reserve_bytes = 0;  // in peak.reserved: the GPU's own (context, library workspaces)
  double fragmentation_bytes = 0;   // in peak.reserved: what the allocator caches beyond its tensors
  // What the framework's allocator hands out at the peak: the tracked parts and the framework's
  // reserve, without the device's and the allocator's cache. A measured step's peak_memory_bytes
  // is this (PyTorch's max_memory_allocated, seqpar-train's tracked peak); whether a plan fits is
  // decided by peak.total().
  double allocated_bytes() const { return peak.total() - device_reserve_bytes - fragmentation_bytes; }
};

// What one layer stores for its backward per local token under a checkpoint mode (the framework's
// "layer" inventory), in values of two bytes and of four (bf16 and fp32 in a bf16 step).
struct StoredValues {
  double bf16 = 0, fp32 = 0;
};
StoredValues stored_values_per_token(const Model& m, const System& s, const Plan& p, Checkpoint mode);
double stored_bytes_per_token(const Model& m, const System& s, const Plan& p, Checkpoint mode);

// Tokens in one tile of tiled MLP and tiled loss: ALST's tile of the local sequence
// (core/tiling.hpp, the rule the training step runs) times the micro-batch.
double alst_tile_rows(const Model& m, const Plan& p);

// The attention kernel's backward workspace for one call (one sequence's block of queries):
// (a x head_dim + b) fp32 values per query row and local head, the GPU's figures for its attention
// kernel (hardware.hpp: seqpar's own kernel and FlashAttention-2 keep an fp32 dQ accumulator and a
// row sum, a = b = 1; cuDNN's, as its workspace query reports, a = 2), plus dK and dV per query
// head where the kernel expands GQA gradients.
double attention_kernel_workspace_bytes(const Model& m, const System& s, const Plan& p);
// The forward's workspace for one call where the plan has blocks that are not a causal diagonal
// from position 0 (ring steps, all-gather prefixes, non-causal models): per_head_dim x head_dim fp32
// values per query row and local head (cuDNN; 0 for kernels that need none).
double attention_forward_workspace_bytes(const Model& m, const System& s, const Plan& p);
// The SP method's attention-backward buffers on the rank that holds the most (the ring's, the
// all-to-alls', the all-gather's; the framework's own ring buffers where its profile gives them),
// with the kernel's workspace where the framework allocates it per call: the memory report's
// "SP method's attention buffers".
double attention_method_buffer_bytes(const Model& m, const System& s, const Plan& p);

// What estimate_memory records beyond the parts and phases: the named terms of the peak (the
// `simulate` table and `memory_terms`), or the sums alone (the planner's search: no list built).
enum class MemoryDetail { sums, terms };
// With pipeline stages (Plan::pp), the peak stage's estimate (pipeline_cost.hpp: its layers,
// parameters and micro-batches in flight), its index in peak_stage.
MemoryEstimate estimate_memory(const Model& m, const System& s, const Plan& p, MemoryDetail detail = MemoryDetail::terms);
// One stage's (0 = first; the whole model's without stages).
MemoryEstimate estimate_stage_memory(const Model& m, const System& s, const Plan& p, int stage,
                                     MemoryDetail detail = MemoryDetail::terms);
// Every stage's peak, first to last (one entry without stages), for the JSON and the table.
struct StageMemory {
  int stage = 0;
  double in_flight = 1;  // micro-batches' worth of stored activations held at its peak
  double peak_bytes = 0;
  std::string_view phase, subphase;
};
std::vector<StageMemory> stage_memories(const Model& m, const System& s, const Plan& p);

// What the width symbols (framework.hpp: Width) stand for on one rank of this plan, in values per
// token of the rank's SP shard: the TP shares of the per-head and per-column widths, and the
// hidden width's (1/tp with sequence parallelism, whole without: Framework::tp_sequence_parallel).
std::array<double, kWidths> rank_widths(const Model& m, const Framework& f, const Plan& p);

}  // namespace seqpar::sim
