#include "seqpar/train/memory.hpp"

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
  }
  return "unknown";
}

void MemoryTracker::on_alloc(MemCategory c, std::int64_t bytes) {
  current_[idx(c)] += bytes;
  current_total_ += bytes;
  peak_[idx(c)] = std::max(peak_[idx(c)], current_[idx(c)]);
  if (current_total_ > peak_total_) {
    peak_total_ = current_total_;
    at_peak_ = current_;
  }
}

void MemoryTracker::on_free(MemCategory c, std::int64_t bytes) {
  current_[idx(c)] -= bytes;
  current_total_ -= bytes;
}

void MemoryTracker::reset_peak() {
  peak_ = current_;
  at_peak_ = current_;
  peak_total_ = current_total_;
}

nlohmann::json MemoryTracker::parts_at_peak_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kMemCategories; ++i)
    j[std::string(to_string(static_cast<MemCategory>(i))) + "_bytes"] = at_peak_[i];
  return j;
}

}  // namespace seqpar::train
