// One rank's training step: synthetic data sharded to its tokens, forward/backward, loss averaged
// over every real token of the step (all SP and DP ranks), gradients all-reduced over the world,
// AdamW. validation.hpp compares a sharded step with the unsharded one and an fp32 reference.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/doc_layout.hpp"
#include "seqpar/core/workload.hpp"
#include "seqpar/train/doc_shards.hpp"
#include "seqpar/train/fault.hpp"
#include "seqpar/train/model.hpp"

namespace seqpar::train {

// The memory options of the plain step: ZeRO 0 (states replicated), nothing checkpointed.
inline seqpar::MemoryOptions train_memory_default() {
  seqpar::MemoryOptions m;
  m.zero = 0;
  return m;
}
// Throws seqpar::Error naming the flag and rule for what the step cannot run: --zero other than 0,
// --offload-optimizer, and the simulator's rules between the options (check_memory_combination).
void check_train_memory(const seqpar::MemoryOptions& m);

struct TrainSetup {
  ModelConfig model;
  std::int64_t seq_len = 64;
  int ulysses = 1, ring = 1;  // sp = ulysses * ring; dp = world / sp
  bool zigzag = false;
  KvExchange kv = KvExchange::ring_hops;  // all_gather: all-gather KV context parallelism (ulysses 1)
  int micro_batch = 1;        // sequences per SP group per step
  AdamWConfig opt;
  std::uint64_t seed = 1234;
  // ALST's memory features (the flags `seqpar simulate` takes). The step runs plain data
  // parallelism, so zero must be 0 and offload_optimizer false (check_train_memory).
  seqpar::MemoryOptions mem = train_memory_default();
  int tile_tokens = 0;  // rows per TiledMLP / tiled-loss tile; 0: ALST's (alst_tile_tokens)
  Fault fault = Fault::none;  // tests only (fault.hpp): a planted sharding bug
  // Packed documents under a document mask (workload.hpp): sequence id (step x dp x micro_batch +
  // dp_index x micro_batch + b, the numbering the unsharded reference shares) takes the boundaries
  // of sampled sequence id mod documents->batches. nullopt: one document a sequence.
  std::optional<seqpar::Workload> documents;
  // Where the ring groups hold the tokens (doc_layout.hpp; doc_shards.hpp for the padding).
  // nullopt: the layout's own, zigzag when `zigzag` else contiguous (sim::native_balancer).
  std::optional<Balancer> balancer;
};

// The balancer the step runs: setup.balancer, else the layout's own.
Balancer step_balancer(const TrainSetup& s);
// Whether the step runs the document path (documents or a balancer given): then the step holds
// doc_step_len(s) tokens a sequence, padding included.
inline bool uses_documents(const TrainSetup& s) { return s.documents.has_value() || s.balancer.has_value(); }

// The plan's shape of the step: seq_len, degrees, zigzag, the K,V exchange, micro_batch and memory
// options.
void apply_plan(TrainSetup& s, const seqpar::Plan& p);

// Sequence `id`: a random start token, then next = (5 * t + 3) mod vocab — a bigram the model
// can learn, so the loss must fall. Deterministic in (seed, id).
std::vector<int> synthetic_sequence(std::uint64_t seed, std::int64_t id, std::int64_t len, int vocab);

struct StepResult {
  double loss = 0;         // mean over all real tokens of the step
  double real_tokens = 0;  // tokens with a label, all ranks
  double time_s = 0;
};

class Trainer {
 public:
  // world: nullptr runs alone (sp = dp = 1). Collective over world (builds the SP groups).
  Trainer(Backend& be, comm::Communicator* world, const TrainSetup& setup);
  ~Trainer();

  // Gradients of the current parameters, all-reduced; returns the loss (no optimizer step).
  StepResult compute_gradients();
  // AdamW; the next step then reads fresh sequences.
  void optimizer_step();
  // compute_gradients() then optimizer_step(), timed (back end synchronised at both ends).
  StepResult step();

  Model& model() { return *model_; }
  const TrainSetup& setup() const { return setup_; }
  int sp_index() const { return sp_index_; }
  int dp_index() const { return dp_index_; }
  // This rank's global token positions (local order) and labels (-1: none), batch-major.
  const std::vector<int>& positions() const { return positions_; }
  const std::vector<int>& labels() const { return labels_; }
  // The loss of each of this rank's tokens that has a label, in local order, from the last
  // compute_gradients(): the terms the step's loss averages (validation.hpp compares them).
  std::vector<float> token_losses() const;
  std::vector<float> params_host();
  std::vector<float> grads_host();
  // Overwrites the parameters (all of them, host order): validation steps every run from the
  // reference's parameters so that rounding does not compound over steps.
  void set_params_host(const std::vector<float>& params);
  int world_size() const { return world_ ? world_->size() : 1; }
  // The attention this rank computed in the last compute_gradients() (every layer's forward,
  // recomputations included: SpAttention's record), and what core's count_batch_work counts for
  // the same sequences, heads and forward passes: the two must be equal.
  const AttnWork& attention_work() const { return model_->attention().work(); }
  std::int64_t counted_attention_pairs() const;
  // The boundaries of the sequences of the current step (micro-batch order).
  const std::vector<std::vector<std::int64_t>>& step_documents() const { return step_cu_; }

 private:
  void all_reduce(void* buf, std::size_t count, comm::DType dt);
  void load_batch();    // this step's sequences, sharded to this rank
  void ensure_batch();  // load_batch() once per step
  void load_documents();  // load_batch() on the document path
  // Sampled sequence i's placement (cached).
  const DocShards& shards(std::size_t i);

  Backend& be_;
  comm::Communicator* world_;
  TrainSetup setup_;
  comm::Groups groups_;
  int sp_index_ = 0, dp_index_ = 0, ring_index_ = 0;
  std::unique_ptr<Model> model_;
  std::vector<int> positions_, labels_;
  Ints tokens_d_, labels_d_, positions_d_;
  int steps_done_ = 0, loaded_step_ = -1;
  // The document path: the balancer, the sampled sequences and their placements, the ring group
  // length every step uses, and the current step's boundaries.
  bool docs_ = false;
  Balancer balancer_ = Balancer::contiguous;
  std::vector<std::vector<std::int64_t>> sampled_cu_;
  std::vector<DocLayout> placed_;
  std::vector<std::optional<DocShards>> shards_;
  std::int64_t group_len_ = 0;
  std::vector<std::vector<std::int64_t>> step_cu_;
};

// Unsharded reference of the same global step: one rank, all dp * micro_batch sequences, no fault,
// and the plain step's memory options (no checkpointing, offload or tiling).
TrainSetup reference_setup(const TrainSetup& s, int dp);

}  // namespace seqpar::train
