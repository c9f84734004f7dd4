#include "seqpar/sim/advisor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <span>
#include <tuple>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/tiling.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/limits.hpp"
#include "seqpar/sim/methods.hpp"
#include "seqpar/sim/pipeline_cost.hpp"
#include "seqpar/sim/validity.hpp"
#include "parallel.hpp"

namespace seqpar::sim {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The set that saves the most memory of those the framework runs: every option on. Each option
// never raises the peak, so this set bounds what any set it runs can fit.
MemoryOptions most_saving(const Framework& f) {
  MemoryOptions m;
  m.zero = *std::max_element(f.zero_stages.begin(), f.zero_stages.end());
  m.checkpoint = Checkpoint::full;
  m.offload_checkpoints = f.runs_offload_checkpoints;
  m.offload_optimizer = f.runs_offload_optimizer;
  m.offload_params = f.runs_offload_params && m.zero == 3;
  m.tiled_mlp = f.runs_tiled_mlp;
  m.tiled_loss = f.runs_tiled_loss;
  return m;
}

// The divisors of n >= 1, ascending (the 64-bit counterpart of methods.hpp's divisors).
std::vector<std::int64_t> divisors64(std::int64_t n) {
  std::vector<std::int64_t> low, high;
  for (std::int64_t d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

}  // namespace

bool ranks_before(const Result& a, const Result& b) {
  if (a.tokens_per_s_per_gpu != b.tokens_per_s_per_gpu) return a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu;
  return a.peak_memory_bytes() < b.peak_memory_bytes();
}

namespace {
int offload_count(const MemoryOptions& m) {
  return int(m.offload_checkpoints) + int(m.offload_optimizer) + int(m.offload_params);
}
// ZeRO's stage and the checkpointing level count as many options as their steps from none.
int option_count(const MemoryOptions& m) {
  const int checkpointing = m.checkpoint == Checkpoint::full ? 2 : m.checkpoint == Checkpoint::selective ? 1 : 0;
  return m.zero + checkpointing + int(m.tiled_mlp) + int(m.tiled_loss) + offload_count(m);
}
}  // namespace

bool lighter_options(const MemoryOptions& a, const MemoryOptions& b) {
  if (offload_count(a) != offload_count(b)) return offload_count(a) < offload_count(b);
  return option_count(a) < option_count(b);
}

std::string memory_choice_rule() {
  return fmt::format("the lightest set that fits within {:g}% of the fastest (fewest offloads, then fewest options)",
                     100 * kMemoryTieTolerance);
}

namespace {
// Within the tie of kMemoryTieTolerance: the one test the search and the choice share.
bool tied_with_fastest(const Result& r, double fastest_tokens_per_s) {
  return r.tokens_per_s_per_gpu >= fastest_tokens_per_s * (1 - kMemoryTieTolerance);
}
}  // namespace

bool chosen_before(const Result& a, const Result& b, double fastest_tokens_per_s) {
  const bool ta = tied_with_fastest(a, fastest_tokens_per_s), tb = tied_with_fastest(b, fastest_tokens_per_s);
  if (ta != tb) return ta;
  if (ta && lighter_options(a.plan.mem, b.plan.mem)) return true;
  if (ta && lighter_options(b.plan.mem, a.plan.mem)) return false;
  return ranks_before(a, b);
}

const std::vector<MemoryOptions>& memory_option_sets() {
  static const std::vector<MemoryOptions> sets = [] {
    std::vector<MemoryOptions> out;
    for (int zero = 0; zero <= 3; ++zero)
      for (int ck = 0; ck < 4; ++ck)
        for (int tm = 0; tm < 2; ++tm)
          for (int tl = 0; tl < 2; ++tl)
            for (int oo = 0; oo < 2; ++oo)
              for (int op = 0; op < (zero == 3 ? 2 : 1); ++op) {
              MemoryOptions m;
              m.zero = zero;
              m.checkpoint = ck == 0 ? Checkpoint::none : ck == 1 ? Checkpoint::selective : Checkpoint::full;
              m.offload_checkpoints = ck == 3;
              m.tiled_mlp = tm;
              m.tiled_loss = tl;
              m.offload_optimizer = oo;
              m.offload_params = op;
              out.push_back(m);
            }
    return out;
  }();
  return sets;
}

std::vector<int> tp_degrees(const Model& m, const System& s, int gpus) {
  std::vector<int> out{1};
  if (!s.profile.runs_tensor_parallel) return out;  // the framework has none
  for (int t = 2; t <= s.gpus_per_node && t <= gpus; t *= 2)
    if (gpus % t == 0 && m.heads % t == 0 && m.kv_heads >= 1 && m.kv_heads % t == 0 && m.ffn_hidden % t == 0)
      out.push_back(t);
  return out;
}

std::vector<int> pp_degrees(const Model& m, int rest) {
  std::vector<int> out;
  for (int pp : divisors(rest)) {
    if (pp > m.layers) break;
    Plan p;
    p.pp = pp;
    if (pp == 1 || stage_split(m, p) != StageSplit::none) out.push_back(pp);
  }
  return out;
}

std::vector<int> vp_degrees(const Model& m, int pp) {
  std::vector<int> out{1};
  if (pp <= 1) return out;
  Plan p;
  p.pp = pp;
  // The interleaved depths published recipes run: virtual stages of 4, 2 or 1 layers (Megatron-
  // Bridge's performance recipes: Llama 3 70B at PP 4 VP 5, 4 layers; Llama 3.1 405B at PP 8 VP 8,
  // 2 layers, at PP 16 VP 8, 1); deeper or shallower interleaving is for --vp to ask. Each v
  // splits the layers over pp x v (pipeline_cost.hpp: stage_split).
  const std::int64_t per_stage = (std::int64_t{m.layers} + pp - 1) / pp;
  for (int chunk : {4, 2, 1}) {
    const std::int64_t v = (per_stage + chunk - 1) / chunk;
    if (v <= 1 || v > limits::kMaxGpus || v == out.back()) continue;
    p.vp = static_cast<int>(v);
    if (stage_split(m, p) != StageSplit::none) out.push_back(p.vp);
  }
  return out;
}

void check_global_batch(const GlobalBatch& b) {
  if (b.tokens != 0) require_range("global_batch_tokens", b.tokens, 1, limits::kMaxGlobalBatchTokens);
  if (b.sequences != 0) require_range("global_batch", b.sequences, 1, limits::kMaxGlobalBatchSequences);
  if ((b.tokens != 0) == (b.sequences != 0))
    throw Error("global_batch: give the batch of one optimizer step once, in tokens (--global-batch-tokens) or in "
                "sequences (--global-batch)");
}

void check_search(int gpus, const SearchSpace& space) {
  require_range("gpus", gpus, 1, limits::kMaxGpus);
  for (const auto& [name, list] : {std::pair{"pp", &space.pp}, std::pair{"vp", &space.vp}, std::pair{"ep", &space.ep}})
    for (std::size_t i = 0; i < list->size(); ++i) {
      require_range(name, (*list)[i], 1, limits::kMaxGpus);
      for (std::size_t k = 0; k < i; ++k)
        if ((*list)[i] == (*list)[k]) throw Error(fmt::format("{}: {} is listed twice", name, (*list)[i]));
    }
  for (std::size_t i = 0; i < space.tp.size(); ++i) {
    require_range("tp", space.tp[i], 1, limits::kMaxGpus);
    for (std::size_t k = 0; k < i; ++k)
      if (space.tp[i] == space.tp[k]) throw Error(fmt::format("tp: {} is listed twice", space.tp[i]));
  }
  if (space.micro_batch) require_range("micro_batch", *space.micro_batch, 1, limits::kMaxMicroBatch);
  if (space.global_batch) check_global_batch(*space.global_batch);
  if (space.methods.empty()) throw Error("method: no method to search");
  for (std::size_t i = 0; i < space.methods.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (space.methods[i] == space.methods[k])
        throw Error(fmt::format("method: {} is listed twice", to_string(space.methods[i])));
  for (std::size_t i = 0; i < space.sp.size(); ++i) {
    require_range("sp", space.sp[i], 1, limits::kMaxGpus);
    for (std::size_t k = 0; k < i; ++k)
      if (space.sp[i] == space.sp[k]) throw Error(fmt::format("sp: {} is listed twice", space.sp[i]));
  }
  const auto any = [&](bool MethodEntry::*trait) {
    return std::any_of(space.methods.begin(), space.methods.end(), [&](Method x) { return method_entry(x).*trait; });
  };
  if (space.ulysses_degree) {
    require_range("ulysses_degree", *space.ulysses_degree, 1, limits::kMaxGpus);
    // Methods without a free Ulysses degree (U = P or U = 1) would ignore the flag.
    if (!any(&MethodEntry::free_ulysses_degree))
      throw Error(fmt::format("ulysses_degree: {} fixes the hybrid's Ulysses x Ring split, but --method does not "
                              "include hybrid; for Ulysses over {} GPUs give --sp {}",
                              *space.ulysses_degree, *space.ulysses_degree, *space.ulysses_degree));
  }
  const bool only_sp1 = space.sp.size() == 1 ? space.sp[0] == 1 : space.sp.empty() && gpus == 1;
  if (only_sp1 && !any(&MethodEntry::runs_at_sp1))
    throw Error(fmt::format("method: {} needs an SP degree of at least 2 (sp 1 is data parallelism only), so this "
                            "search has no plan; give more GPUs or --sp",
                            method_entry(space.methods[0]).name));
}

namespace {
// The structures of one TP degree and one pipeline depth: SP runs over the GPUs a TP group and the
// stages leave (a TP degree or stage count that does not divide them is kept, for check_plan to
// name).
void structures_at(const System& s, int gpus, int tp, int pp, int vp, std::int64_t seq_len, const SearchSpace& space,
                   std::vector<Plan>& out) {
  const int rest = gpus % (tp * pp) == 0 ? gpus / (tp * pp) : gpus;
  std::vector<int> sps = space.sp.empty() ? divisors(rest) : space.sp;
  // A searched (not given) TP degree or stage count pairs only with the given SP degrees it leaves
  // room for.
  if ((space.tp.empty() && tp > 1) || (space.pp.empty() && pp > 1))
    sps.erase(std::remove_if(sps.begin(), sps.end(), [&](int sp) { return rest % sp != 0; }), sps.end());
  auto add = [&](Method method, int sp, int u, int r) {
    Plan p;
    p.method = method;
    p.gpus = gpus;
    p.tp = tp;
    p.pp = pp;
    p.vp = vp;
    p.seq_len = seq_len;
    p.sp = sp;
    p.ulysses_degree = u;
    p.ring_degree = r;
    p.micro_batch = space.micro_batch.value_or(1);
    p.mem = default_memory_options(s.profile);  // a structure's own rules are checked with options its framework runs
    for (const Precision& precision : space.precisions) {
      p.precision = precision;
      out.push_back(p);
    }
  };
  for (int P : sps) {
    if (P == 1) {
      // No sequence parallelism: every method that runs at sp 1 is the same plan (degree 1),
      // listed once. A hybrid splits P into U x R, which sp 1 cannot, so a search for hybrids
      // alone leaves it out.
      const bool any = std::any_of(space.methods.begin(), space.methods.end(),
                                   [](Method x) { return method_entry(x).runs_at_sp1; });
      if (any) add(Method::ulysses, 1, 1, 1);
      continue;
    }
    for (Method method : space.methods) {
      if (!s.profile.runs_method(method)) continue;  // not this framework's: check_plan would name it
      for (const auto& [u, r] : method_entry(method).splits(P, space.ulysses_degree)) {
        const std::size_t first = out.size();
        add(method, P, u, r);
        // A hybrid over more than one node can put either group inside the nodes; the two
        // placements cost differently (comm_cost.hpp), so both are candidates.
        if (u > 1 && r > 1 && std::int64_t{P} * tp > s.gpus_per_node)
          for (std::size_t i = first, n = out.size(); i < n; ++i) {
            out.push_back(out[i]);
            out.back().placement = GroupPlacement::ring_inner;
          }
      }
    }
  }
}
}  // namespace

std::vector<Precision> fp8_candidates(const System& s) {
  const Framework& f = s.profile;
  const Gpu& g = s.gpu;
  if (g.fp8_flops <= 0 || !(f.fp8_parts & static_cast<std::uint8_t>(Fp8Part::gemm))) return {};
  Precision linear;
  linear.fp8 = static_cast<std::uint8_t>(Fp8Part::gemm) | (f.fp8_parts & static_cast<std::uint8_t>(Fp8Part::weights));
  bool found = false;
  for (Fp8Recipe r : {Fp8Recipe::mxfp8, Fp8Recipe::delayed, Fp8Recipe::current, Fp8Recipe::rowwise})
    if (!found && f.runs_fp8(r) && (r != Fp8Recipe::mxfp8 || g.compute_major() >= 10)) {
      linear.recipe = r;
      found = true;
    }
  if (!found) return {};
  std::vector<Precision> out{linear};
  if ((f.fp8_parts & static_cast<std::uint8_t>(Fp8Part::attention)) && g.fp8_attention_fwd_efficiency > 0) {
    Precision both = linear;
    both.fp8 |= static_cast<std::uint8_t>(Fp8Part::attention);
    out.push_back(both);
  }
  return out;
}

std::vector<int> ep_degrees(const Model& m, int gpus, int tp) {
  std::vector<int> out{1};
  if (!m.moe() || tp < 1 || gpus % tp != 0) return out;
  const int ranks = gpus / tp;
  for (int e = 2; e <= ranks && e <= m.experts.routed; e *= 2)
    if (ranks % e == 0 && m.experts.routed % e == 0) out.push_back(e);
  return out;
}

std::vector<Plan> structures(const Model& m, const System& s, int gpus, std::int64_t seq_len, const SearchSpace& space) {
  check_search(gpus, space);
  std::vector<Plan> out;
  for (int tp : space.tp.empty() ? tp_degrees(m, s, gpus) : space.tp) {
    const int rest = gpus % tp == 0 ? gpus / tp : gpus;
    const std::size_t first = out.size();
    // Without stages first: the plans a search without pipelines always listed come in their order.
    // A framework without pipeline stages, or a mixture of experts (stages not modelled for it), is
    // searched without them (a given --pp is kept, for check_plan to name the rule).
    const std::vector<int> pps = !space.pp.empty() ? space.pp
                                 : space.global_batch && s.profile.runs_pipeline_parallel && !m.moe() ? pp_degrees(m, rest)
                                                                                                   : std::vector<int>{1};
    for (int pp : pps) {
      if (space.pp.empty() && rest % pp != 0) continue;
      for (int vp : space.vp.empty() ? vp_degrees(m, pp) : space.vp) structures_at(s, gpus, tp, pp, vp, seq_len, space, out);
    }
    // Each structure once per EP degree (a dense model: ep 1 alone, the list unchanged).
    if (!m.moe() && space.ep.empty()) continue;
    const std::vector<int> eps = space.ep.empty() ? ep_degrees(m, gpus, tp) : space.ep;
    if (eps.size() == 1 && eps[0] == 1) continue;
    const std::vector<Plan> base(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    out.resize(first);
    for (const Plan& b : base)
      for (int e : eps) {
        out.push_back(b);
        out.back().ep = e;
      }
  }
  return out;
}

namespace {
// What the search of one structure's plans gives: the outcome (best_memory_options, best_plan_for)
// and the fastest plan that fits (advise's reasons name it).
struct Search {
  StructureOutcome outcome;
  std::optional<Result> fastest;
};

// The memory-option sets of one structure (each of its batch fills, `fills`; one plan without a
// global batch), or the fixed set, and the plan chosen_before keeps among those that fit.
//
// Every set is timed (simulate_time, on the fill's costs derived once) and its memory estimated
// (add_memory) only where it could decide the choice:
//  1. each fill in order of speed, down to its first set that fits, while a set could still be
//     faster than the fastest that fits so far: this finds the fastest throughput that fits, F;
//  2. the sets tied with F (kMemoryTieTolerance), lightest first by class (lighter_options: the same
//     offloads and count of options), down to the first class with a set that fits: the choice is
//     that class's first by chosen_before (the first among equals in fill and set order), which is
//     the first by chosen_before of every set that fits.
// Exact: no set above F fits (1 estimated them all), a set below the tie is never chosen whatever
// its memory, and a tied set of a heavier class loses to any tied set of a lighter class that fits.
// Only when no set fits is every set's memory needed (for the closest). The search then estimates
// the memory of a few sets of the ~160 of a structure, not of every one.
//
// A fill that breaks a rule, or whose every set is invalid, ends the search with its own outcome
// (its rule's reasons): a rule that breaks one micro-batch is taken to break them all.
Search search_structure(const Model& m, const System& s, std::span<const Plan> fills,
                        const std::optional<MemoryOptions>& fixed, const DocumentCosts* docs = nullptr) {
  // A thread's buffers, reused: no allocation per structure once they have grown.
  thread_local std::vector<Result> timed;       // every fill's valid sets, fill by fill in set order
  thread_local std::vector<bool> estimated;     // add_memory ran on timed[i]
  thread_local std::vector<std::size_t> begin;  // timed[begin[f] .. begin[f + 1]) are fill f's
  thread_local std::vector<std::size_t> order;
  timed.clear();
  estimated.clear();
  begin.clear();
  Search out;
  for (const Plan& fill : fills) {
    Plan p = fill;
    if (fixed) p.mem = *fixed;
    std::vector<std::string> errors;
    if (!check_plan(m, s, p, errors)) {
      out.outcome.reasons = std::move(errors);
      return out;
    }
    begin.push_back(timed.size());
    if (fixed) {
      Result r = docs ? simulate(m, s, p, *docs) : simulate(m, s, p);
      if (r.valid) {
        timed.push_back(std::move(r));
        estimated.push_back(true);
      }
    } else {
      const StructureCosts costs = structure_costs(m, s, p, docs);  // the same for every set
      for (const MemoryOptions& mem : memory_option_sets()) {
        if (!framework_runs(s.profile, mem)) continue;  // invalid: check_plan would name it
        p.mem = mem;
        Result r = simulate_time(m, s, p, costs);
        if (r.valid) {
          timed.push_back(std::move(r));
          estimated.push_back(false);
        }
      }
    }
    if (timed.size() == begin.back()) return out;  // no valid set: nothing to choose or report
  }
  begin.push_back(timed.size());
  auto estimate = [&](std::size_t i) {
    if (!estimated[i]) add_memory(m, s, timed[i]);
    estimated[i] = true;
    return timed[i].valid && timed[i].fits;
  };

  // 1. The fastest throughput that fits.
  std::optional<double> fastest;
  for (std::size_t f = 0; f + 1 < begin.size(); ++f) {
    order.resize(begin[f + 1] - begin[f]);
    std::iota(order.begin(), order.end(), begin[f]);
    std::sort(order.begin(), order.end(), [](std::size_t a, std::size_t b) {  // fastest first, then set order
      const double ta = timed[a].tokens_per_s_per_gpu, tb = timed[b].tokens_per_s_per_gpu;
      return ta != tb ? ta > tb : a < b;
    });
    for (const std::size_t i : order) {
      if (fastest && timed[i].tokens_per_s_per_gpu < *fastest) break;
      if (estimate(i)) {
        fastest = timed[i].tokens_per_s_per_gpu;
        break;
      }
    }
  }
  if (!fastest) {
    // Nothing fits: the closest of each fill (the smallest peak, the first among equals), and of
    // those the closest, whose reasons say why none fits (the smallest micro-batch holds the least).
    for (std::size_t i = 0; i < timed.size(); ++i) estimate(i);
    for (std::size_t f = 0; f + 1 < begin.size(); ++f) {
      const Result* closest = nullptr;
      for (std::size_t i = begin[f]; i < begin[f + 1]; ++i)
        if (timed[i].valid && (!closest || timed[i].peak_memory_bytes() < closest->peak_memory_bytes()))
          closest = &timed[i];
      if (closest && (!out.outcome.closest || closest->peak_memory_bytes() < out.outcome.closest->peak_memory_bytes()))
        out.outcome.closest = *closest;
    }
    if (out.outcome.closest) {
      const Result& c = *out.outcome.closest;
      const MemoryBreakdown& b = c.memory.peak;
      std::pair<double, const char*> parts[] = {
          {b.parameters, "parameters"}, {b.gradients, "gradients"}, {b.optimizer_states, "optimizer states"},
          {b.activations, "activations"}, {b.checkpoints, "checkpoints"}, {b.attention_buffers, "attention buffers"},
          {b.working, "working set"}, {b.logits, "logits"}};
      const auto top = *std::max_element(std::begin(parts), std::end(parts));
      out.outcome.reasons.push_back(fmt::format(
          "does not fit: peak {:.1f} GiB > {:.1f} GiB per GPU even with {} (largest part: {} {:.1f} GiB)",
          c.peak_memory_bytes() / kGiB, c.capacity_bytes / kGiB,
          fixed ? "the given memory options" : "the most memory-saving options", top.second, top.first / kGiB));
    }
    return out;
  }

  // The fastest itself: of the sets that fit at F, the first by ranks_before.
  for (std::size_t i = 0; i < timed.size(); ++i)
    if (timed[i].tokens_per_s_per_gpu == *fastest && estimate(i) && (!out.fastest || ranks_before(timed[i], *out.fastest)))
      out.fastest = timed[i];

  // 2. The tied sets, lightest class first.
  order.clear();
  for (std::size_t i = 0; i < timed.size(); ++i)
    if (tied_with_fastest(timed[i], *fastest)) order.push_back(i);
  std::sort(order.begin(), order.end(), [](std::size_t a, std::size_t b) {
    const MemoryOptions &ma = timed[a].plan.mem, &mb = timed[b].plan.mem;
    if (lighter_options(ma, mb)) return true;
    if (lighter_options(mb, ma)) return false;
    return a < b;
  });
  for (std::size_t k = 0; k < order.size() && !out.outcome.best;) {
    std::size_t end = k + 1;  // [k, end): one class
    while (end < order.size() && !lighter_options(timed[order[k]].plan.mem, timed[order[end]].plan.mem)) ++end;
    const Result* best = nullptr;  // the class's first by chosen_before (tied and equally light: by ranks_before)
    for (std::size_t c = k; c < end; ++c)
      if (estimate(order[c]) && (!best || chosen_before(timed[order[c]], *best, *fastest))) best = &timed[order[c]];
    if (best) out.outcome.best = *best;
    k = end;
  }
  return out;
}
}  // namespace

StructureOutcome best_memory_options(const Model& m, const System& s, const Plan& structure,
                                     const std::optional<MemoryOptions>& fixed) {
  return search_structure(m, s, std::span<const Plan>(&structure, 1), fixed).outcome;
}

std::optional<std::int64_t> global_sequences(const GlobalBatch& b, std::int64_t seq_len, std::string& why) {
  if (b.sequences > 0) return b.sequences;
  if (seq_len < 1 || b.tokens % seq_len != 0) {
    why = fmt::format("global_batch_tokens: {} tokens are not a whole number of {}-token sequences; give a multiple "
                      "of the sequence length", b.tokens, seq_len);
    return std::nullopt;
  }
  return b.tokens / seq_len;
}

std::vector<Plan> batch_fills(const Plan& structure, std::int64_t sequences, std::optional<int> micro_batch,
                              std::string& why) {
  const std::int64_t dp = structure.dp();
  if (dp < 1 || sequences < 1) {
    why = fmt::format("global batch: {} sequences cannot be shared by dp {}", sequences, dp);
    return {};
  }
  if (sequences % dp != 0) {
    // dp = gpus / (tp x sp x pp): the degrees that leave it, as the plan has them.
    const bool tp = structure.tp > 1 || structure.pp > 1;
    const std::string of =
        structure.pp > 1 ? fmt::format("gpus {} / (tp {} x sp {} x pp {})", structure.gpus, structure.tp, structure.sp,
                                       structure.pp)
        : tp             ? fmt::format("gpus {} / (tp {} x sp {})", structure.gpus, structure.tp, structure.sp)
                         : fmt::format("gpus {} / sp {}", structure.gpus, structure.sp);
    why = dp > sequences
              ? fmt::format("global batch: {} sequence{} per optimizer step cannot reach dp {} replicas ({}): each "
                            "needs a sequence of its own; raise {} to {} or more",
                            sequences, sequences == 1 ? "" : "s", dp, of,
                            structure.pp > 1 ? "tp x sp x pp" : tp ? "tp x sp" : "sp",
                            (structure.gpus + sequences - 1) / sequences)
              : fmt::format("global batch: {} sequences per optimizer step do not split evenly over dp {} replicas ({})",
                            sequences, dp, of);
    return {};
  }
  const std::int64_t share = sequences / dp;  // sequences per replica per optimizer step
  if (micro_batch && share % *micro_batch != 0) {
    why = fmt::format("global batch: each of dp {} replicas gets {} sequence{} per optimizer step, not a multiple of "
                      "micro_batch {}", dp, share, share == 1 ? "" : "s", *micro_batch);
    return {};
  }
  std::vector<Plan> out;
  const std::vector<std::int64_t> all = divisors64(share);
  // Largest micro-batch first: fewest micro-steps.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::int64_t mb = *it, accum = share / mb;
    if (micro_batch ? mb != *micro_batch : mb > limits::kMaxMicroBatch) continue;
    if (accum > limits::kMaxGradAccumSteps) break;  // smaller micro-batches need still more micro-steps
    // The interleaved schedule runs the micro-batches round the stages in groups of pp
    // (plan_validity.cpp): a fill that breaks it is not a way to fill the batch.
    if (structure.vp > 1 && accum % structure.pp != 0) continue;
    Plan p = structure;
    p.micro_batch = int(mb);
    p.grad_accum_steps = int(accum);
    out.push_back(p);
  }
  if (out.empty() && structure.vp > 1)
    why = fmt::format("global batch: each of dp {} replicas gets {} sequence{} per optimizer step, which no micro-batch{} "
                      "turns into a multiple of pp {} micro-batches, as the interleaved schedule (vp {}) needs",
                      dp, share, share == 1 ? "" : "s", micro_batch ? fmt::format(" of {}", *micro_batch) : std::string(),
                      structure.pp, structure.vp);
  else if (out.empty())
    why = fmt::format("global batch: each of dp {} replicas would run {} sequences per optimizer step in more than the "
                      "limit of {} micro-steps (micro-batch at most {})", dp, share, limits::kMaxGradAccumSteps,
                      micro_batch.value_or(limits::kMaxMicroBatch));
  return out;
}

namespace {
Search search_fills(const Model& m, const System& s, const Plan& structure, const SearchSpace& space,
                    const DocumentCosts* docs);
// best_plan_for's search, with the fastest plan that fits.
Search search_plan(const Model& m, const System& s, const Plan& structure, const SearchSpace& space,
                   const DocumentCosts* docs) {
  Search out = [&] {
    if (!space.global_batch) {
      Plan p = structure;
      p.micro_batch = space.micro_batch.value_or(1);
      p.grad_accum_steps = 1;
      return search_structure(m, s, std::span<const Plan>(&p, 1), space.memory, docs);
    }
    return search_fills(m, s, structure, space, docs);
  }();
  if (docs) {
    for (std::optional<Result>* r : {&out.outcome.best, &out.outcome.closest, &out.fastest})
      if (*r) (*r)->balancer = docs->balancer;
  }
  return out;
}

Search search_fills(const Model& m, const System& s, const Plan& structure, const SearchSpace& space,
                    const DocumentCosts* docs) {
  Search out;
  std::string why;
  const std::optional<std::int64_t> sequences = global_sequences(*space.global_batch, structure.seq_len, why);
  // With stages, one sequence per micro-batch unless --micro-batch says otherwise: a larger one
  // leaves fewer micro-batches to fill the pipeline (a larger bubble, (p - 1) / m) and holds more
  // activations in flight, for GEMMs that are long already (the published pipelined recipes run
  // micro-batch 1: Llama 3 405B, arXiv 2407.21783 Table 4; Megatron-Bridge's Llama 3 rows).
  std::optional<int> micro_batch = space.micro_batch;
  if (!micro_batch && structure.pp > 1) micro_batch = 1;
  const std::vector<Plan> fills = sequences ? batch_fills(structure, *sequences, micro_batch, why) : std::vector<Plan>{};
  if (fills.empty()) {
    out.outcome.reasons.push_back(std::move(why));
    return out;
  }
  // Every micro-batch that fills the batch, with every set of memory options, chosen among as one
  // (the tie is with the fastest of all).
  return search_structure(m, s, fills, space.memory, docs);
}
}  // namespace

StructureOutcome best_plan_for(const Model& m, const System& s, const Plan& structure, const SearchSpace& space,
                               const DocumentCosts* docs) {
  return search_plan(m, s, structure, space, docs).outcome;
}

namespace {

double slower_pct(const Result& best, const Result& other) {
  return 100.0 * (best.tokens_per_s_per_gpu / other.tokens_per_s_per_gpu - 1.0);
}

// The first reason of a rejected plan the predicate picks, labelled with the plan; empty if none.
template <class Pick>
std::string first_rejection(const Advice& a, Pick pick) {
  for (const Rejection& r : a.rejected)
    if (pick(r.plan) && !r.reasons.empty()) return fmt::format("{}: {}", describe_structure(r.plan), r.reasons.front());
  return {};
}

// Why each option of a chosen set is there. The set without it (the ZeRO stage one lower, the
// checkpointing one level less, an offload or a tiling off, and what needs the option removed with
// it: parameter offload below ZeRO-3, checkpoint offload below full checkpointing) is lighter, so
// it either does not fit, or fits but is slower than the chosen set's tie (else it would have been
// chosen), or is not a plan the framework runs.
std::vector<std::string> option_reasons(const Model& m, const System& s, const Result& chosen,
                                        const DocumentCosts* docs) {
  const MemoryOptions& o = chosen.plan.mem;
  std::vector<MemoryOptions> withouts;
  auto without = [&](auto change) {
    MemoryOptions w = o;
    change(w);
    if (w.zero < 3) w.offload_params = false;
    if (w.checkpoint != Checkpoint::full) w.offload_checkpoints = false;
    withouts.push_back(w);
  };
  if (o.zero > 0) without([](MemoryOptions& w) { --w.zero; });
  if (o.checkpoint != Checkpoint::none)
    without([](MemoryOptions& w) {
      w.checkpoint = w.checkpoint == Checkpoint::full ? Checkpoint::selective : Checkpoint::none;
    });
  if (o.offload_checkpoints) without([](MemoryOptions& w) { w.offload_checkpoints = false; });
  if (o.offload_optimizer) without([](MemoryOptions& w) { w.offload_optimizer = false; });
  if (o.offload_params) without([](MemoryOptions& w) { w.offload_params = false; });
  if (o.tiled_mlp) without([](MemoryOptions& w) { w.tiled_mlp = false; });
  if (o.tiled_loss) without([](MemoryOptions& w) { w.tiled_loss = false; });

  // An option's name as describe() spells it: the first word of the chosen set's missing from the other's.
  auto words = [](const std::string& text) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find(' ', at), text.size());
      out.push_back(text.substr(at, end - at));
      at = end + 1;
    }
    return out;
  };
  const std::vector<std::string> have = words(describe(o));
  std::vector<std::string> out;
  for (const MemoryOptions& w : withouts) {
    const std::vector<std::string> lack = words(describe(w));
    const auto name = std::find_if(have.begin(), have.end(),
                                   [&](const std::string& x) { return std::find(lack.begin(), lack.end(), x) == lack.end(); });
    Plan p = chosen.plan;
    p.mem = w;
    const Result r = docs ? simulate(m, s, p, *docs) : simulate(m, s, p);
    std::string why;
    if (!r.valid) {
      why = fmt::format("kept: without it ({}) the plan breaks a rule: {}", describe(w),
                        r.errors.empty() ? std::string("?") : r.errors.front());
    } else if (!r.gpu_fits) {
      why = fmt::format("needed to fit: peak without it ({}) {:.1f} of {:.1f} GiB", describe(w),
                        r.peak_memory_bytes() / kGiB, r.capacity_bytes / kGiB);
    } else if (!r.host_fits) {
      why = fmt::format("needed to fit: without it ({}) the node's host memory holds {:.1f} of {:.1f} GiB", describe(w),
                        r.host_node_bytes / kGiB, r.host_capacity_bytes / kGiB);
    } else {
      why = fmt::format("faster by {:.1f}% than without it ({}, peak {:.1f} GiB)", slower_pct(chosen, r), describe(w),
                        r.peak_memory_bytes() / kGiB);
    }
    out.push_back(fmt::format("memory option {}: {}", name == have.end() ? describe(o) : *name, why));
  }
  return out;
}

// Advice::reasons (advisor.hpp).
std::vector<std::string> explain_choice(const Model& m, const System& s, int gpus, const SearchSpace& space,
                                        const Advice& a, const DocumentCosts* docs) {
  std::vector<std::string> out;
  const Result* best = a.best();
  if (!best) return out;
  const Plan& b = best->plan;
  out.push_back(fmt::format("{} is the fastest of {} plans that fit ({} rejected): {:.0f} tokens/s per GPU",
                            describe_structure(b), a.ranked.size(), a.rejected.size(), best->tokens_per_s_per_gpu));
  // Tensor parallelism against the best plan of the other side (ranked is fastest first).
  auto first = [&](auto pick) -> const Result* {
    for (const Result& r : a.ranked)
      if (pick(r.plan)) return &r;
    return nullptr;
  };
  const double tp_share = best->step_time_s > 0 ? 100.0 * best->time.tp_comm / best->step_time_s : 0.0;
  if (b.tp > 1) {
    const Result* without = first([](const Plan& p) { return p.tp == 1; });
    const std::string heads = first_rejection(a, [](const Plan& p) { return p.tp == 1 && p.method == Method::ulysses; });
    if (without) {
      out.push_back(fmt::format(
          "tp={}: {:.1f}% faster than the best plan without tensor parallelism ({}, peak {:.1f} GiB against {:.1f}); TP "
          "shards the weights, gradients, optimizer states and activations {} ways, and its all-gathers and "
          "reduce-scatters take {:.1f}% of the step",
          b.tp, slower_pct(*best, *without), describe(without->plan), without->peak_memory_bytes() / kGiB,
          best->peak_memory_bytes() / kGiB, b.tp, tp_share));
    } else {
      const std::string why = first_rejection(a, [](const Plan& p) { return p.tp == 1; });
      out.push_back(fmt::format("tp={}: no plan without tensor parallelism is valid and fits{}", b.tp,
                                why.empty() ? std::string() : fmt::format(" (e.g. {})", why)));
    }
    if (!heads.empty() && heads.find("heads") != std::string::npos)
      out.push_back(fmt::format("without TP the head rules cap Ulysses: {}", heads));
  } else {
    const std::vector<int> tps = space.tp.empty() ? tp_degrees(m, s, gpus) : space.tp;
    const Result* with = first([](const Plan& p) { return p.tp > 1; });
    std::vector<int> above_one;
    std::copy_if(tps.begin(), tps.end(), std::back_inserter(above_one), [](int t) { return t > 1; });
    if (above_one.empty()) {
      out.push_back(space.tp.empty()
                        ? fmt::format("tp=1: no tensor-parallel degree was searched: none of 2..{} divides the GPUs, "
                                      "the {} query heads, {} KV heads and MLP width as TP needs",
                                      s.gpus_per_node, m.heads, m.kv_heads)
                        : std::string("tp=1: tensor parallelism was not searched (--tp 1)"));
    } else if (!with && std::none_of(a.rejected.begin(), a.rejected.end(), [](const Rejection& r) { return r.plan.tp > 1; })) {
      out.push_back(fmt::format("tp=1: no tensor-parallel structure was searched: no TP degree of {} leaves room for "
                                "the SP degrees searched (tp x sp must divide the {} GPUs)",
                                fmt::join(above_one, ", "), gpus));
    } else if (with) {
      const double share = with->step_time_s > 0 ? 100.0 * with->time.tp_comm / with->step_time_s : 0.0;
      out.push_back(fmt::format(
          "tp=1: tensor parallelism not chosen: the best TP plan ({}) is {:.1f}% slower; its all-gathers and "
          "reduce-scatters take {:.1f}% of its step, and without TP the plan already fits (peak {:.1f} of {:.1f} GiB)",
          describe(with->plan), slower_pct(*best, *with), share, best->peak_memory_bytes() / kGiB,
          best->capacity_bytes / kGiB));
    } else {
      const std::string why = first_rejection(a, [](const Plan& p) { return p.tp > 1; });
      out.push_back(fmt::format("tp=1: no tensor-parallel plan is valid and fits{}",
                                why.empty() ? std::string() : fmt::format(" (e.g. {})", why)));
    }
  }
  // Pipeline stages against the best plan of the other side: the bubble, the sends and their link,
  // and the memory they save.
  auto pipeline_terms = [&](const Result& r) {
    const Plan& p = r.plan;
    const double step = r.step_time_s > 0 ? r.step_time_s : 1.0;
    const bool crosses = crossing_flows_per_nic(s, Collective::send_recv, place_pp_group(s, p)) > 0;
    return fmt::format("its bubble ((pp - 1) / (vp x micro-batches) = {} / ({} x {})) takes {:.1f}% of the step and "
                       "its sends between stages {:.1f}% ({})",
                       p.pp - 1, p.vp, p.grad_accum_steps, 100.0 * r.time.pipeline_bubble / step,
                       100.0 * r.time.pp_comm / step, crosses ? "across nodes" : "inside a node");
  };
  if (b.pp > 1) {
    const Result* without = first([](const Plan& p) { return p.pp == 1; });
    const std::string split = fmt::format("{} layers a stage, the peak memory on stage {} of {}", stage_layers(m, b),
                                          best->memory.peak_stage, b.pp);
    if (without)
      out.push_back(fmt::format("pp={}{}: {:.1f}% faster than the best plan without pipeline stages ({}, peak {:.1f} GiB "
                                "against {:.1f}); {}; {}",
                                b.pp, b.vp > 1 ? fmt::format(" vp={}", b.vp) : std::string(), slower_pct(*best, *without),
                                describe(without->plan), without->peak_memory_bytes() / kGiB,
                                best->peak_memory_bytes() / kGiB, split, pipeline_terms(*best)));
    else {
      const std::string why = first_rejection(a, [](const Plan& p) { return p.pp == 1; });
      out.push_back(fmt::format("pp={}: no plan without pipeline stages is valid and fits{}; {}; {}", b.pp,
                                why.empty() ? std::string() : fmt::format(" (e.g. {})", why), split,
                                pipeline_terms(*best)));
    }
  } else if (const Result* with = first([](const Plan& p) { return p.pp > 1; })) {
    out.push_back(fmt::format("pp=1: pipeline stages not chosen: the best pipelined plan ({}) is {:.1f}% slower; {}",
                              describe(with->plan), slower_pct(*best, *with), pipeline_terms(*with)));
  } else if (!space.pp.empty() || (space.global_batch && s.profile.runs_pipeline_parallel)) {
    const std::string why = first_rejection(a, [](const Plan& p) { return p.pp > 1; });
    if (!why.empty()) out.push_back(fmt::format("pp=1: no pipelined plan is valid and fits (e.g. {})", why));
  } else if (space.global_batch && !s.profile.runs_pipeline_parallel) {
    // (Without a global batch a step is one micro-batch, which leaves a pipeline of p stages idle
    // (p - 1) / p of it: not searched, and not worth a line.)
    out.push_back(fmt::format("pp=1: pipeline stages not searched: framework {} runs none (--framework megatron-core "
                              "searches them)", s.profile.name));
  }
  // A MoE model: the expert-parallel degree against the best plan of another, and the experts'
  // all-to-alls beside the attention's communication (moe_cost.hpp).
  if (m.moe()) {
    const double step = best->step_time_s > 0 ? best->step_time_s : 1.0;
    const Result* alt = first([&](const Plan& p) { return p.ep != b.ep; });
    out.push_back(fmt::format(
        "ep={}: {}; the expert all-to-alls take {:.1f}% of the step beside the attention's communication {:.1f}% "
        "({} of {} experts per rank)",
        b.ep,
        alt ? fmt::format("{:.1f}% faster than the best plan with ep={} ({})", slower_pct(*best, *alt), alt->plan.ep,
                          describe(alt->plan))
            : std::string("no plan with another EP degree fits"),
        100.0 * best->time.expert_comm / step, 100.0 * best->time.attention_comm / step,
        m.experts.routed / std::max(1, b.ep), m.experts.routed));
  }
  // The SP method and degree against the fastest plan of another structure with the same TP.
  const Result* other = first([&](const Plan& p) {
    return p.tp == b.tp && p.pp == b.pp && p.vp == b.vp &&
           (p.method != b.method || p.sp != b.sp || p.ulysses_degree != b.ulysses_degree || p.placement != b.placement);
  });
  if (other)
    out.push_back(fmt::format("{} over the next structure, {} ({:.1f}% slower)", describe_structure(b),
                              describe_structure(other->plan), slower_pct(*best, *other)));
  // The precision, where more than one was searched (--allow-fp8): against the fastest plan of another.
  if (space.precisions.size() > 1) {
    const auto label = [](const Precision& x) { return x.any_fp8() ? "fp8=" + fp8_parts_text(x) : std::string("bf16"); };
    const Result* alt = first([&](const Plan& p) { return !(p.precision == b.precision); });
    if (alt)
      out.push_back(fmt::format("{}: {:.1f}% faster than the best plan in {} ({})", label(b.precision),
                                slower_pct(*best, *alt), label(alt->plan.precision), describe(alt->plan)));
    else
      out.push_back(fmt::format("{}: no plan in another precision fits{}", label(b.precision),
                                [&] {
                                  const std::string why =
                                      first_rejection(a, [&](const Plan& p) { return !(p.precision == b.precision); });
                                  return why.empty() ? std::string() : fmt::format(" (e.g. {})", why);
                                }()));
  }
  if (space.global_batch)
    out.push_back(fmt::format("fills the global batch of {} sequences as dp {} x micro-batch {} x {} micro-step{}",
                              b.global_batch_sequences(), b.dp(), b.micro_batch, b.grad_accum_steps,
                              b.grad_accum_steps == 1 ? "" : "s"));
  if (space.memory) {
    out.push_back(fmt::format("memory options {}: as given (peak {:.1f} of {:.1f} GiB)", describe(b.mem),
                              best->peak_memory_bytes() / kGiB, best->capacity_bytes / kGiB));
    return out;
  }
  // The fastest plan that fits of the best plan's structure.
  const Search search = search_plan(m, s, b, space, docs);
  const Result* fastest = search.fastest ? &*search.fastest : best;
  const bool fill = fastest->plan.micro_batch != b.micro_batch || fastest->plan.grad_accum_steps != b.grad_accum_steps;
  out.push_back(fmt::format(
      "memory options {} (peak {:.1f} of {:.1f} GiB): {}", describe(b.mem), best->peak_memory_bytes() / kGiB,
      best->capacity_bytes / kGiB,
      fastest == best || fastest->tokens_per_s_per_gpu == best->tokens_per_s_per_gpu
          ? fmt::format("{}, and the fastest", memory_choice_rule())
          : fmt::format("{}; the fastest, {}, is {:.1f}% faster", memory_choice_rule(),
                        fill ? describe(fastest->plan) : describe(fastest->plan.mem), slower_pct(*fastest, *best))));
  for (std::string& why : option_reasons(m, s, *best, docs)) out.push_back(std::move(why));
  return out;
}

// Why the best plan's load balancer: its slowest rank against the mean at this mix, beside the
// method's own layout's and the next balancer's of the same structure.
template <class CostsFor>
std::string explain_balancer(const Advice& a, const DocumentCosts& best, CostsFor&& costs_for) {
  const Result& r = *a.best();
  std::string out = fmt::format("load balancer {}: the slowest ring rank does {:.2f}x the mean attention work at this mix "
                                "(p95 {:.2f}); the documents leave {:.1f}% of one causal sequence's work",
                                to_string(best.balancer), best.work.imbalance_tiles_mean,
                                best.work.imbalance_tiles_p95, 100 * best.work_ratio);
  for (const Result& other : a.ranked) {
    const Plan &x = other.plan, &y = r.plan;
    const bool same = x.method == y.method && x.tp == y.tp && x.ulysses_degree == y.ulysses_degree &&
                      x.ring_degree == y.ring_degree && x.placement == y.placement;
    if (&other == &r || !other.balancer || !same) continue;
    out += fmt::format("; {} of the same structure is {:.1f}% slower (slowest rank {:.2f}x)", to_string(*other.balancer),
                       slower_pct(r, other), costs_for(other.plan, *other.balancer).work.imbalance_tiles_mean);
    break;
  }
  return out;
}

}  // namespace

Advice advise(const Model& m, const System& s, int gpus, std::int64_t seq_len, const SearchSpace& space) {
  check_search(gpus, space);
  if (space.global_batch) {
    // A batch of tokens that is no whole number of sequences rules out every plan alike: the
    // input is wrong, not a plan.
    std::string why;
    if (!global_sequences(*space.global_batch, seq_len, why)) throw Error(why);
  }
  Advice a;
  // Under a packed-document workload each structure runs with every load balancer worth comparing
  // (balancers_for), each counted once per (U, R, all-gather, balancer) and shared by the TP
  // degrees, placements and fills that have them.
  std::map<std::tuple<int, int, bool, Balancer>, DocumentCosts> counted;
  auto costs_for = [&](const Plan& st, Balancer b) -> const DocumentCosts& {
    const auto key = std::make_tuple(st.ulysses_degree, st.ring_degree, kv_all_gather(st), b);
    auto it = counted.find(key);
    if (it == counted.end()) it = counted.emplace(key, document_costs(*space.documents, st, b, s.gpu)).first;
    return it->second;
  };
  auto reject = [&](const Plan& st, StructureOutcome& o) {
    a.rejected.push_back({o.closest ? o.closest->plan : (space.memory ? [&] { Plan q = st; q.mem = *space.memory; return q; }() : st),
                          std::move(o.reasons), o.closest.has_value()});
  };
  const std::vector<Plan> all = structures(m, s, gpus, seq_len, space);
  if (!space.documents) {
    // Each structure's search is independent (parallel.hpp): outcomes kept by index, then taken in
    // the structures' order, as a serial loop would.
    std::vector<StructureOutcome> outcomes(all.size());
    parallel_for(all.size(), 64, [&](std::size_t i) {
      try {
        outcomes[i] = best_plan_for(m, s, all[i], space);
      } catch (const std::exception& e) {
        outcomes[i] = StructureOutcome{};
        outcomes[i].reasons = {e.what()};
      }
    });
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (outcomes[i].best) a.ranked.push_back(std::move(*outcomes[i].best));
      else reject(all[i], outcomes[i]);
    }
  }
  for (const Plan& st : space.documents ? all : std::vector<Plan>{}) {
    for (const Balancer b : balancers_for(st)) {
      StructureOutcome o;
      std::vector<std::string> errors;
      if (!check_plan(m, s, st, errors)) {
        o.reasons = std::move(errors);  // a plan rule: every balancer alike
        reject(st, o);
        break;
      }
      try {
        o = best_plan_for(m, s, st, space, &costs_for(st, b));
      } catch (const Error& e) {
        o.reasons = {fmt::format("balancer {}: {}", to_string(b), e.what())};
      }
      if (o.best) a.ranked.push_back(std::move(*o.best));
      else reject(st, o);
    }
  }
  std::stable_sort(a.ranked.begin(), a.ranked.end(), ranks_before);
  const DocumentCosts* best_docs =
      a.best() && a.best()->balancer ? &costs_for(a.best()->plan, *a.best()->balancer) : nullptr;
  a.reasons = explain_choice(m, s, gpus, space, a, best_docs);
  if (best_docs) a.reasons.insert(a.reasons.begin() + 1, explain_balancer(a, *best_docs, costs_for));
  return a;
}

namespace {
// The largest k in [lo, hi] with ok(k), given ok(lo) and that ok holds on a prefix of [lo, hi].
template <class Ok>
std::int64_t last_true(std::int64_t lo, std::int64_t hi, Ok ok) {
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (ok(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
}  // namespace

std::string_view to_string(LengthLimit l) {
  switch (l) {
    case LengthLimit::none: return "none";
    case LengthLimit::gpu_memory: return "gpu-memory";
    case LengthLimit::host_memory: return "host-memory";
    case LengthLimit::rule: return "rule";
    case LengthLimit::search_limit: return "search-limit";
  }
  return "none";
}

namespace {
// What stops `p` at the next length after `last` (a multiple of its granularity): a rule it breaks
// there, or the memory that no longer holds it.
void name_limit(const Model& m, const System& s, Plan p, std::int64_t last, std::int64_t gran, MaxLenSearch& out,
                const SimulateAt& simulate_at) {
  if (last > limits::kMaxSeqLen - gran) {
    out.limit = LengthLimit::search_limit;
    out.limit_why = fmt::format("the search stops at {} tokens", limits::kMaxSeqLen);
    return;
  }
  p.seq_len = last + gran;
  std::vector<std::string> errors;
  if (!check_plan(m, s, p, errors)) {
    out.limit = LengthLimit::rule;
    out.limit_why = errors.front();
    return;
  }
  const Result r = simulate_at(p);
  if (!r.valid) {  // a load balancer's rule at that length (document workloads)
    out.limit = LengthLimit::rule;
    out.limit_why = r.errors.empty() ? std::string("invalid plan") : r.errors.front();
  } else if (!r.gpu_fits) {
    out.limit = LengthLimit::gpu_memory;
    out.limit_why = fmt::format("GPU memory: {} tokens need {:.2f} of {:.2f} GiB", p.seq_len, r.peak_memory_bytes() / kGiB,
                                r.capacity_bytes / kGiB);
  } else if (!r.host_fits) {
    out.limit = LengthLimit::host_memory;
    out.limit_why = fmt::format("host memory: {} tokens offload {:.1f} of the node's {:.1f} GiB", p.seq_len,
                                r.host_node_bytes / kGiB, r.host_capacity_bytes / kGiB);
  }
}
}  // namespace

namespace {
// Whether the plan at k granules of its length breaks no rule and fits (simulate_at's answer): the
// test both length searches bisect or gallop on.
struct FitsAtGranules {
  const Model& m;
  const System& s;
  Plan p;
  const SimulateAt& simulate_at;
  std::int64_t gran;
  std::vector<std::string> errors{};
  bool operator()(std::int64_t k) {
    p.seq_len = k * gran;
    errors.clear();
    if (!check_plan(m, s, p, errors)) return false;
    const Result r = simulate_at(p);
    return r.valid && r.fits;
  }
};
}  // namespace

MaxLenSearch max_seq_len_search(const Model& m, const System& s, const Plan& plan) {
  return max_seq_len_search(m, s, plan, [&](const Plan& p) { return simulate(m, s, p); });
}

MaxLenSearch max_seq_len_search(const Model& m, const System& s, const Plan& plan, const SimulateAt& simulate_at) {
  const Plan& p = plan;
  const std::int64_t gran = seq_granularity(p);
  FitsAtGranules ok{m, s, plan, simulate_at, gran};
  MaxLenSearch out;
  constexpr std::int64_t kLimit = limits::kMaxSeqLen;  // a trillion tokens: no GPU fits more
  const std::int64_t k_max = kLimit / gran;
  if (k_max < 1 || !ok(1)) return out;
  // Runs of one tile count: a rank holds k x `per_k` tokens of each sequence; run c holds the k with
  // ceil(k x per_k / hidden) = c. Without tiling the whole range is one run.
  const bool tiled = p.mem.tiled_mlp || p.mem.tiled_loss;
  const std::int64_t per_k = std::max<std::int64_t>(1, gran / std::max(1, p.sp));
  const std::int64_t h = m.hidden;
  auto run_end = [&](std::int64_t c) {  // the last k of run c
    if (!tiled) return k_max;
    return std::min(k_max, c * h / per_k);  // c x h <= k_max x per_k + h: no overflow
  };
  auto run_start = [&](std::int64_t c) { return c <= 1 ? std::int64_t{1} : run_end(c - 1) + 1; };
  auto run_of = [&](std::int64_t k) { return tiled ? alst_tile_count(k * per_k, h) : std::int64_t{1}; };
  // The last run whose first length fits (first lengths fit on a prefix of the runs: every term
  // but the tile grows with the length, and the first tile of a run grows with the run).
  const std::int64_t runs = run_of(k_max);
  auto first_fits = [&](std::int64_t c) { return run_start(c) <= k_max && ok(run_start(c)); };
  std::int64_t lo = 1, hi = 2;
  while (hi <= runs && first_fits(hi)) {
    lo = hi;
    hi = hi > runs / 2 ? runs + 1 : hi * 2;  // the next probe, or past the last run
  }
  const std::int64_t run = last_true(lo, std::min(hi, runs + 1) - 1, first_fits);
  // In that run, the longest length that fits (the peak grows with the length inside a run).
  auto grow = [&](std::int64_t start, std::int64_t end) {
    std::int64_t a = start, b = start + 1;
    while (b <= end && ok(b)) {
      a = b;
      const std::int64_t next = start + 2 * (b - start);
      b = next > end ? end + 1 : next;
    }
    return last_true(a, std::min(b, end + 1) - 1, ok);
  };
  out.max_seq_len = grow(run_start(run), run_end(run)) * gran;
  name_limit(m, s, p, out.max_seq_len, gran, out, simulate_at);
  // Runs below whose longest lengths do not fit: a suffix of them (their last lengths' peaks grow
  // with the run). Each gap runs from the first length of its run that does not fit to the run's end.
  if (run > 1) {
    auto end_fits = [&](std::int64_t c) { return ok(run_end(c)); };
    std::int64_t first_gap = run;  // the first run below `run` whose end does not fit, if any
    if (!end_fits(run - 1)) {
      std::int64_t good = 0, bad = run - 1;  // end_fits(good) or good = 0; !end_fits(bad)
      while (bad - good > 1) {
        const std::int64_t mid = good + (bad - good) / 2;
        (end_fits(mid) ? good : bad) = mid;
      }
      first_gap = bad;
    }
    out.gap_count = run - first_gap;
    for (std::int64_t c = first_gap; c < run && out.gaps.size() < kMaxGapsListed; ++c) {
      const std::int64_t last_ok = grow(run_start(c), run_end(c));
      out.gaps.push_back({(last_ok + 1) * gran, run_end(c) * gran});
    }
  }
  return out;
}

std::int64_t max_seq_len(const Model& m, const System& s, const Plan& plan) {
  return max_seq_len_search(m, s, plan).max_seq_len;
}

namespace {
// The largest k in [1, k_hi] with ok(k), found from `hint` outwards, given ok(1) and that ok holds
// on a prefix of [1, k_hi]: gallops from the hint (steps of 1/1024 of it, doubling) to a bracket,
// then bisects. A hint within a fraction of a percent of the answer (a workload's token factor
// varies by about that between neighbouring lengths) costs about 2 log2(hint / 1024 + 1) probes
// where a bisection from 1 costs about 2 log2(k_hi).
template <class Ok>
std::int64_t last_true_near(std::int64_t hint, std::int64_t k_hi, Ok ok) {
  hint = std::clamp<std::int64_t>(hint, 1, k_hi);
  const std::int64_t first_step = std::max<std::int64_t>(1, hint / 1024);
  if (ok(hint)) {
    std::int64_t lo = hint;
    for (std::int64_t step = first_step; lo < k_hi; step *= 2) {
      const std::int64_t next = k_hi - lo > step ? lo + step : k_hi;
      if (!ok(next)) return last_true(lo, next - 1, ok);
      lo = next;
    }
    return lo;
  }
  std::int64_t fails = hint;  // the lowest k known to fail
  for (std::int64_t step = first_step;; step *= 2) {
    const std::int64_t next = fails - 1 > step ? fails - step : 1;
    if (next == 1 || ok(next)) return last_true(next, fails - 1, ok);
    fails = next;
  }
}

// max_seq_len_search under a workload whose memory length M(N) >= N needs a sample per length
// tried: the same answer from a few lengths. `plain` is the plan's search with the memory at N
// (no workload): its lengths fit on a prefix (no gaps), and M(N) >= N, so no length above its
// answer fits under the workload either; `hint` is the expected answer (the plain answer over the
// workload's token factor there). Assumes, as max_seq_len_search does within a run, that the fit
// under the workload holds on a prefix of the lengths: the answer is the length that fits with one
// granule more not fitting, found by galloping from the hint. No gaps are listed (plain has none).
MaxLenSearch max_seq_len_search_from(const Model& m, const System& s, const Plan& plan, const SimulateAt& simulate_at,
                                     const MaxLenSearch& plain, std::int64_t hint) {
  const Plan& p = plan;
  const std::int64_t gran = seq_granularity(p);
  FitsAtGranules ok{m, s, plan, simulate_at, gran};
  MaxLenSearch out;
  const std::int64_t k_hi = plain.max_seq_len / gran;
  if (k_hi < 1 || !ok(1)) return out;
  out.max_seq_len = last_true_near((hint + gran / 2) / gran, k_hi, ok) * gran;
  name_limit(m, s, p, out.max_seq_len, gran, out, simulate_at);
  return out;
}
}  // namespace

std::int64_t max_seq_len_for_tokens(const Model& m, const System& s, Plan& p, std::int64_t tokens, std::string& why) {
  const std::int64_t per_micro_step = std::int64_t{p.dp()} * p.micro_batch;  // sequences in one micro-step, all replicas
  if (per_micro_step < 1 || tokens % per_micro_step != 0) {
    why = fmt::format("global batch: {} tokens do not split into dp {} x micro_batch {} = {} sequences of equal length",
                      tokens, p.dp(), p.micro_batch, per_micro_step);
    return 0;
  }
  // tokens = per_micro_step x grad_accum_steps x seq_len: fewer micro-steps, longer sequences.
  const std::int64_t rest = tokens / per_micro_step, gran = seq_granularity(p);
  std::vector<std::string> errors;
  for (std::int64_t accum : divisors64(rest)) {
    if (accum > limits::kMaxGradAccumSteps) break;
    if ((rest / accum) % gran != 0) continue;
    p.grad_accum_steps = int(accum);
    p.seq_len = rest / accum;
    errors.clear();
    if (check_plan(m, s, p, errors) && simulate(m, s, p).fits) return p.seq_len;
  }
  why = fmt::format("global batch: no sequence of {} tokens / (dp {} x micro_batch {} x grad_accum_steps) fits and "
                    "divides by {}", tokens, p.dp(), p.micro_batch, gran);
  return 0;
}

MaxLenAdvice advise_max_seq_len(const Model& m, const System& s, int gpus, const SearchSpace& space,
                                const Workload* documents) {
  MaxLenAdvice out;
  const MemoryOptions bound = space.memory.value_or(most_saving(s.profile));
  const std::optional<GlobalBatch>& batch = space.global_batch;
  if (documents && batch && batch->tokens > 0)
    throw Error("global_batch_tokens: maxlen under --documents searches one length at a time, with the workload "
                "sampled at each; give --global-batch (sequences) or no global batch");
  // Under documents: the workload sampled once per length (the last few lengths kept), shared by
  // every structure and balancer, and counted once per (length, U, R, all-gather, balancer).
  std::map<std::int64_t, SampledWorkload> sampled;
  std::map<std::tuple<std::int64_t, int, int, bool, Balancer>, DocumentCosts> counted;
  std::optional<WorkloadSampler> sampler;  // fill packing: one stream of documents cut at each length
  if (documents) sampler.emplace(*documents);
  auto sampled_at = [&](std::int64_t seq_len) -> const SampledWorkload& {
    auto w = sampled.find(seq_len);
    if (w == sampled.end()) {
      // A search at thousands of GPUs meets hundreds of lengths: keep the last few, as sampling is
      // seeded and a length sampled again is the same. (Four: a sample at a billion tokens holds
      // about 16 x 200,000 documents, 80 MB.)
      if (sampled.size() >= 4) sampled.clear();
      w = sampled.emplace(seq_len, sampler->sample(seq_len)).first;
    }
    return w->second;
  };
  auto costs_at = [&](const Plan& p, Balancer b) -> const DocumentCosts& {
    const auto key = std::make_tuple(p.seq_len, p.ulysses_degree, p.ring_degree, kv_all_gather(p), b);
    auto it = counted.find(key);
    if (it != counted.end()) return it->second;
    return counted.emplace(key, document_costs(sampled_at(p.seq_len), p, b, s.gpu)).first->second;
  };
  auto refused = [&](const Plan& p, Balancer b, const Error& e) {  // the balancer cannot lay the sequence out
    Result r;
    r.plan = p;
    r.capacity_bytes = s.gpu.memory_bytes;
    r.errors = {fmt::format("balancer {}: {}", to_string(b), e.what())};
    return r;
  };
  auto simulate_under = [&](const Plan& p, std::optional<Balancer> b) {
    if (!b) return simulate(m, s, p);
    try {
      return simulate(m, s, p, costs_at(p, *b));
    } catch (const Error& e) {
      return refused(p, *b, e);
    }
  };
  // The length search's test under documents: place_documents' rules (which document_costs applies
  // first), then the plan's fit with the memory charged at the workload's memory length (the
  // fullest rank's tokens, per-document padding included: document_memory_seq_len, the number
  // document_costs gives), from the layouts alone: exactly where simulate(m, s, p,
  // document_costs(...)) fits, without counting the work at every length tried (counting took 22 s
  // for `maxlen --gpus 8 --documents lognormal:8:1` on the 2-core CI machine; placing alone is a
  // fraction of it). The workload is sampled once per length tried and counted at the lengths a
  // result is compared or reported. tests/sim/test_cli_documents.cpp holds the answer to simulate
  // under the workload.
  // The memory length depends on the length, the degrees and the balancer alone: placed once per
  // key for every structure and memory-option set that meets it (a refusal is kept as its message).
  struct MemoryLength {
    std::int64_t seq_len = 0;
    std::string refused;
  };
  std::map<std::tuple<std::int64_t, int, int, Balancer>, MemoryLength> memory_lengths;
  auto memory_length_at = [&](const Plan& p, Balancer b) -> const MemoryLength& {
    const auto key = std::make_tuple(p.seq_len, p.ulysses_degree, p.ring_degree, b);
    auto it = memory_lengths.find(key);
    if (it != memory_lengths.end()) return it->second;
    MemoryLength l;
    try {
      const std::optional<std::int64_t> even = even_share_memory_seq_len(p, b);
      l.seq_len = even ? *even : document_memory_seq_len(sampled_at(p.seq_len), p, b);
    } catch (const Error& e) {
      l.refused = e.what();
    }
    return memory_lengths.emplace(key, std::move(l)).first->second;
  };
  auto fits_under = [&](const Plan& p, std::optional<Balancer> b) {
    if (!b) return simulate(m, s, p);
    const MemoryLength& length = memory_length_at(p, *b);
    if (!length.refused.empty()) return refused(p, *b, Error(length.refused));
    const std::int64_t memory_seq_len = length.seq_len;
    Result r = simulate(m, s, p);
    if (r.valid && memory_seq_len > p.seq_len) {
      r.memory_seq_len = memory_seq_len;
      add_memory(m, s, r);
    }
    return r;
  };
  std::optional<Plan> winner;
  std::optional<Balancer> winner_balancer;
  for (Plan st : structures(m, s, gpus, 0, space)) {
    st.mem = bound;
    // Structural rules that do not depend on the length (heads vs U, GPUs vs degrees).
    std::vector<std::string> errors;
    Plan probe = st;
    probe.seq_len = seq_granularity(st);
    if (!check_plan(m, s, probe, errors)) {
      out.rejected.push_back({st, std::move(errors)});
      continue;
    }
    // A global batch: the smallest micro-batch (the longest sequences), accumulation for the rest.
    if (batch && batch->sequences > 0) {
      std::string why;
      const std::vector<Plan> fills = batch_fills(st, batch->sequences, space.micro_batch.value_or(1), why);
      if (fills.empty()) {
        out.rejected.push_back({st, {why}});
        continue;
      }
      st = fills.front();
    }
    std::vector<std::optional<Balancer>> balancers{std::nullopt};
    if (documents) {
      const std::vector<Balancer> each = balancers_for(st);
      balancers.assign(each.begin(), each.end());
    }
    for (const std::optional<Balancer> b : balancers) {
      const SimulateAt at = [&](const Plan& p) { return fits_under(p, b); };
      Plan sb = st;
      std::string why;
      MaxLenSearch search;
      if (batch && batch->tokens > 0) {
        search.max_seq_len = max_seq_len_for_tokens(m, s, sb, batch->tokens, why);
      } else if (b && !holds_even_share(*b)) {
        // A sample per length tried (about 1,500 lengths at 1,024 GPUs took 680 s): the plain
        // search first (no workload), then the workload's few lengths near the plain answer over
        // its token factor. Where the plain lengths have gaps, the full search under the workload.
        const MaxLenSearch plain = max_seq_len_search(m, s, sb);
        if (plain.gap_count > 0) {
          search = max_seq_len_search(m, s, sb, at);
        } else {
          std::int64_t hint = plain.max_seq_len;
          if (hint > 0) {
            Plan top = sb;
            top.seq_len = hint;
            if (const MemoryLength& l = memory_length_at(top, *b); l.refused.empty() && l.seq_len > hint)
              hint = std::int64_t(double(hint) * double(hint) / double(l.seq_len));
          }
          search = max_seq_len_search_from(m, s, sb, at, plain, hint);
        }
      } else {
        search = max_seq_len_search(m, s, sb, at);
      }
      const std::int64_t n = search.max_seq_len;
      if (n == 0 && !why.empty()) {  // the batch cannot be reached, or no length of it fits
        out.rejected.push_back({sb, {why}});
        continue;
      }
      out.per_structure.emplace_back(sb, n);
      if (b) out.per_structure_balancer.push_back(*b);
      if (n == 0) {
        const Result r = at(probe);
        out.rejected.push_back({probe,
                                {r.valid ? fmt::format("does not fit even at {} tokens: peak {:.1f} GiB > {:.1f} GiB",
                                                       probe.seq_len, r.peak_memory_bytes() / kGiB, r.capacity_bytes / kGiB)
                                         : r.errors.front()},
                                r.valid});
        continue;
      }
      sb.seq_len = n;
      bool better = n > out.max_seq_len;
      if (!better && n == out.max_seq_len && winner)
        better = simulate_under(sb, b).tokens_per_s_per_gpu > simulate_under(*winner, winner_balancer).tokens_per_s_per_gpu;
      if (better) {
        out.max_seq_len = n;
        out.gaps = search.gaps;
        out.gap_count = search.gap_count;
        out.limit = search.limit;
        out.limit_why = search.limit_why;
        winner = sb;
        winner_balancer = b;
      }
    }
  }
  if (winner) {
    // The fastest plan at that length: memory options and, with a global batch, its fills.
    StructureOutcome o = best_plan_for(m, s, *winner, space, winner_balancer ? &costs_at(*winner, *winner_balancer) : nullptr);
    out.result = o.best ? o.best : std::optional<Result>(simulate_under(*winner, winner_balancer));
    if (winner_balancer) out.result->balancer = *winner_balancer;
  }
  return out;
}

}  // namespace seqpar::sim
