#include "seqpar/core/plan_validity.hpp"

#include <fmt/format.h>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/limits.hpp"

namespace seqpar {

std::int64_t seq_granularity(const Plan& p) {
  const std::int64_t P = p.sp > 0 ? p.sp : 1, T = p.tp > 0 ? p.tp : 1;
  // TP's sequence-parallel regions split each SP rank's shard again over the TP group (Megatron:
  // the sequence must divide by the TP size).
  return (p.zigzag() && p.ring_degree > 1 ? 2 * P : P) * T;
}

bool check_plan_structure(const Plan& p, std::vector<std::string>& errors) {
  const std::size_t before = errors.size();
  auto fail = [&](std::string msg) { errors.push_back(std::move(msg)); };
  auto range = [&](std::string_view field, std::int64_t v, std::int64_t hi) {
    if (v < 1 || v > hi) fail(*range_error(field, v, 1, hi));  // the message only for a value out of range
  };

  range("gpus", p.gpus, limits::kMaxGpus);
  if (p.seq_len <= 0) fail(fmt::format("seq_len: {} must be positive", p.seq_len));
  else range("seq_len", p.seq_len, limits::kMaxSeqLen);
  range("micro_batch", p.micro_batch, limits::kMaxMicroBatch);
  range("grad_accum_steps", p.grad_accum_steps, limits::kMaxGradAccumSteps);
  range("sp", p.sp, limits::kMaxGpus);
  range("tp", p.tp, limits::kMaxGpus);
  range("pp", p.pp, limits::kMaxGpus);
  range("vp", p.vp, limits::kMaxGpus);
  range("ep", p.ep, limits::kMaxGpus);
  range("ulysses_degree", p.ulysses_degree, limits::kMaxGpus);
  range("ring_degree", p.ring_degree, limits::kMaxGpus);
  if (p.mem.zero < 0 || p.mem.zero > 3) fail(fmt::format("zero: stage {} does not exist; expected 0, 1, 2 or 3", p.mem.zero));
  if (errors.size() != before) return false;  // the rules below divide and multiply by these

  if (p.tp == 1 && p.pp == 1 && p.gpus % p.sp != 0)
    fail(fmt::format("gpus: {} GPUs are not divisible by sp {} (the data-parallel degree gpus/sp must be whole)", p.gpus, p.sp));
  // In 64 bits: both degrees are at most 2^20.
  if (p.tp != 1 && p.pp == 1 && p.gpus % (std::int64_t{p.tp} * p.sp) != 0)
    fail(fmt::format("gpus: {} GPUs are not divisible by tp {} x sp {} (the data-parallel degree gpus/(tp x sp) must be "
                     "whole)", p.gpus, p.tp, p.sp));
  // In 64 bits: three degrees of at most 2^20 each, so the product is exact.
  if (p.pp != 1 && p.gpus % (std::int64_t{p.tp} * p.sp * p.pp) != 0)
    fail(fmt::format("gpus: {} GPUs are not divisible by tp {} x sp {} x pp {} (the data-parallel degree gpus/(tp x sp x "
                     "pp) must be whole)", p.gpus, p.tp, p.sp, p.pp));
  // Interleaving splits each rank's layers into vp chunks that take turns: without stages there is
  // nothing to interleave.
  if (p.vp > 1 && p.pp == 1)
    fail(fmt::format("vp: {} virtual stages per rank interleave a pipeline's stages; it needs --pp above 1 (got pp 1)", p.vp));
  // Megatron-LM's rule for the interleaved schedule (schedules.py,
  // forward_backward_pipelining_with_interleaving: "number of microbatches ... must be divisible by
  // pipeline-model-parallel-size when using interleaved schedule"): the micro-batches go round the
  // stages in groups of pp.
  if (p.vp > 1 && p.pp > 1 && p.grad_accum_steps % p.pp != 0)
    fail(fmt::format("grad_accum_steps: {} micro-batches per pipeline are not a multiple of pp {}; the interleaved "
                     "schedule (vp {}) runs them round the stages in groups of pp (Megatron-LM's rule)",
                     p.grad_accum_steps, p.pp, p.vp));
  // Megatron-Core draws the expert-parallel group from the data x context parallel ranks (the
  // ranks of one pipeline stage that hold the same TP shard): ep must tile them.
  if (const std::int64_t tp_pp = std::int64_t{p.tp} * p.pp;
      p.ep != 1 && tp_pp >= 1 && (p.gpus % tp_pp != 0 || (p.gpus / tp_pp) % p.ep != 0))
    fail(fmt::format("ep: {} does not divide the {} data x sequence parallel ranks{} ({}); expert parallelism splits "
                     "the experts over a group of those ranks",
                     p.ep, p.gpus / std::max<std::int64_t>(1, tp_pp), p.pp > 1 ? " of a stage" : "",
                     p.pp > 1 ? fmt::format("gpus {} / (tp {} x pp {})", p.gpus, p.tp, p.pp)
                              : fmt::format("gpus {} / tp {}", p.gpus, p.tp)));
  // In 64 bits: both degrees are at most 2^20, so the product is exact (an int would wrap).
  if (std::int64_t{p.ulysses_degree} * p.ring_degree != p.sp)
    fail(fmt::format("sp: {} must equal ulysses_degree {} x ring_degree {}", p.sp, p.ulysses_degree, p.ring_degree));
  if (p.method == Method::ulysses && p.ring_degree != 1)
    fail(fmt::format("ring_degree: method ulysses has no ring (got {}); use --method hybrid", p.ring_degree));
  if (ring_group_only(p.method) && p.ulysses_degree != 1)
    fail(fmt::format("ulysses_degree: method {} has no Ulysses part (got {}){}", to_string(p.method), p.ulysses_degree,
                     kv_allgather(p.method) ? "" : "; use --method hybrid"));

  const std::int64_t gran = seq_granularity(p);
  if (p.seq_len % gran != 0) {
    const std::int64_t padded = (p.seq_len / gran + 1) * gran;
    fail(fmt::format("seq_len: {} is not divisible by {} ({}{}); pad the sequence to {}", p.seq_len, gran,
                     p.zigzag() && p.ring_degree > 1
                         ? (kv_allgather(p.method) ? "head/tail load balancing splits it into 2 x sp chunks"
                                                   : "zigzag splits it into 2 x sp chunks")
                         : "one shard per sp rank",
                     p.tp != 1 ? fmt::format(", each split again over tp {} ranks by TP's sequence parallelism", p.tp)
                               : std::string(),
                     padded));
  }
  check_memory_combination(p.mem, errors);
  return errors.size() == before;
}

bool check_memory_combination(const MemoryOptions& m, std::vector<std::string>& errors) {
  const std::size_t before = errors.size();
  if (m.offload_params && m.zero != 3)
    errors.push_back(fmt::format("offload_params: parameter offload keeps ZeRO-3's parameter shards in host memory; it "
                                 "needs --zero 3 (got --zero {})",
                                 m.zero));
  if (m.offload_checkpoints && m.checkpoint != Checkpoint::full)
    errors.push_back("offload_checkpoints: offloading keeps full-checkpoint layer inputs in host memory; it needs --checkpoint full");
  return errors.size() == before;
}

bool check_heads(int heads, int kv_heads, int ulysses_degree, std::vector<std::string>& errors) {
  return check_heads(heads, kv_heads, 1, ulysses_degree, errors);
}

int kv_heads_per_tp_rank(int kv_heads, int tp) {
  if (tp <= 1 || kv_heads < 1) return kv_heads;
  return kv_heads % tp == 0 ? kv_heads / tp : 1;
}

bool check_heads(int heads, int kv_heads, int tp, int ulysses_degree, std::vector<std::string>& errors) {
  const int U = ulysses_degree;
  // The modulo below needs U, tp and kv_heads >= 1; a model or plan check names them first.
  if (U < 1) {
    errors.push_back(fmt::format("ulysses_degree: {} must be at least 1", U));
    return false;
  }
  if (tp < 1) {
    errors.push_back(fmt::format("tp: {} must be at least 1", tp));
    return false;
  }
  const std::size_t before = errors.size();
  if (tp > 1) {
    // Megatron's rules: the query heads split evenly over the TP ranks; the KV heads (query groups)
    // split too, or, fewer than the ranks, each is replicated on tp / kv_heads of them
    // (Megatron-Core transformer_config.py: "num_query_groups must be a multiple or divisor of
    // tensor_model_parallel_size"; attention.py gives each rank one KV head then).
    if (heads % tp != 0)
      errors.push_back(fmt::format("heads: {} query heads are not divisible by the tensor-parallel degree {} (TP splits "
                                   "the heads over its ranks)", heads, tp));
    if (kv_heads >= 1 && kv_heads % tp != 0 && tp % kv_heads != 0)
      errors.push_back(fmt::format("kv_heads: {} KV heads and tensor-parallel degree {}: neither divides the other, so TP "
                                   "can neither split nor replicate them (Megatron-Core's rule)", kv_heads, tp));
    if (errors.size() != before) return false;  // the per-rank counts below would not be whole
  }
  const int h = heads / tp, kv = kv_heads_per_tp_rank(kv_heads, tp);
  // The messages' words are made only for a message: the planner checks millions of valid plans.
  const std::string_view kv_per_rank = tp > 1 ? " per TP rank" : "";
  if (h % U != 0)
    errors.push_back(fmt::format("heads: {} query heads{} are not divisible by the Ulysses degree {}", h,
                                 tp > 1 ? fmt::format(" per TP rank ({} / tp {})", heads, tp) : std::string(), U));
  if (kv_heads < 1)
    errors.push_back(fmt::format("kv_heads: {} must be at least 1", kv_heads));
  else if (kv % U != 0 && U % kv != 0)
    errors.push_back(fmt::format("kv_heads: {} KV heads{} and Ulysses degree {}: neither divides the other, so KV heads can "
                                 "be neither split nor replicated evenly", kv, kv_per_rank, U));
  return errors.size() == before;
}

}  // namespace seqpar
