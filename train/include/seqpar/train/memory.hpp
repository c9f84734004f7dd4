// Counting allocator: every buffer of the training step is charged to a category, so per-rank
// current and peak bytes can be set beside the simulator's memory parts.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace seqpar::train {

// The simulator's memory parts (docs/ARCHITECTURE.md, Conventions: Memory; `seqpar simulate --json` "memory"):
// attention_buffers are the all-to-all buffers, the ring's K,V (and dK,dV) buffers and the
// attention scratch; working is every other temporary of the step. checkpoints are the layer inputs
// full checkpointing keeps on the device (the simulator counts them among its activations);
// host_offload is host memory (offloaded checkpoints): counted in its own part and never in the
// device total or peak.
enum class MemCategory {
  parameters, gradients, optimizer_states, activations, attention_buffers, logits, working,
  checkpoints, host_offload
};
inline constexpr int kMemCategories = 9;
// Whether a category's bytes live in device memory (all but host_offload).
inline constexpr bool on_device(MemCategory c) { return c != MemCategory::host_offload; }
std::string_view to_string(MemCategory c);

class MemoryTracker {
 public:
  void on_alloc(MemCategory c, std::int64_t bytes);
  void on_free(MemCategory c, std::int64_t bytes);

  std::int64_t current_bytes() const { return current_total_; }
  std::int64_t peak_bytes() const { return peak_total_; }
  std::int64_t current_bytes(MemCategory c) const { return current_[idx(c)]; }
  std::int64_t peak_bytes(MemCategory c) const { return peak_[idx(c)]; }
  // Each category's bytes at the moment of the overall peak: these parts add up to peak_bytes().
  std::int64_t at_peak_bytes(MemCategory c) const { return at_peak_[idx(c)]; }

  // Starts a new peak window from the bytes held now (for example after set-up, per step).
  void reset_peak();

  // {"parameters_bytes": ..., ..., "checkpoints_bytes": ...}: the device parts at the overall
  // peak (they add up to peak_bytes()), and "host_offload_bytes": the peak of host memory.
  nlohmann::json parts_at_peak_json() const;

 private:
  static int idx(MemCategory c) { return static_cast<int>(c); }
  std::array<std::int64_t, kMemCategories> current_{}, peak_{}, at_peak_{};
  std::int64_t current_total_ = 0, peak_total_ = 0;
};

// The parts at the peak as printed lines: "# memory at peak: <part> <MiB> ..." (host_offload:
// its own peak, not part of the device total).
std::string parts_table(const MemoryTracker& m);

}  // namespace seqpar::train
