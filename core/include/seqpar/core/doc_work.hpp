// Exact per-rank attention work of a packed sequence under its document mask (a query attends to
// keys of its own document at or before it), for every SP method and load balancer (doc_layout.hpp):
// per ring rank and ring step, the unmasked (query, key) pairs, the kernel tiles they touch, and the
// K,V bytes the step moves. The simulator and the training step share these counts.
//
// Methods, on U x R ranks (SpShape):
//   Ulysses (R = 1)   each rank holds every token for heads/U heads: one step, the whole sequence's
//                     work for its heads, the same on every rank whatever the balancer.
//   ring (U = 1)      K,V blocks pass around the R ranks: at step s ring rank r attends its queries
//                     against the block of rank (r - s) mod R. Step 0 is its own block.
//   hybrid (U x R)    the ring above over R ring ranks, each one a Ulysses group of U ranks that
//                     share its tokens' work by heads.
//   all-gather KV     (U = 1, kv_all_gather) each rank attends its queries against the whole gathered
//                     sequence: one step.
// Counts are per attention head: a rank runs heads/U heads, so its work is U-independent counts x
// heads/U. The simulator multiplies pairs by 4 d FLOPs (forward, d the head dimension) as it does
// today.
//
// Tiles. A varlen kernel (FlashAttention varlen, cuDNN's ragged/THD path) gets one entry of
// cu_seqlens per document piece: for a (query rank, key block) pair, each document's query rows that
// the rank holds (in buffer order, which is position order) against the document's key rows in the
// block (for all-gather: the whole document, gathered in order), on a grid of q_rows x k_rows tiles
// anchored at the first row of each. A tile with any unmasked entry costs a whole tile; a fully
// masked tile costs nothing (the kernel's causal bound skips it). Padding rows (per-document
// balancer) are not in cu_seqlens and not tiled.
//
// Fully masked steps. A ring step whose block has no unmasked pair for this rank still receives the
// block (the ring relays it onward), so its bytes always count. Whether the kernel is launched for
// it is `skip_masked_steps`: ring-flash-attention's ring_flash_attn_varlen_func skips only the steps
// its layout makes empty under causal (`if not causal or step <= comm.rank`), never a step that the
// documents empty, and sends K,V at every step (zhuzilin/ring-flash-attention,
// ring_flash_attn/ring_flash_attn_varlen.py); its zigzag varlen form computes half a block at every
// step. Whether Transformer Engine's THD context parallelism skips a step the documents empty is
// unknown here (not checked against its source). So the default launches every step (false).
//
// Sliding window. `window` W > 0 bands the mask: a query at position q of its document sees the
// keys of positions (q - W, q] only (W keys including itself, as Hugging Face's `sliding_window`
// and FlashAttention's window_size = (W - 1, 0)); 0 is no band. Every count above then counts the
// band: pairs, tiles (a tile with any key in some row's band), masked steps, and total_pairs
// (band_pairs per document). Bytes are the layout's: which ranks skip a block outside every
// window is the cost model's question (sim/window_cost.hpp), not the mask's.
//
// Tile cost. A varlen kernel runs a tile of a short document slower than a tile of a long one
// (per-document setup, fewer tiles sharing each K,V load). `tile_cost` gives, for a document
// piece of `rows` query rows in the call, the time of one of its tiles relative to a tile of a
// long one; each step's `cost` is its tiles weighted so. Empty: every tile costs 1 (cost = tiles).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "seqpar/core/doc_layout.hpp"
#include "seqpar/core/workload.hpp"

namespace seqpar {

struct SpShape {
  int ulysses = 1;             // U
  int ring = 1;                // R
  bool kv_all_gather = false;  // the R ranks gather K,V in one all-gather (U must be 1)
};

// One point of a tile-cost curve: a tile of a document piece of `rows` query rows in the call costs
// `cost` tiles of a long document.
struct TileCost {
  std::int64_t rows = 0;
  double cost = 1;
};

// The curve at `rows`: linear in log(rows) between the points (rows rising), the first point's cost
// below it, the last's above it; 1 for an empty curve.
double tile_cost_at(std::span<const TileCost> curve, std::int64_t rows);

struct WorkOptions {
  int q_rows = 128, k_rows = 128;         // the kernel's tile (Bq x Bk)
  bool skip_masked_steps = false;         // see the header comment
  std::int64_t kv_bytes_per_token = 1;    // K and V of one token on this rank's heads (1: tokens)
  std::vector<TileCost> tile_cost;        // see the header comment; empty: 1 per tile
  std::int64_t window = 0;                // sliding window W (see the header comment); 0: none
  // Count every holder pair of every document (the general path) even where a layout's documents
  // are evenly chunked (per-document sharding), whose counts are otherwise summed per rank in
  // O(R) a document (doc_work.cpp). The same counts either way; for the tests that hold them equal.
  bool count_every_pair = false;
};

// The mask itself: whether a query at document position q sees the key at position k under a
// window of W (0: none): k <= q and q - k < W. Every attention that applies the band (the CPU
// reference, the training step's calls) asks this; band_pairs and count_*_work count it.
constexpr bool in_band(std::int64_t q, std::int64_t k, std::int64_t window) {
  return k <= q && (window <= 0 || q - k < window);
}

// The pairs of one causal document of `len` tokens under a window of W (0: none): sum over its
// queries q of min(q + 1, W) = W (W + 1) / 2 + (len - W) W for len >= W, len (len + 1) / 2 below.
std::int64_t band_pairs(std::int64_t len, std::int64_t window);

// One ring rank at one step.
struct StepWork {
  std::int64_t pairs = 0, tiles = 0;
  double cost = 0;            // tiles weighted by WorkOptions::tile_cost (= tiles without one)
  std::int64_t kv_bytes = 0;  // received for this step: the visiting block (0 at step 0), or the gather
  bool launched = false;      // a kernel call runs (pairs > 0, or masked steps are not skipped)
};

// One ring rank over all steps. Its U Ulysses ranks each run these counts for heads/U heads and hold
// tokens/U of its tokens before the all-to-all (the all-to-all's volume, which the mask leaves alone).
struct RankWork {
  std::int64_t pairs = 0, tiles = 0;
  std::int64_t tokens = 0, padding_tokens = 0;
  std::int64_t kv_bytes = 0;
  int launches = 0, masked_steps = 0;
};

// One packed sequence.
struct BatchWork {
  int steps = 1;                   // R for ring hops, 1 for Ulysses and all-gather
  std::vector<RankWork> ranks;     // R ring ranks
  std::vector<StepWork> grid;      // ranks x steps: grid[r * steps + s]
  std::int64_t total_pairs = 0;    // the sequence's unmasked pairs: sum over documents of band_pairs(l, W)
  int slowest_rank = 0;            // by tiles, then pairs; the lowest of equals
  double imbalance_pairs = 1, imbalance_tiles = 1;  // max / mean over ranks
  bool by_rank = false;            // counted per rank (evenly chunked documents), not per holder pair
  const StepWork& at(int rank, int step) const { return grid[static_cast<std::size_t>(rank * steps + step)]; }
};

// Throws seqpar::Error naming the rule: tile sizes >= 1, all-gather with U > 1, and place_documents'.
BatchWork count_batch_work(std::span<const std::int64_t> cu_seqlens, SpShape shape, Balancer b,
                           const WorkOptions& opt = {});
// The same from a layout already placed (the shape's R must match it).
BatchWork count_layout_work(const DocLayout& layout, SpShape shape, const WorkOptions& opt = {});

// Over a workload's sampled batches, computed once per (workload, seq_len, U, R, balancer, tiles)
// and reused for every plan that shares them: means over batches unless named otherwise.
struct WorkloadWork {
  int batches = 0, steps = 1;
  std::vector<double> rank_pairs, rank_tiles;          // per ring rank
  std::vector<double> step_max_pairs, step_max_tiles;  // per step: the slowest rank's at that step
  std::vector<double> step_max_kv_bytes;               // per step: the largest block received
  std::vector<double> step_max_cost;                   // per step: the most weighted tiles of any rank
  double slowest_pairs = 0, slowest_tiles = 0;          // the slowest rank's totals
  double sum_step_max_tiles = 0;                        // sum over steps of the per-step maxima
  double imbalance_pairs_mean = 1, imbalance_pairs_p95 = 1;
  double imbalance_tiles_mean = 1, imbalance_tiles_p95 = 1;
  double total_pairs = 0;                                // per batch
  std::int64_t full_causal_pairs = 0;                    // one causal sequence of seq_len: N (N + 1) / 2
  std::int64_t max_rank_tokens = 0;                      // over ranks and batches, padding included
  double padding_tokens = 0;                             // per batch, all ranks
  double launches_max = 0, masked_steps_max = 0;         // the most of any rank, per batch
};

WorkloadWork count_workload_work(const SampledWorkload& s, SpShape shape, Balancer b, const WorkOptions& opt = {});

}  // namespace seqpar
