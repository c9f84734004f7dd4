// --global-batch-tokens and --global-batch: the batch of one optimizer step that advise, maxlen and
// sweep fill with data parallelism x micro-batch x gradient accumulation (sim/advisor.hpp).
#include <fmt/format.h>

#include "options.hpp"
#include "seqpar/core/parse.hpp"

namespace seqpar::cli {

void add_batch(CLI::App* app, BatchOptions& o) {
  app->add_option("--global-batch-tokens", o.tokens,
                  "Tokens per optimizer step (e.g. 4M), filled by data parallelism x micro-batch x gradient accumulation");
  app->add_option("--global-batch", o.sequences, "Sequences per optimizer step, filled the same way");
}

std::optional<sim::GlobalBatch> global_batch(const BatchOptions& o) {
  if (o.tokens.empty() && o.sequences.empty()) return std::nullopt;
  sim::GlobalBatch b;
  if (!o.tokens.empty()) b.tokens = parse_count(o.tokens, "global_batch_tokens");
  if (!o.sequences.empty()) b.sequences = parse_count(o.sequences, "global_batch");
  return b;  // sim::check_global_batch checks the range and that only one is given
}

nlohmann::json batch_json(const std::optional<sim::GlobalBatch>& b, std::int64_t seq_len) {
  if (!b) return nullptr;
  nlohmann::json j = {{"tokens", nullptr}, {"sequences", nullptr}};
  if (b->tokens > 0) {
    j["tokens"] = b->tokens;
    if (seq_len > 0 && b->tokens % seq_len == 0) j["sequences"] = b->tokens / seq_len;
  } else {
    j["sequences"] = b->sequences;
    // In floating point: sequences x seq_len may pass 2^63 for counts at their limits.
    if (seq_len > 0) j["tokens"] = double(b->sequences) * double(seq_len);
  }
  return j;
}

std::string batch_text(const std::optional<sim::GlobalBatch>& b, std::int64_t seq_len) {
  if (!b) return "";
  if (b->tokens > 0)
    return seq_len > 0 && b->tokens % seq_len == 0
               ? fmt::format(", global batch {} tokens = {} sequence{} per optimizer step", format_count(b->tokens),
                             b->tokens / seq_len, b->tokens / seq_len == 1 ? "" : "s")
               : fmt::format(", global batch {} tokens per optimizer step", format_count(b->tokens));
  return fmt::format(", global batch {} sequence{} per optimizer step", b->sequences, b->sequences == 1 ? "" : "s");
}

}  // namespace seqpar::cli
