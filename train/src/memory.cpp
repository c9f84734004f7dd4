#include "seqpar/train/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace seqpar::train {

std::string_view to_string(MemCategory c) {
  switch (c) {
    case MemCategory::parameters: return "parameters";
    case MemCategory::gradients: return "gradients";
    case MemCategory::optimizer_states: return "optimizer_states";
    case MemCategory::activations: return "activations";
    case MemCategory::attention_buffers: return "attention_buffers";
    case MemCategory::logits: return "logits";
    case MemCategory::working: return "working";
    case MemCategory::checkpoints: return "checkpoints";
    case MemCategory::host_offload: return "host_offload";
  }
  return "unknown";
}

void MemoryTracker::on_alloc(MemCategory c, std::int64_t bytes) {
  current_[idx(c)] += bytes;
  peak_[idx(c)] = std::max(peak_[idx(c)], current_[idx(c)]);
  if (!on_device(c)) return;  // host bytes: their own peak only
  current_total_ += bytes;
  if (current_total_ > peak_total_) {
    peak_total_ = current_total_;
    at_peak_ = current_;
  }
}

void MemoryTracker::on_free(MemCategory c, std::int64_t bytes) {
  current_[idx(c)] -= bytes;
  if (on_device(c)) current_total_ -= bytes;
}

void MemoryTracker::reset_peak() {
  peak_ = current_;
  at_peak_ = current_;
  peak_total_ = current_total_;
}

nlohmann::json MemoryTracker::parts_at_peak_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kMemCategories; ++i) {
    const auto c = static_cast<MemCategory>(i);
    j[std::string(to_string(c)) + "_bytes"] = on_device(c) ? at_peak_[i] : peak_[i];
  }
  return j;
}

std::string parts_table(const MemoryTracker& m) {
  std::string out = fmt::format("# memory at peak: {:.2f} MiB =", static_cast<double>(m.peak_bytes()) / (1 << 20));
  for (int i = 0; i < kMemCategories; ++i) {
    const auto c = static_cast<MemCategory>(i);
    if (!on_device(c)) continue;
    out += fmt::format(" {} {:.2f}", to_string(c), static_cast<double>(m.at_peak_bytes(c)) / (1 << 20));
  }
  return out + fmt::format("; host_offload (host memory, its own peak) {:.2f} MiB\n",
                           static_cast<double>(m.peak_bytes(MemCategory::host_offload)) / (1 << 20));
}

}  // namespace seqpar::train
