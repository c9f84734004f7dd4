#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

std::int64_t Model::norm_params() const { return norm == NormKind::layernorm ? 2 * std::int64_t{hidden} : hidden; }

std::int64_t Model::params_per_layer() const {
  const std::int64_t h = hidden, q = std::int64_t{heads} * head_dim, kv = std::int64_t{kv_heads} * head_dim;
  const std::int64_t attention = h * q + 2 * h * kv + q * h;
  const std::int64_t mlp_params = (mlp == MlpKind::swiglu ? 3 : 2) * h * ffn_hidden;
  return attention + mlp_params + 2 * norm_params();
}

std::int64_t Model::embedding_params() const {
  const std::int64_t table = std::int64_t{vocab} * hidden;
  return (tied_embeddings ? table : 2 * table) + norm_params();  // + final norm
}

}  // namespace seqpar::sim
