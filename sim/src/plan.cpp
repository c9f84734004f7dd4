#include "seqpar/sim/plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/common/error.hpp"
#include "seqpar/common/parse.hpp"

namespace seqpar::sim {

std::string_view to_string(Method m) {
  switch (m) {
    case Method::ulysses: return "ulysses";
    case Method::ring: return "ring";
    case Method::ring_zigzag: return "ring-zigzag";
    case Method::hybrid: return "hybrid";
  }
  return "?";
}

std::string_view to_string(Checkpoint c) {
  switch (c) {
    case Checkpoint::none: return "none";
    case Checkpoint::selective: return "selective";
    case Checkpoint::full: return "full";
  }
  return "?";
}

Method parse_method(std::string_view s) {
  for (Method m : {Method::ulysses, Method::ring, Method::ring_zigzag, Method::hybrid})
    if (s == to_string(m)) return m;
  throw Error(fmt::format("method: unknown method '{}'; expected ulysses, ring, ring-zigzag or hybrid", s));
}

Checkpoint parse_checkpoint(std::string_view s) {
  for (Checkpoint c : {Checkpoint::none, Checkpoint::selective, Checkpoint::full})
    if (s == to_string(c)) return c;
  throw Error(fmt::format("checkpoint: unknown value '{}'; expected none, selective or full", s));
}

Plan normalized(Plan p, int gpus_per_node) {
  switch (p.method) {
    case Method::ulysses:
      if (p.ulysses_degree <= 1 && p.ring_degree <= 1) p.ulysses_degree = p.sp;
      if (p.ring_degree <= 0) p.ring_degree = 1;
      break;
    case Method::ring:
    case Method::ring_zigzag:
      if (p.ulysses_degree <= 1 && p.ring_degree <= 1) p.ring_degree = p.sp;
      if (p.ulysses_degree <= 0) p.ulysses_degree = 1;
      break;
    case Method::hybrid:
      if (p.ulysses_degree <= 0 && p.ring_degree <= 0) p.ulysses_degree = std::min(p.sp, std::max(1, gpus_per_node));
      if (p.ulysses_degree <= 0 && p.ring_degree > 0 && p.sp % p.ring_degree == 0) p.ulysses_degree = p.sp / p.ring_degree;
      if (p.ring_degree <= 0 && p.ulysses_degree > 0 && p.sp % p.ulysses_degree == 0) p.ring_degree = p.sp / p.ulysses_degree;
      break;
  }
  return p;
}

nlohmann::json to_json(const Plan& p) {
  return {{"method", to_string(p.method)},
          {"gpus", p.gpus},
          {"seq_len", p.seq_len},
          {"sp", p.sp},
          {"dp", p.dp()},
          {"ulysses_degree", p.ulysses_degree},
          {"ring_degree", p.ring_degree},
          {"micro_batch", p.micro_batch},
          {"zero", p.mem.zero},
          {"checkpoint", to_string(p.mem.checkpoint)},
          {"offload_checkpoints", p.mem.offload_checkpoints},
          {"offload_optimizer", p.mem.offload_optimizer},
          {"tiled_mlp", p.mem.tiled_mlp},
          {"tiled_loss", p.mem.tiled_loss}};
}

namespace {
template <typename T>
T field(const nlohmann::json& j, const char* key, T fallback, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) throw Error(fmt::format("plan: missing field '{}'", key));
    return fallback;
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("plan: field '{}' has the wrong type ({})", key, it->dump()));
  }
}
}  // namespace

Plan plan_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("plan: expected a JSON object");
  Plan p;
  p.method = parse_method(field<std::string>(j, "method", "", true));
  p.gpus = field<int>(j, "gpus", 0, true);
  p.seq_len = field<std::int64_t>(j, "seq_len", 0, true);
  p.sp = field<int>(j, "sp", 0, true);
  p.ulysses_degree = field<int>(j, "ulysses_degree", 0, false);
  p.ring_degree = field<int>(j, "ring_degree", 0, false);
  p.micro_batch = field<int>(j, "micro_batch", 1, false);
  p.mem.zero = field<int>(j, "zero", 1, false);
  p.mem.checkpoint = parse_checkpoint(field<std::string>(j, "checkpoint", "none", false));
  p.mem.offload_checkpoints = field<bool>(j, "offload_checkpoints", false, false);
  p.mem.offload_optimizer = field<bool>(j, "offload_optimizer", false, false);
  p.mem.tiled_mlp = field<bool>(j, "tiled_mlp", false, false);
  p.mem.tiled_loss = field<bool>(j, "tiled_loss", false, false);
  return p;
}

std::string describe_structure(const Plan& p) {
  if (p.sp == 1) return "dp-only sp=1";
  if (p.method == Method::hybrid) return fmt::format("hybrid U{}xR{}", p.ulysses_degree, p.ring_degree);
  return fmt::format("{} sp={}", to_string(p.method), p.sp);
}

std::string describe(const Plan& p) {
  std::string s = describe_structure(p);
  if (p.micro_batch != 1) s += fmt::format(" mb={}", p.micro_batch);
  s += fmt::format(" zero={} ckpt={}", p.mem.zero, to_string(p.mem.checkpoint));
  if (p.mem.offload_checkpoints) s += " +offload-ckpt";
  if (p.mem.offload_optimizer) s += " +offload-opt";
  if (p.mem.tiled_mlp) s += " +tiled-mlp";
  if (p.mem.tiled_loss) s += " +tiled-loss";
  return s;
}

}  // namespace seqpar::sim
