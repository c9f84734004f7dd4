#include "seqpar/sim/model.hpp"

#include "seqpar/core/checked.hpp"

namespace seqpar::sim {

// Checked: a model file's shapes are user input, and a wrapped count would pass as a small model.
namespace {
std::int64_t mul(std::int64_t a, std::int64_t b) { return checked_mul(a, b, "model: parameter count"); }
std::int64_t add(std::int64_t a, std::int64_t b) { return checked_add(a, b, "model: parameter count"); }
}  // namespace

std::string_view to_string(MlpKind k) { return k == MlpKind::swiglu ? "swiglu" : "gelu"; }
std::string_view to_string(NormKind k) { return k == NormKind::rmsnorm ? "rmsnorm" : "layernorm"; }
std::string_view to_string(PositionKind k) { return k == PositionKind::rope ? "rope" : "learned"; }
std::string_view to_string(AttentionKind k) { return k == AttentionKind::full ? "full_attention" : "sliding_attention"; }

namespace {
// Each enum has two kinds; the name of each is its to_string.
template <class E>
bool named(std::string_view name, E a, E b, E& out) {
  for (E k : {a, b})
    if (name == to_string(k)) {
      out = k;
      return true;
    }
  return false;
}
}  // namespace

bool kind_named(std::string_view name, MlpKind& out) { return named(name, MlpKind::swiglu, MlpKind::gelu, out); }
bool kind_named(std::string_view name, NormKind& out) { return named(name, NormKind::rmsnorm, NormKind::layernorm, out); }
bool kind_named(std::string_view name, PositionKind& out) {
  return named(name, PositionKind::rope, PositionKind::learned, out);
}

bool kind_named(std::string_view name, AttentionKind& out) {
  return named(name, AttentionKind::full, AttentionKind::sliding, out);
}

int Model::sliding_layers() const {
  int n = 0;
  for (AttentionKind k : layer_kinds) n += k == AttentionKind::sliding ? 1 : 0;
  return n;
}

std::string to_string(const std::vector<MlpKind>& kinds) {
  std::string out;
  for (MlpKind k : kinds) out += (out.empty() ? "" : ", ") + std::string(to_string(k));
  return out;
}

std::int64_t Model::fc1_columns() const { return mul(mlp == MlpKind::swiglu ? 2 : 1, ffn_hidden); }

std::int64_t Model::norm_params() const { return norm == NormKind::layernorm ? 2 * std::int64_t{hidden} : hidden; }

std::int64_t Model::params_per_layer() const {
  const std::int64_t h = hidden, q = mul(heads, head_dim), kv = mul(kv_heads, head_dim);
  const std::int64_t attention = add(mul(2, mul(h, q)), mul(2, mul(h, kv)));
  const std::int64_t mlp_params = add(mul(h, fc1_columns()), mul(h, ffn_hidden));  // fc1 and fc2
  return add(add(attention, mlp_params), 2 * norm_params());
}

std::int64_t Model::embedding_params() const {
  const std::int64_t table = mul(vocab, hidden);
  return add(tied_embeddings ? table : mul(2, table), norm_params());  // + final norm
}

std::int64_t Model::total_params() const { return add(mul(layers, params_per_layer()), embedding_params()); }

}  // namespace seqpar::sim
