// The advisor: enumerates plans (TP degree x method x SP degree x Ulysses/Ring split x memory options) for a
// model, system, GPU count and sequence length; ranks those that fit by throughput and says why
// each rejected plan was rejected. Also searches the longest sequence that fits. With a fixed
// global batch it fills the batch with data parallelism x micro-batch x gradient accumulation, so
// every plan it compares runs the same tokens per optimizer step.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/workload.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/methods.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/plan.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {

struct DocumentCosts;

// The batch of one optimizer step, fixed by the user: tokens (a whole number of sequences at the
// searched length) or sequences; exactly one of the two is positive.
struct GlobalBatch {
  std::int64_t tokens = 0;
  std::int64_t sequences = 0;
};

struct SearchSpace {
  // Tensor-parallel degrees: empty, every one of tp_degrees(); else these only.
  std::vector<int> tp;
  // Expert-parallel degrees (a MoE model): empty, every one of ep_degrees(); else these only. A
  // dense model searches ep 1 alone.
  std::vector<int> ep;
  std::vector<Method> methods = all_methods();  // the method table (methods.hpp), in its order
  std::vector<int> sp;                     // empty: every divisor of gpus / (tp x pp)
  // Pipeline stages: empty, pp_degrees() with a global batch, and 1 without one (a step of one
  // micro-batch would leave a pipeline idle (p - 1) / p of it); else these only.
  std::vector<int> pp;
  // Virtual stages per rank: empty, vp_degrees() of each structure's pp; else these only.
  std::vector<int> vp;
  std::optional<int> ulysses_degree;       // hybrid: this U only; else every U with 1 < U < P
  std::optional<MemoryOptions> memory;     // fixed; else every set from memory_option_sets()
  // Sequences per SP group per micro-step: fixed; else 1, or with a global batch every micro-batch
  // that fills it (gradient accumulation makes up the rest).
  std::optional<int> micro_batch;
  std::optional<GlobalBatch> global_batch;  // fixed tokens or sequences per optimizer step; else none (1 micro-step)
  // A packed-document workload sampled at the searched length (core/workload.hpp): advise runs each
  // structure with every load balancer worth comparing (document_cost.hpp: balancers_for) and ranks
  // them all; absent, one causal sequence fills every sequence.
  std::shared_ptr<const SampledWorkload> documents;
  // The precisions tried (core/precision.hpp), each structure once per entry: bf16 alone by
  // default; `--fp8` one fixed set; `--allow-fp8` bf16 and fp8_candidates().
  std::vector<Precision> precisions{Precision{}};
};

// The FP8 sets a search may try on this system: the linear layers in FP8 (with the parameters'
// gather where the framework gathers FP8 parameters), and that with FP8 attention where the
// framework and the attention kernel have it; under the framework's first recipe the GPU runs
// (MXFP8 first on Blackwell). Empty where the GPU or the framework has no FP8.
std::vector<Precision> fp8_candidates(const System& s);

// Throws seqpar::Error naming the field when the search cannot honour a constraint: GPUs, SP
// degrees, Ulysses degree or micro-batch outside [1, limits]; no method; a method or SP degree
// listed twice; a Ulysses degree without the hybrid method (only hybrids have a free U); a space
// with no plan at all (only hybrid with sp 1); a global batch with neither or both of tokens and
// sequences, or outside [1, limits]. advise, advise_max_seq_len and structures call it, so no
// constraint is silently dropped.
void check_search(int gpus, const SearchSpace& space);
// The global batch's part of check_search (simulate's --global-batch-tokens / --global-batch
// too): tokens or sequences, exactly one of them, in [1, limits].
void check_global_batch(const GlobalBatch& b);

// The EP degrees a search tries for model m at `tp` on `gpus` GPUs: 1, and for a MoE model every
// power of two that divides the data x sequence parallel ranks (gpus / tp) and the routed experts
// (moe_cost.hpp: expert_parallel_refusal).
std::vector<int> ep_degrees(const Model& m, int gpus, int tp);

// Sequences per optimizer step that `b` names at `seq_len`: b.sequences, or b.tokens / seq_len.
// Empty, with `why` set, when the tokens are not a whole number of sequences.
std::optional<std::int64_t> global_sequences(const GlobalBatch& b, std::int64_t seq_len, std::string& why);

// The ways a structure (sp, hence dp) fills `sequences` per optimizer step: dp x micro_batch x
// grad_accum_steps = sequences, one plan per micro-batch (the fixed one, else every divisor of
// sequences / dp), fewest micro-steps first. Empty, with `why` naming the rule, when none can:
// dp does not divide the batch (more data-parallel replicas than sequences, or a remainder), the
// fixed micro-batch does not divide a replica's share, or the micro-steps exceed their limit.
std::vector<Plan> batch_fills(const Plan& structure, std::int64_t sequences, std::optional<int> micro_batch,
                              std::string& why);

// The pipeline stage counts a search tries by default (with a global batch): 1, and every divisor
// of `rest` (the GPUs a TP group leaves) up to the layers that splits them (pipeline_cost.hpp:
// stage_split, with one virtual stage).
std::vector<int> pp_degrees(const Model& m, int rest);
// The virtual stages per rank a search tries for pp stages: 1 without stages; with them 1 and the v
// that make virtual stages of about 4, 2 and 1 layers, each splitting the layers over pp x v
// (pipeline_cost.hpp: stage_split).
std::vector<int> vp_degrees(const Model& m, int pp);

// The TP degrees a search tries by default: 1, 2, 4, 8, ... up to the GPUs of one node (TP's
// per-layer collectives stay on the node's link; a 72-GPU NVLink rack is one node), each dividing
// the GPU count, the query heads, the KV heads and the MLP width. The KV heads bound it: Megatron-
// Core splits the KV groups over TP (megatron/core/transformer/attention.py, Attention.__init__:
// divide(num_query_groups, tp), which asserts), so Llama-3-70B's 8 KV heads stop the search at TP 8
// even in a 72-GPU domain. A given --tp that replicates KV heads is still checked and costed.
std::vector<int> tp_degrees(const Model& m, const System& s, int gpus);

// Every combination of ZeRO stage, checkpointing (with and without offload), tiled MLP,
// tiled loss and optimizer offload.
const std::vector<MemoryOptions>& memory_option_sets();

// Plans that differ only in memory options: tp, method, sp, U, R (memory options at their defaults),
// and for a hybrid whose SP group spans nodes, both placements (ulysses-inner first).
// The data-parallel-only plan (sp = 1) stands for every method but hybrid and is listed once.
std::vector<Plan> structures(const Model& m, const System& s, int gpus, std::int64_t seq_len, const SearchSpace& space);

struct Rejection {
  Plan plan;
  std::vector<std::string> reasons;
  bool valid = false;  // the plan breaks no rule but does not fit (the exit status tells them apart)
};

// The best memory options for one structure: of the sets that fit, those whose throughput is
// within kMemoryTieTolerance of the fastest's are tied, and the lightest of them is kept
// (chosen_before). `best` is empty when the plan is invalid or nothing fits; `reasons` then says why
// and `closest` holds the set with the smallest peak (for reports of how far off it is; empty when
// `best` is not, or when no set is valid).
struct StructureOutcome {
  std::optional<Result> best;
  std::optional<Result> closest;
  std::vector<std::string> reasons;
};
StructureOutcome best_memory_options(const Model& m, const System& s, const Plan& structure,
                                     const std::optional<MemoryOptions>& fixed);

// A structure's best plan over the space's batch fills (batch_fills; without a global batch, its
// one micro-batch and no accumulation) and memory options, chosen among together (chosen_before):
// what advise ranks and a sweep point holds. `reasons` says why the structure cannot reach the
// global batch, when it cannot.
// With `docs` (document_cost.hpp), the structure under a packed-document workload in that load
// balancer's layout: the results carry the balancer.
StructureOutcome best_plan_for(const Model& m, const System& s, const Plan& structure, const SearchSpace& space,
                               const DocumentCosts* docs = nullptr);

// The advisor's ranking of plans, one definition for every list (advise's ranked plans, the sweep's
// points, maxlen's structures): higher tokens/s per GPU first; at equal throughput the smaller peak
// memory, as it leaves more headroom. A strict weak order, for std::stable_sort.
bool ranks_before(const Result& a, const Result& b);

// How close to the fastest set of memory options that fits a set must be to count as tied with it:
// within 1% of its throughput (tokens/s per GPU at least 99% of the fastest's). Below that a lighter
// set is a real loss of speed; within it, model error is larger than the difference.
inline constexpr double kMemoryTieTolerance = 0.01;

// The order of memory-option sets from the lightest: fewer offloads first (each of checkpoints,
// optimizer and parameters moves data over PCIe every step and holds host memory, so any one
// outweighs every other option), then fewer options, the ZeRO stage counting its number (0-3), the
// checkpointing level 0, 1 or 2 (none, selective, full) and each tiling 1.
bool lighter_options(const MemoryOptions& a, const MemoryOptions& b);

// The choice among plans that fit, one definition for every choice of memory options and batch
// fill (advise, maxlen's plan at its length, the sweep: all through best_plan_for and
// best_memory_options): a plan tied with the fastest (`fastest_tokens_per_s`, kMemoryTieTolerance)
// comes before one that is not; among tied plans the lighter options first; then ranks_before. A
// strict weak order for a given fastest.
bool chosen_before(const Result& a, const Result& b, double fastest_tokens_per_s);
// chosen_before in words, for messages and help texts: "the lightest set that fits within 1% of the
// fastest (fewest offloads, then fewest options)".
std::string memory_choice_rule();

struct Advice {
  std::vector<Result> ranked;       // fitting plans, fastest first (tokens/s per GPU)
  std::vector<Rejection> rejected;
  // Why the best plan: its TP degree against the best plan of the other TP degrees (or why none of
  // them runs), its method and SP degree against the runner-up of another structure, how it fills
  // the global batch, and its memory options. Empty when nothing fits.
  std::vector<std::string> reasons;
  const Result* best() const { return ranked.empty() ? nullptr : &ranked.front(); }
};
Advice advise(const Model& m, const System& s, int gpus, std::int64_t seq_len, const SearchSpace& space);

// The longest length at which a plan fits, and the shorter lengths at which it does not. Peak
// memory is not monotone in the length under tiled MLP or tiled loss: a tile is a sequence's
// tokens over ceil(tokens / hidden) (core/tiling.hpp), so one token more can add a tile and shrink
// every tile (Llama-3-70B on 8 L20s, tiled loss: 65,536 tokens peak higher than 65,544).
struct LengthGap {
  std::int64_t first = 0, last = 0;  // lengths [first, last] (multiples of the granularity) that do not fit
};
// What ends a maximum length: the next length the plan takes breaks a rule (a kernel's 32-bit
// index limit: validity.hpp), or does not fit the GPU's memory or the node's host memory, or the
// search reached its own limit.
enum class LengthLimit { none, gpu_memory, host_memory, rule, search_limit };
std::string_view to_string(LengthLimit l);

struct MaxLenSearch {
  std::int64_t max_seq_len = 0;      // 0: not even the shortest length fits
  std::vector<LengthGap> gaps;       // below max_seq_len, lowest first; at most kMaxGapsListed
  std::int64_t gap_count = 0;        // every gap, listed or not
  LengthLimit limit = LengthLimit::none;
  std::string limit_why;             // the next length's broken rule or its memory against the capacity
};
inline constexpr std::size_t kMaxGapsListed = 16;

// Longest seq_len (a multiple of the plan's granularity) for which `p` is valid and fits. Within
// a run of lengths with one tile count the peak grows with the length; across runs it may fall.
// So the search finds the last run whose shortest length fits, then the longest length in it that
// fits, and lists the runs below whose longest lengths do not fit.
MaxLenSearch max_seq_len_search(const Model& m, const System& s, const Plan& p);
// How a length search simulates a plan at each length it tries (p.seq_len set): simulate(m, s, p)
// above; an invalid result (its errors name the rule) ends the search as a broken rule does. Under
// a packed-document workload advise_max_seq_len passes one that also applies the load balancer's
// rules at that length.
using SimulateAt = std::function<Result(const Plan&)>;
MaxLenSearch max_seq_len_search(const Model& m, const System& s, const Plan& p, const SimulateAt& simulate_at);
std::int64_t max_seq_len(const Model& m, const System& s, const Plan& p);  // max_seq_len_search(...).max_seq_len
// The same under a fixed global batch of tokens: the longest seq_len = tokens / (dp x micro_batch x
// grad_accum_steps) over grad_accum_steps >= 1 that is valid and fits; the plan's grad_accum_steps
// is set to the one found. 0, with `why`, when none is.
std::int64_t max_seq_len_for_tokens(const Model& m, const System& s, Plan& p, std::int64_t tokens, std::string& why);

struct MaxLenAdvice {
  std::int64_t max_seq_len = 0;
  std::vector<LengthGap> gaps;      // the winner's lengths below max_seq_len that do not fit
  std::int64_t gap_count = 0;
  LengthLimit limit = LengthLimit::none;  // what ends the winner's length (MaxLenSearch)
  std::string limit_why;
  std::optional<Result> result;     // the plan at that length, with the memory options best_plan_for chooses
  std::vector<std::pair<Plan, std::int64_t>> per_structure;  // each structure's own maximum
  // Under a packed-document workload, per_structure's load balancers (one entry each); else empty.
  std::vector<Balancer> per_structure_balancer;
  std::vector<Rejection> rejected;
};
// Over all structures of `space`; with space.memory unset, each structure uses the memory options
// that save the most (they never raise the peak), then the set best_plan_for chooses at the maximum.
// With a global batch of sequences, each structure runs micro-batch 1 (or the fixed one) and
// accumulates the rest; of tokens, the length is what one sequence of the batch gets
// (max_seq_len_for_tokens).
// With `documents`: each structure with every load balancer worth comparing (balancers_for), each
// searched on its own; the workload is sampled at each length tried (the fit at a length depends
// on the balancer's rules and the memory, charged at the balancer's fullest rank:
// document_memory_seq_len), counted at each length compared or reported, and the result carries
// the winner's balancer. A global batch of tokens is refused
// with documents (seqpar::Error): its lengths come from the batch's divisors, a search not run
// under a workload.
MaxLenAdvice advise_max_seq_len(const Model& m, const System& s, int gpus, const SearchSpace& space,
                                const Workload* documents = nullptr);

}  // namespace seqpar::sim
