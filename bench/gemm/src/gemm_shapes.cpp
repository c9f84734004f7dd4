#include "seqpar/bench/gemm_shapes.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/core/error.hpp"

namespace seqpar::bench {

std::string gemm_name(const GemmShape& s, const std::string& dtype) {
  return fmt::format("gemm/{}/{}/m{}n{}k{}", dtype, s.op, s.m, s.n, s.k);
}

GemmShape square_gemm(std::int64_t size) {
  if (size <= 0) throw Error(fmt::format("--sizes: square GEMM size must be positive, got {}", size));
  GemmShape s;
  s.op = "square";
  s.m = s.n = s.k = size;
  s.trans_b = true;
  return s;
}

std::vector<GemmShape> layer_gemms(const sim::Model& model, std::int64_t tokens, const std::vector<std::string>& passes) {
  if (tokens <= 0) throw Error(fmt::format("--tokens: token count must be positive, got {}", tokens));
  const auto positive = [&](const char* field, int v) {
    if (v <= 0) throw Error(fmt::format("model '{}': {} must be positive, got {}", model.name, field, v));
  };
  positive("hidden", model.hidden);
  positive("heads", model.heads);
  positive("kv_heads", model.kv_heads);
  positive("head_dim", model.head_dim);
  positive("ffn_hidden", model.ffn_hidden);
  positive("vocab", model.vocab);
  for (const std::string& p : passes)
    if (p != "fwd" && p != "dx" && p != "dw")
      throw Error(fmt::format("--passes: unknown pass '{}' (fwd, dx, dw)", p));
  const auto wants = [&](const char* p) { return std::find(passes.begin(), passes.end(), p) != passes.end(); };

  const std::int64_t hidden = model.hidden, q_dim = std::int64_t(model.heads) * model.head_dim,
                     kv_dim = std::int64_t(model.kv_heads) * model.head_dim, ffn = model.ffn_hidden;
  // SwiGLU's up and gate projections share their input, so they run as one GEMM of twice the width.
  const bool swiglu = model.mlp == sim::MlpKind::swiglu;
  struct Linear {
    const char* name;
    std::int64_t in, out;
  };
  const Linear linears[] = {
      {"qkv", hidden, q_dim + 2 * kv_dim},
      {"attn_out", q_dim, hidden},
      {swiglu ? "mlp_up_gate" : "mlp_up", hidden, swiglu ? 2 * ffn : ffn},
      {"mlp_down", ffn, hidden},
      {"lm_head", hidden, model.vocab},
  };
  std::vector<GemmShape> out;
  for (const Linear& l : linears) {
    GemmShape g;
    g.tokens = tokens;
    if (wants("fwd")) {  // Y[t,out] = X[t,in] W^T, W stored [out,in]
      g.op = fmt::format("{}_fwd", l.name);
      g.m = tokens, g.n = l.out, g.k = l.in, g.trans_a = false, g.trans_b = true;
      out.push_back(g);
    }
    if (wants("dx")) {  // dX[t,in] = dY[t,out] W[out,in]
      g.op = fmt::format("{}_dx", l.name);
      g.m = tokens, g.n = l.in, g.k = l.out, g.trans_a = false, g.trans_b = false;
      out.push_back(g);
    }
    if (wants("dw")) {  // dW[out,in] = dY[t,out]^T X[t,in]
      g.op = fmt::format("{}_dw", l.name);
      g.m = l.out, g.n = l.in, g.k = tokens, g.trans_a = true, g.trans_b = false;
      out.push_back(g);
    }
  }
  return out;
}

}  // namespace seqpar::bench
