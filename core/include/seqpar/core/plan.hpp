// An execution plan: how G GPUs split one model's training step (sequence-parallel method and
// degrees, data parallelism over the rest, memory options). Shared by the simulator, the
// training step and the reports, so a measurement and a prediction name the same plan. In core,
// defined once: every layer's labels, JSON keys and flag parsing come from here.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "seqpar/core/precision.hpp"
#include "seqpar/core/precision_flags.hpp"

namespace seqpar {

// allgather: all-gather KV context parallelism (Llama 3, Megatron-Core/Transformer Engine's
// cp_comm_type=all_gather, torchtitan's allgather rotate method): each rank gathers the whole
// sequence's K,V, keeps its own query chunks (head/tail chunks r and 2R-1-r of 2R, balanced under
// a causal mask) and reduce-scatters dK,dV in the backward; allgather-contiguous is the same
// without load balancing (rank r holds chunk r of R, as ring-flash-attention's llama3 function).
enum class Method { ulysses, ring, ring_zigzag, hybrid, allgather, allgather_contiguous };
// Every method, in the order names are listed (messages, help, searches).
inline constexpr std::array<Method, 6> kAllMethods = {Method::ulysses,   Method::ring,      Method::ring_zigzag,
                                                      Method::hybrid,    Method::allgather, Method::allgather_contiguous};
// The methods that split the sequence over the ring group alone (U = 1, R = P): K,V cross the
// group by ring send/recv (ring, ring-zigzag) or by one all-gather (allgather, allgather-contiguous).
inline bool ring_group_only(Method m) {
  return m == Method::ring || m == Method::ring_zigzag || m == Method::allgather || m == Method::allgather_contiguous;
}
// The methods whose ring group gathers K,V with an all-gather (and reduce-scatters dK,dV).
inline bool kv_allgather(Method m) { return m == Method::allgather || m == Method::allgather_contiguous; }
enum class Checkpoint { none, selective, full };
// Where a hybrid's groups sit. World ranks fill nodes in order; ulysses_inner makes each Ulysses
// group U consecutive ranks (inside a node when U divides the node) and each ring group R ranks
// U apart (across nodes); ring_inner is the reverse. Only a plan with U > 1 and R > 1 on more
// than one node is changed by it.
enum class GroupPlacement { ulysses_inner, ring_inner };

std::string_view to_string(Method m);
std::string_view to_string(Checkpoint c);
std::string_view to_string(GroupPlacement g);  // "ulysses-inner", "ring-inner"
// Every method's name in kAllMethods order, joined by `separator` and the last two by
// `last_separator`: the one list behind messages (", ", " or "), help texts (" | ") and defaults (",").
std::string method_names(std::string_view separator, std::string_view last_separator);
inline std::string method_names(std::string_view separator) { return method_names(separator, separator); }
// Throw seqpar::Error naming the field and the accepted values.
Method parse_method(std::string_view s);
Checkpoint parse_checkpoint(std::string_view s);
GroupPlacement parse_placement(std::string_view s);

struct MemoryOptions {
  int zero = 1;                        // ZeRO stage 0..3 over the data x sequence parallel group
  Checkpoint checkpoint = Checkpoint::none;
  bool offload_checkpoints = false;    // full-checkpoint layer inputs kept in host memory
  bool offload_optimizer = false;      // optimizer states and step on the host
  bool tiled_mlp = false;              // MLP computed and recomputed in sequence tiles (ALST)
  bool tiled_loss = false;             // logits and loss computed in sequence tiles (ALST)
  bool offload_params = false;         // ZeRO-3's parameter shards in host memory (offload_param); needs zero 3
  bool operator==(const MemoryOptions&) const = default;
};

struct Plan {
  Method method = Method::ulysses;
  int gpus = 8;                // total GPUs = tp x sp x pp x dp
  // Tensor-parallel degree (Megatron-style, with sequence parallelism in the norm/dropout regions):
  // each layer's weights and heads split over tp consecutive ranks (TP innermost, then SP, then DP).
  int tp = 1;
  // Pipeline parallelism: pp stages of layers / pp layers each (the embedding on the first, the LM
  // head and loss on the last); vp virtual stages per rank (Megatron's interleaved 1F1B: each rank
  // holds vp chunks of layers / (pp x vp) layers; vp = 1 is plain 1F1B). World ranks are ordered
  // [TP, CP(SP), PP, DP], TP innermost (Llama 3, arXiv 2407.21783 Sec. 3.3.2; Megatron-Core's
  // default order tp-cp-ep-dp-pp places PP outermost instead; this model uses Llama 3's), so
  // consecutive stages are tp x sp world ranks apart. The micro-batches per pipeline per step are
  // grad_accum_steps.
  int pp = 1;
  int vp = 1;
  // Expert-parallel degree (mixture-of-experts models): each MoE layer's routed experts split over
  // ep ranks, drawn from the data x sequence parallel ranks as Megatron-Core lays them out (EP
  // inside DP x CP, tp world ranks apart, CP ranks first): ep divides gpus / (tp x pp), a stage's. 1: every rank holds
  // every expert (a dense model's only value).
  int ep = 1;
  std::int64_t seq_len = 0;    // tokens per sequence (the full, unsharded length)
  int sp = 1;                  // sequence-parallel degree = ulysses_degree * ring_degree
  int ulysses_degree = 1;
  int ring_degree = 1;
  int micro_batch = 1;         // sequences per SP group per micro-step
  // Micro-steps per optimizer step (gradient accumulation): each runs forward and backward on its
  // own micro-batch; the optimizer steps once. Sequences per optimizer step: dp x micro_batch x this.
  int grad_accum_steps = 1;
  GroupPlacement placement = GroupPlacement::ulysses_inner;
  MemoryOptions mem;
  Precision precision;         // what runs in FP8 (precision.hpp); bf16 throughout by default
  bool operator==(const Plan&) const = default;

  // Data-parallel degree gpus / (tp x sp x pp); the ZeRO group is the dp x sp ranks of one stage
  // that hold the same TP shard, gpus / (tp x pp) of them. In 64 bits: each degree is at most 2^20.
  int dp() const {
    const std::int64_t d = std::int64_t{tp} * sp * pp;
    return d > 0 ? static_cast<int>(gpus / d) : 0;
  }
  // Sequences per optimizer step (the global batch): dp x micro_batch x grad_accum_steps. In 64
  // bits: each factor is within its limit, so the product is exact.
  std::int64_t global_batch_sequences() const { return std::int64_t{dp()} * micro_batch * grad_accum_steps; }
  // The load-balanced layout of the ring group: rank r holds chunks r and 2R-1-r of 2R (zigzag,
  // or head/tail as all-gather CP calls it).
  bool zigzag() const { return method == Method::ring_zigzag || method == Method::hybrid || method == Method::allgather; }
};

// Fills ulysses_degree / ring_degree from method and sp where the method fixes them
// (ulysses: U = P; ring, ring-zigzag, allgather, allgather-contiguous: R = P). For hybrid, a missing (0) degree is derived from the other, and
// with neither given U = the largest divisor of P not above gpus_per_node / tp, so Ulysses stays
// inside a node beside its TP groups. Does not validate; see plan_validity.hpp.
Plan normalized(Plan p, int gpus_per_node);

// The plan flags every program takes (--method, --sp, --ulysses-degree, --ring-degree, --tp, --pp,
// --vp, --micro-batch, --grad-accum-steps); nullopt where the flag was not given.
struct PlanFlags {
  std::string method = "ulysses";
  std::optional<int> sp, ulysses_degree, ring_degree;
  int tp = 1;                               // --tp
  int pp = 1, vp = 1;                       // --pp, --vp
  int ep = 1;                               // --ep
  int micro_batch = 1;
  int grad_accum_steps = 1;                 // --grad-accum-steps
  std::string placement = "ulysses-inner";  // --placement
  PrecisionFlags precision;                 // --fp8, --fp8-recipe (where registered)
};

// The SP degree the flags name without knowing the GPU count: --sp when given; else U x R when
// both degrees are given; else U for ulysses, R for ring_group_only methods; nullopt when only the GPU count
// can decide (then P = all GPUs). Throws seqpar::Error when U x R is beyond limits::kMaxGpus.
std::optional<int> implied_sp(const PlanFlags& f);

// The one place flags become a plan, for seqpar simulate and the measuring programs alike:
// P from implied_sp (else gpus / (tp x pp), every GPU the TP groups and stages leave), missing degrees from normalized(); a given flag is never
// overridden. Throws seqpar::Error for an unknown method or a hybrid degree that cannot be
// derived (P not divisible by the other). Does not validate the rest: check_plan_structure does.
Plan plan_from_flags(const PlanFlags& f, int gpus, std::int64_t seq_len, int gpus_per_node);

// The keys of a plan object, in to_json order: what plan_from_json reads and what a reader that
// copies plans out of documents (the reports) keeps. to_json adds the derived "dp" after "sp".
// "tp" is the tensor-parallel degree, named like "sp" and "dp" beside it (absent: 1).
// "pp" and "vp" are the pipeline stages and virtual stages per rank, "ep" the expert-parallel
// degree (absent: 1); to_json writes them only where they are not 1, so a plan without pipeline or
// expert parallelism reads as it always did.
// "fp8" is fp8_parts_text ("none" or "gemm,attention"), "fp8_recipe" the recipe (absent: none, delayed).
inline constexpr std::array<std::string_view, 22> kPlanJsonKeys = {
    "method", "gpus", "seq_len", "sp", "tp", "pp", "vp", "ep", "ulysses_degree", "ring_degree", "micro_batch", "grad_accum_steps", "placement",
    "zero", "checkpoint", "offload_checkpoints", "offload_optimizer", "offload_params", "tiled_mlp", "tiled_loss",
    "fp8", "fp8_recipe"};

// {"method","gpus","seq_len","sp","tp","dp","ulysses_degree","ring_degree","micro_batch","grad_accum_steps","placement",
//  "zero","checkpoint","offload_checkpoints","offload_optimizer","offload_params","tiled_mlp","tiled_loss","fp8","fp8_recipe"}
nlohmann::json to_json(const Plan& p);
// ("pp" and "vp" after "tp" where not 1.)
// Inverse of to_json; missing memory options, placement, tp, pp, vp (1) and grad_accum_steps (1) take their defaults;
// bad values throw seqpar::Error.
Plan plan_from_json(const nlohmann::json& j);

// One line for tables: "hybrid U4xR2 zero=3 ckpt=full +offload-ckpt" (" mb=2 ga=4" where not 1;
// " fp8=gemm" where a part runs in FP8, with the recipe where it is not delayed: " fp8=gemm/current").
std::string describe(const Plan& p);
// The memory options alone, as describe() spells them: "zero=3 ckpt=full +offload-ckpt".
std::string describe(const MemoryOptions& m);
// The method and degrees alone: "hybrid U4xR2", "ring-zigzag sp=8", "dp-only sp=1"; a hybrid
// placed ring-inner says so ("hybrid U4xR2 ring-inner"), the default placement is not shown; tensor
// parallelism comes first ("tp=2 ulysses sp=4", "tp=8 sp=1" without SP), pipeline stages after the
// SP part where not 1 ("tp=8 allgather sp=16 pp=16", "tp=8 sp=1 pp=8 vp=5"). The one
// spelling of a plan's structure: tables, reports and benchmark output all call this.
std::string describe_structure(const Plan& p);
// The same for a plan object read from a document: reads "method", "sp", "ulysses_degree",
// "ring_degree", "tp", "pp", "vp" and "placement" as plan_from_json does. One that does not parse is labelled by its "method"
// string alone (or "?"), so a report still shows the row.
std::string describe_structure(const nlohmann::json& plan);
// The structure in a sentence's words (the report's one-line answers): "Ulysses 8", "ring-zigzag 8",
// "hybrid 4x2" ("hybrid 4x2 ring-inner"), "no SP" for sp = 1; from a plan object as describe_structure reads it.
std::string describe_in_words(const Plan& p);
std::string describe_in_words(const nlohmann::json& plan);

}  // namespace seqpar
