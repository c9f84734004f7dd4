#include "seqpar/train/size_limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/tiling.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::train {
namespace {

using I = std::int64_t;

// The names users know the sizes by (seqpar-train's flags).
constexpr const char* kTokens = "--micro-batch x --seq-len / sp";
constexpr const char* kParams = "--layers, --hidden, --heads x --head-dim, --kv-heads, --ffn-hidden, --vocab";
constexpr std::int64_t kBytesPerParam = 16;  // fp32 value, gradient, AdamW m and v

I mul(I a, I b, const char* fields) { return checked_mul<I>(a, b, fields); }
I add(I a, I b, const char* fields) { return checked_add<I>(a, b, fields); }

void require_index(const char* fields, I value) { require_range(fields, value, 1, kMaxIndex); }

// Tokens this rank holds: micro_batch sequences of seq_len / sp tokens.
I rank_tokens(const TrainSetup& s) {
  const I sp = mul(s.ulysses, s.ring, "--ulysses-degree x --ring-degree");
  if (sp < 1) throw Error(fmt::format("sp = {}: must be >= 1", sp));
  return mul(s.micro_batch, s.seq_len / sp, kTokens);
}

std::string gib(I bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

I StepFootprint::parameters_bytes() const {
  return add(add(embedding_bytes, attention_weight_bytes, kParams), mlp_weight_bytes, kParams);
}

I StepFootprint::total_bytes() const {
  const char* f = "bytes of the step";
  return add(add(parameters_bytes(), activations_bytes, f), add(logits_bytes, working_bytes, f), f);
}

StepFootprint estimate_footprint(const TrainSetup& s) {
  const ModelConfig& m = s.model;
  const I t = rank_tokens(s);
  const I c = m.hidden, f = m.ffn, v = m.vocab;
  const I qd = mul(m.heads, m.head_dim, "--heads x --head-dim");
  // Ulysses replicates KV heads up to U when U % kv_heads == 0: that many heads travel and are kept.
  const I kvd = mul(std::max<I>(m.kv_heads, s.ulysses), m.head_dim, "--kv-heads x --head-dim");

  StepFootprint fp;
  m.total_params();  // throws, naming the sizes, when the count does not fit in 64 bits
  fp.embedding_bytes = add(mul(kBytesPerParam, m.embedding_params(), kParams), mul(kBytesPerParam, c, kParams), kParams);
  fp.attention_weight_bytes = mul(kBytesPerParam, mul(m.layers, m.attention_params_per_layer(), kParams), kParams);
  fp.mlp_weight_bytes = mul(kBytesPerParam, mul(m.layers, m.mlp_params_per_layer(), kParams), kParams);

  // Saved per layer: x_in, h1, x_mid, h2 (c), two rstd, gate, up, act (f), q, o and the
  // Ulysses output (qd), k, v (kvd), lse (heads).
  const char* acts = "--layers x --micro-batch x --seq-len / sp x (--hidden, --ffn-hidden, --heads x --head-dim)";
  I width = add(add(mul(4, c, acts), 2, acts), mul(3, f, acts), acts);
  width = add(width, add(mul(3, qd, acts), add(mul(2, kvd, acts), m.heads, acts), acts), acts);
  // Full checkpointing keeps each layer's input alone (on the host when offloaded, which the bound
  // counts too) and rebuilds one layer at a time in the backward.
  const I kept = s.mem.checkpoint == seqpar::Checkpoint::full ? mul(m.layers, mul(t, c, acts), acts) : 0;
  const I stored = s.mem.checkpoint == seqpar::Checkpoint::full ? mul(t, width, acts) : mul(m.layers, mul(t, width, acts), acts);
  fp.activations_bytes = mul(4, add(kept, stored, acts), acts);

  // Tiled loss holds one tile's logits (core/tiling.hpp's tile, as the model cuts it).
  const char* lf = "--micro-batch x --seq-len / sp x --vocab";
  const I loss_rows = s.mem.tiled_loss ? std::min<I>(t, mul(s.micro_batch, alst_tile_tokens(s.seq_len / (s.ulysses * s.ring), c), lf)) : t;
  fp.logits_bytes = mul(4, mul(loss_rows, v, lf), lf);

  // One layer's backward: dact, dgate, dup (f), dh (c), dout and dq (qd), dk, dv (kvd).
  const char* work = "--micro-batch x --seq-len / sp x (--hidden, --ffn-hidden, --heads x --head-dim)";
  const I wwidth = add(add(mul(3, f, work), c, work), add(mul(2, qd, work), mul(2, kvd, work), work), work);
  fp.working_bytes = mul(4, mul(t, wwidth, work), work);
  return fp;
}

void check_step_sizes(const TrainSetup& s) {
  // Token positions are int: a sequence must fit (the layout checks divisibility separately).
  require_index("--seq-len", s.seq_len);
  require_index(kTokens, rank_tokens(s));
  require_index("--heads x --head-dim", mul(s.model.heads, s.model.head_dim, "--heads x --head-dim"));
  StepFootprint fp;
  try {
    fp = estimate_footprint(s);
  } catch (const Error& e) {
    throw Error(fmt::format("the training step's size does not fit in 64 bits, far above the limit of 1 TiB "
                            "per rank: {}", e.what()));
  }
  const I total = fp.total_bytes();
  if (total <= kMaxStepBytes) return;
  struct Part {
    I bytes;
    const char* what;
    const char* hint;
  };
  // Every rank holds all parameters (no ZeRO here): only smaller sizes help those; --sp divides
  // the tokens of the others.
  const char* fewer = "reduce those sizes";
  const char* shard = "reduce those sizes or raise --sp";
  const std::array<Part, 6> parts = {{
      {fp.embedding_bytes, "embedding and LM head weights with their gradients and AdamW states (16 bytes x --vocab x --hidden, twice unless tied)", fewer},
      {fp.attention_weight_bytes, "attention weights with their gradients and AdamW states (16 bytes x --layers x --hidden x (--heads + --kv-heads) x --head-dim x 2)", fewer},
      {fp.mlp_weight_bytes, "MLP weights with their gradients and AdamW states (16 bytes x --layers x 3 x --hidden x --ffn-hidden)", fewer},
      {fp.activations_bytes, "saved activations (--layers x --micro-batch x --seq-len / sp x (--hidden, --ffn-hidden, --heads x --head-dim))", shard},
      {fp.logits_bytes, "logits (--micro-batch x --seq-len / sp x --vocab)", shard},
      {fp.working_bytes, "backward temporaries (--micro-batch x --seq-len / sp x (--ffn-hidden, --hidden, --heads x --head-dim))", shard},
  }};
  const Part& big = *std::max_element(parts.begin(), parts.end(),
                                      [](const Part& a, const Part& b) { return a.bytes < b.bytes; });
  throw Error(fmt::format("the training step would hold about {} per rank, above the limit of 1 TiB "
                          "({} bytes); the largest part is {}: {} ({})",
                          gib(total), kMaxStepBytes, big.what, gib(big.bytes), big.hint));
}

}  // namespace seqpar::train
