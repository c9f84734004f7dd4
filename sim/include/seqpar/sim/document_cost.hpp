// The cost table of a packed-document workload (core/workload.hpp) for one plan's SP layout and
// load balancer: how much each ring step's slowest rank works under the document mask against one
// causal sequence filling the same length in the method's own layout, counted at the kernel's tile
// granularity (core/doc_work.hpp). attention_layer_cost scales its per-step kernel times by these
// factors, so with every document as long as the sequence they are exactly 1 and the step is
// today's. A tile of a short document costs more than one of a long document where the GPU's
// preset has a measurement for its attention kernel (hardware.hpp: VarlenAttention; see
// varlen_tile_cost); the factors then count tiles so weighted, the workload's and the reference's
// alike, so the reference call's own length (which attention_half_tokens' curve already charges)
// is never charged twice: only a piece shorter than the call it runs in costs more; the communication is left as it is (the ring relays every block, the all-gather gathers
// the whole sequence, the all-to-alls move every token whatever the mask).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/doc_layout.hpp"
#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/core/workload.hpp"
#include "seqpar/sim/hardware.hpp"

namespace seqpar::sim {

// The layout the method itself uses for one causal sequence: zigzag (head/tail) for ring-zigzag,
// the hybrid and all-gather; contiguous for the plain ring, the contiguous all-gather and Ulysses.
Balancer native_balancer(const Plan& p);

// The load balancers worth comparing for a plan: its own layout, and for the zigzag methods
// (ring-zigzag, all-gather head/tail, the hybrid) the two that re-shard by document; the hybrid
// also the contiguous ring over its groups. The contiguous methods' other balancers are their
// zigzag twins' (a balancer names the layout, the method the exchange). Without a ring: its own.
std::vector<Balancer> balancers_for(const Plan& p);

// The kernel tile the counts use (FlashAttention-2/3 and cuDNN's forward tiles are 128 x 128 or
// 128 x 64 at head dim 128; one figure for every engine until a measured one says otherwise).
inline constexpr int kDocumentTileRows = 128;

struct DocumentCosts {
  Balancer balancer = Balancer::contiguous;
  WorkloadWork work;        // the workload's sampled batches in the balancer's layout
  WorkloadWork reference;   // one causal sequence filling seq_len, in the method's own layout
  // Per ring step (R entries; 1 for Ulysses and all-gather): the slowest rank's tiles at that step
  // over the reference's. Ulysses and all-gather: the slowest rank's tiles over the reference's.
  std::vector<double> step_factor;
  double work_ratio = 1;    // unmasked pairs per sequence over one full causal sequence's (MFU's FLOPs)
  // The most tokens a rank holds over the reference's (N / R): above 1 where per-document padding
  // or whole documents moved between ranks give a rank more. Every block it sends, gathers or
  // exchanges in an all-to-all grows with it.
  double token_factor = 1;
  // The sequence length whose even share over the ring ranks is the fullest rank's tokens over the
  // sampled batches (padding included): max(seq_len, max_rank_tokens x R). The memory estimate
  // charges this length (simulate.hpp: Result::memory_seq_len), so Transformer Engine's padding of
  // every document to a multiple of 2 x CP takes memory as the tokens it is; seq_len where the
  // balancer holds N / R tokens a rank (contiguous, zigzag).
  std::int64_t memory_seq_len = 0;
  // The short-document figure's share of step_factor: the slowest ranks' weighted tiles over their
  // tiles, the workload's over the reference's (1 without a measurement, or with long documents).
  double short_document_factor = 1;
  // The heaviest sampled sequence's attention work over the mean sequence's (WorkloadSummary's
  // work_ratio_max / work_ratio_mean): with pipeline stages the fill and drain run at the pace of
  // the slowest micro-batch (pipeline_cost.hpp), not the mean one.
  double heaviest_work_factor = 1;
  bool varlen_measured = false;  // the GPU's kernel has a measured varlen figure
  std::string varlen_source;     // its source, or what is assumed without one
};

// The relative cost of one kernel tile of a document piece of `rows` query rows, from the measured
// rates: a tile's time is the useful FLOPs per tile (the whole tiles core/doc_work.hpp charges at
// the measurement's mask) over the rate, relative to the longest measured length's. Empty without
// a measurement. Lengths beyond the measured range take the nearest end's cost (tile_cost_at).
std::vector<TileCost> varlen_tile_cost(const VarlenAttention& v);

// Counts the workload (sampled at p.seq_len) for p's Ulysses and ring degrees under `b`. Throws
// seqpar::Error where the balancer cannot lay the sequence out (place_documents' rules) or the
// workload was sampled for another length.
// The tiles are weighted by the GPU's varlen figure (varlen_tile_cost of gpu.varlen).
DocumentCosts document_costs(const SampledWorkload& w, const Plan& p, Balancer b, const Gpu& gpu);

// DocumentCosts::memory_seq_len from the layouts alone (no work counted): what maxlen's length
// search asks at every length it tries. The same number document_costs gives.
std::int64_t document_memory_seq_len(const SampledWorkload& w, const Plan& p, Balancer b);
// The same for a balancer that holds_even_share, without the workload (nothing to sample): the
// plan's own length, or the balancer's rule refused; nullopt for the balancers that need the documents.
std::optional<std::int64_t> even_share_memory_seq_len(const Plan& p, Balancer b);

}  // namespace seqpar::sim
