#include "seqpar/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/plan_validity.hpp"
#include "seqpar/train/size_limits.hpp"
#include "seqpar/train/timeline.hpp"

namespace seqpar::train {

std::vector<int> synthetic_sequence(std::uint64_t seed, std::int64_t id, std::int64_t len,
                                    int vocab) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(id));
  std::vector<int> s(static_cast<std::size_t>(len));
  s[0] = static_cast<int>(rng() % static_cast<std::uint64_t>(vocab));
  for (std::size_t i = 1; i < s.size(); ++i)
    s[i] = static_cast<int>((5 * static_cast<std::int64_t>(s[i - 1]) + 3) % vocab);
  return s;
}

namespace {

// Fault::zigzag_permutation_wrong (tests only): the positions SP rank `sp_index` would hold if its
// ring group's two zigzag chunks came in the other order.
std::vector<int> swapped_zigzag_positions(const SeqLayout& layout, int sp_index) {
  std::vector<int> group;
  std::vector<Segment> segs = layout.group_segments(sp_index / layout.ulysses());
  std::reverse(segs.begin(), segs.end());
  for (const Segment& s : segs)
    for (int i = 0; i < s.len; ++i) group.push_back(static_cast<int>(s.pos + i));
  const auto l = static_cast<std::ptrdiff_t>(layout.local_len()), u = static_cast<std::ptrdiff_t>(sp_index % layout.ulysses());
  return {group.begin() + u * l, group.begin() + (u + 1) * l};
}

}  // namespace

Balancer step_balancer(const TrainSetup& s) {
  return s.balancer.value_or(s.zigzag && s.ring > 1 ? Balancer::zigzag : Balancer::contiguous);
}

void apply_plan(TrainSetup& s, const seqpar::Plan& p) {
  s.seq_len = p.seq_len;
  s.ulysses = p.ulysses_degree;
  s.ring = p.ring_degree;
  s.zigzag = p.zigzag();
  s.kv = kv_exchange(p.method);
  s.micro_batch = p.micro_batch;
  s.mem = p.mem;
}

void check_train_memory(const seqpar::MemoryOptions& m) {
  std::vector<std::string> errors;
  if (m.zero != 0)
    errors.push_back(fmt::format("--zero {}: the training step runs plain data parallelism (gradients "
                                 "all-reduced, optimizer states replicated); only --zero 0 runs", m.zero));
  if (m.offload_optimizer)
    errors.push_back("--offload-optimizer: the training step keeps the optimizer states and step on the device");
  if (m.offload_params)
    errors.push_back("--offload-params: the training step keeps its parameters on the device");
  seqpar::check_memory_combination(m, errors);
  if (errors.empty()) return;
  std::string all;
  for (const auto& e : errors) all += (all.empty() ? "" : "; ") + e;
  throw Error(all);
}

Trainer::Trainer(Backend& be, comm::Communicator* world, const TrainSetup& setup)
    : be_(be), world_(world), setup_(setup) {
  const int sp = setup.ulysses * setup.ring;
  if (setup.micro_batch < 1)
    throw Error(fmt::format("micro_batch = {}: must be >= 1", setup.micro_batch));
  if (world_ && world_->device_memory() != be.on_gpu())
    throw Error(fmt::format("communicator '{}' works on {} memory but the '{}' back end keeps its "
                            "buffers in {} memory",
                            comm::to_string(world_->backend()),
                            world_->device_memory() ? "GPU" : "host", be.name(),
                            be.on_gpu() ? "GPU" : "host"));
  if (world_) {
    groups_ = comm::make_groups(*world_, setup.ulysses, setup.ring);
    if (be.on_gpu()) world_->set_stream(be.compute_stream());
    join_compute_stream(be, groups_);
    const int w = world_->rank();
    sp_index_ = groups_.layout.sp_index(w);
    dp_index_ = groups_.layout.dp_index(w);
    ring_index_ = groups_.layout.ring_index(w);
  } else if (sp != 1) {
    throw Error(fmt::format("sp = {} needs a communicator (run under mpirun or with --comm virtual)", sp));
  }
  validate(setup.model);
  check_train_memory(setup.mem);
  std::int64_t step_len = setup.seq_len;
  docs_ = uses_documents(setup);
  if (docs_) {
    // Every sampled sequence placed once: the ring group length is the most any of them needs, so
    // one set of buffers serves every step (doc_shards.hpp).
    balancer_ = step_balancer(setup);
    if (setup.documents) {
      for (PackedBatch& pb : sample_workload(*setup.documents, setup.seq_len).batches)
        sampled_cu_.push_back(std::move(pb.cu_seqlens));
    } else {
      sampled_cu_.push_back({0, setup.seq_len});
    }
    for (const auto& cu : sampled_cu_) {
      placed_.push_back(place_documents(cu, setup.ulysses, setup.ring, balancer_));
      group_len_ = std::max(group_len_, doc_group_len(placed_.back(), setup.ulysses));
    }
    shards_.resize(sampled_cu_.size());
    // A sequence whose documents are all one token long has no label (a label is the next token of
    // the same document). A step made of such sequences alone has no loss: refused before it runs.
    // Sequence ids repeat with period = the sampled count, so those steps are the first ones.
    const std::int64_t per_step = static_cast<std::int64_t>(setup.micro_batch) *
                                  (world_ ? world_->size() / (setup.ulysses * setup.ring) : 1);
    const auto batches = static_cast<std::int64_t>(sampled_cu_.size());
    for (std::int64_t st = 0; st < batches; ++st) {
      bool labelled = false;
      for (std::int64_t j = 0; j < per_step && !labelled; ++j) {
        const auto& cu = sampled_cu_[static_cast<std::size_t>((st * per_step + j) % batches)];
        for (std::size_t i = 0; i + 1 < cu.size() && !labelled; ++i) labelled = cu[i + 1] - cu[i] > 1;
      }
      if (!labelled)
        throw Error(fmt::format("--documents: step {} (and every {}th after it) packs only one-token documents into "
                                "its {} sequences of {} tokens, so none of its tokens has a label (the next token of "
                                "its own document) and the step has no loss; use longer sequences or documents",
                                st + 1, batches, per_step, setup.seq_len));
    }
    step_len = checked_mul(group_len_, static_cast<std::int64_t>(setup.ring), "the step's tokens a sequence");
  }
  const SeqLayout layout(step_len, setup.ulysses, setup.ring, docs_ ? balancer_ == Balancer::zigzag : setup.zigzag,
                         setup.kv);
  TrainSetup sized = setup;
  sized.seq_len = step_len;  // padding included
  check_step_sizes(sized);  // before the first allocation
  model_ = std::make_unique<Model>(be, setup.model, setup.micro_batch, layout, ring_index_,
                                   groups_.ulysses.get(), groups_.ring.get(), false, setup.mem,
                                   setup.tile_tokens);
  model_->attention().plant_fault(setup.fault);  // tests only (fault.hpp); none by default
  model_->init(setup.seed);
  std::vector<int> pos = layout.positions(sp_index_);
  if (setup.fault == Fault::zigzag_permutation_wrong && sp_index_ == 0 && layout.zigzag())
    pos = swapped_zigzag_positions(layout, sp_index_);
  positions_.clear();
  for (int b = 0; b < setup.micro_batch; ++b) positions_.insert(positions_.end(), pos.begin(), pos.end());
  const std::int64_t t = model_->tokens_per_rank();
  tokens_d_ = Ints(be, t, MemCategory::working);
  labels_d_ = Ints(be, t, MemCategory::working);
  positions_d_ = Ints(be, t, MemCategory::working);
  be.copy_from_host(positions_d_.data(), positions_.data(), positions_d_.bytes());
  ensure_batch();
}

void Trainer::ensure_batch() {
  if (loaded_step_ == steps_done_) return;
  load_batch();
  loaded_step_ = steps_done_;
}

Trainer::~Trainer() = default;

const DocShards& Trainer::shards(std::size_t i) {
  if (!shards_[i]) shards_[i] = shard_documents(placed_[i], sampled_cu_[i], setup_.ulysses, group_len_);
  return *shards_[i];
}

void Trainer::load_documents() {
  const std::int64_t n = setup_.seq_len;
  const int mb = setup_.micro_batch, dp = world_size() / (setup_.ulysses * setup_.ring);
  const std::size_t nl = positions_.size() / static_cast<std::size_t>(mb);
  const std::size_t u = static_cast<std::size_t>(sp_index_ % setup_.ulysses);
  std::vector<int> tokens(positions_.size(), 0);
  std::vector<std::int64_t> src(positions_.size(), -1);  // sequence position of each token, -1: padding
  labels_.assign(positions_.size(), -1);
  std::vector<int> first;
  std::vector<std::vector<std::vector<Segment>>> seqs;
  step_cu_.clear();
  for (int b = 0; b < mb; ++b) {
    // Sequence ids as load_batch's, so the unsharded reference reads the same sequences.
    const std::int64_t id = static_cast<std::int64_t>(steps_done_) * dp * mb +
                            static_cast<std::int64_t>(dp_index_) * mb + b;
    const std::vector<int> seq = synthetic_sequence(setup_.seed, id, n, setup_.model.vocab);
    if (b == 0) first = seq;
    const std::size_t which = static_cast<std::size_t>(id) % sampled_cu_.size();
    const DocShards& sh = shards(which);
    step_cu_.push_back(sh.cu_seqlens);
    seqs.push_back(sh.groups);
    std::vector<HeldToken> group = group_tokens(sh, ring_index_);
    if (sp_index_ == 0 && setup_.ring > 1) {
      if (setup_.fault == Fault::zigzag_permutation_wrong && balancer_ == Balancer::zigzag)  // its two chunks swapped
        std::rotate(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(group.size() / 2), group.end());
      if (setup_.fault == Fault::document_chunk_order_wrong && balancer_ == Balancer::per_document) {
        // Each document's two runs (chunks r and 2R-1-r, equally long) change places.
        std::size_t at = 0;
        const std::vector<DocRun>& runs = placed_[which].ranks[static_cast<std::size_t>(ring_index_)].runs;
        for (std::size_t k = 0; k < runs.size(); ++k) {
          const auto len = static_cast<std::size_t>(runs[k].end - runs[k].begin);
          if (k + 1 < runs.size() && runs[k + 1].doc == runs[k].doc &&
              static_cast<std::size_t>(runs[k + 1].end - runs[k + 1].begin) == len) {
            std::swap_ranges(group.begin() + static_cast<std::ptrdiff_t>(at),
                             group.begin() + static_cast<std::ptrdiff_t>(at + len),
                             group.begin() + static_cast<std::ptrdiff_t>(at + len));
            at += 2 * len;
            ++k;
          } else {
            at += len;
          }
        }
      }
    }
    const bool packed_positions = setup_.fault == Fault::positions_not_restarted && sp_index_ == 1;
    for (std::size_t i = 0; i < nl; ++i) {
      const HeldToken& t = group[u * nl + i];
      const std::size_t k = static_cast<std::size_t>(b) * nl + i;
      positions_[k] = 0;
      if (t.doc < 0) continue;  // padding: token 0, no label, position 0
      src[k] = t.src;
      tokens[k] = seq[static_cast<std::size_t>(t.src)];
      positions_[k] = static_cast<int>(packed_positions ? t.pos : t.doc_pos);
      // The label is the next token of the same document; a document's last token has none.
      if (t.doc_pos + 1 < sh.doc_len(t.doc)) labels_[k] = seq[static_cast<std::size_t>(t.src) + 1];
    }
  }
  if (setup_.fault == Fault::label_off_by_one && sp_index_ == 0 && dp_index_ == 0 &&
      setup_.ulysses * setup_.ring > 1) {
    // The end of this rank's first run of consecutive sequence positions.
    std::size_t k = 0;
    while (k + 1 < nl && src[k] >= 0 && src[k + 1] == src[k] + 1) ++k;
    if (src[k] >= 0 && src[k] + 2 < n) labels_[k] = first[static_cast<std::size_t>(src[k]) + 2];
  }
  model_->attention().set_sequences(std::move(seqs));
  be_.copy_from_host(tokens_d_.data(), tokens.data(), tokens_d_.bytes());
  be_.copy_from_host(labels_d_.data(), labels_.data(), labels_d_.bytes());
  be_.copy_from_host(positions_d_.data(), positions_.data(), positions_d_.bytes());
}

std::int64_t Trainer::counted_attention_pairs() const {
  // count_batch_work's pairs are per head and per ring rank; this rank runs heads / U heads of its
  // ring rank's queries, once per layer's forward (twice under full checkpointing: the recompute).
  const SpShape shape{setup_.ulysses, setup_.ring, setup_.kv == KvExchange::all_gather && setup_.ring > 1};
  const Balancer b = docs_ ? balancer_ : step_balancer(setup_);
  const std::vector<std::vector<std::int64_t>> plain(static_cast<std::size_t>(setup_.micro_batch),
                                                     std::vector<std::int64_t>{0, setup_.seq_len});
  auto layer_pairs = [&](std::int64_t window) {  // one layer's, under its window (0: full causal)
    WorkOptions opt;
    opt.window = window;
    std::int64_t pairs = 0;
    for (const auto& cu : docs_ ? step_cu_ : plain)
      pairs += count_batch_work(cu, shape, b, opt).ranks[static_cast<std::size_t>(ring_index_)].pairs;
    return pairs;
  };
  const int sliding = setup_.model.sliding_layers(), full = setup_.model.layers - sliding;
  std::int64_t pairs = full > 0 ? full * layer_pairs(0) : 0;
  if (sliding > 0) pairs += sliding * layer_pairs(setup_.model.sliding_window);
  const int passes = setup_.mem.checkpoint == seqpar::Checkpoint::full ? 2 : 1;
  return pairs * (setup_.model.heads / setup_.ulysses) * passes;
}

void Trainer::load_batch() {
  if (docs_) {
    load_documents();
    return;
  }
  const std::int64_t n = setup_.seq_len;
  const int mb = setup_.micro_batch, dp = world_size() / (setup_.ulysses * setup_.ring);
  const std::size_t nl = positions_.size() / static_cast<std::size_t>(mb);
  std::vector<int> tokens(positions_.size()), first;  // first: sequence of batch entry 0
  labels_.assign(positions_.size(), -1);
  for (int b = 0; b < mb; ++b) {
    // Fresh sequences every step; ids laid out so that the unsharded reference (dp = 1,
    // micro_batch = dp * mb) reads the very same ones.
    const std::int64_t id = static_cast<std::int64_t>(steps_done_) * dp * mb +
                            static_cast<std::int64_t>(dp_index_) * mb + b;
    const std::vector<int> seq = synthetic_sequence(setup_.seed, id, n, setup_.model.vocab);
    if (b == 0) first = seq;
    for (std::size_t i = 0; i < nl; ++i) {
      const std::size_t k = static_cast<std::size_t>(b) * nl + i;
      const int p = positions_[k];
      tokens[k] = seq[static_cast<std::size_t>(p)];
      // The label is the next token of the whole sequence: for a shard's last token it lives
      // on another shard (shift before sharding). The sequence's last token has none.
      if (p + 1 < n) labels_[k] = seq[static_cast<std::size_t>(p) + 1];
    }
  }
  if (setup_.fault == Fault::label_off_by_one && sp_index_ == 0 && dp_index_ == 0 &&
      setup_.ulysses * setup_.ring > 1) {
    // The end of this rank's first contiguous run: the shard edge whose label lives elsewhere.
    std::size_t k = 0;
    while (k + 1 < nl && positions_[k + 1] == positions_[k] + 1) ++k;
    const std::int64_t p = positions_[k];
    if (p + 2 < n) labels_[k] = first[static_cast<std::size_t>(p) + 2];
  }
  be_.copy_from_host(tokens_d_.data(), tokens.data(), tokens_d_.bytes());
  be_.copy_from_host(labels_d_.data(), labels_.data(), labels_d_.bytes());
}

void Trainer::all_reduce(void* buf, std::size_t count, comm::DType dt) {
  if (world_ && world_->size() > 1) world_->all_reduce(buf, buf, count, dt);
}

StepResult Trainer::compute_gradients() {
  StepResult r;
  ensure_batch();
  model_->zero_grads();
  model_->attention().reset_work();
  Array<double> scalars(be_, 2, MemCategory::working);
  double host[2] = {0.0, 0.0};
  const double local_tokens = static_cast<double>(std::count_if(labels_.begin(), labels_.end(), [](int l) { return l >= 0; }));
  host[0] = local_tokens;
  be_.copy_from_host(scalars.data(), host, sizeof(double));
  all_reduce(scalars.data(), 1, comm::DType::fp64);
  be_.copy_to_host(host, scalars.data(), sizeof(double));
  r.real_tokens = host[0];
  if (r.real_tokens <= 0) throw Error("the step has no token with a label (seq_len must be >= 2)");
  // The loss is the mean over every token of the step. Fault::loss_local_normalisation (tests
  // only) divides by this rank's own count instead, here and in the gradient.
  const bool local = setup_.fault == Fault::loss_local_normalisation;
  const double norm = local ? std::max(local_tokens, 1.0) : r.real_tokens;
  host[1] = model_->forward_backward(tokens_d_.data(), labels_d_.data(), positions_d_.data(),
                                     static_cast<float>(1.0 / norm));
  if (local) host[1] *= r.real_tokens / norm;  // this rank's mean, scaled back by the step's count below
  be_.copy_from_host(scalars.data() + 1, host + 1, sizeof(double));
  all_reduce(scalars.data() + 1, 1, comm::DType::fp64);
  {
    const TimelineRange range(be_.timeline(), trace::Stream::data_parallel, "gradient all-reduce");
    all_reduce(model_->grads(), static_cast<std::size_t>(model_->param_count()), comm::DType::fp32);
  }
  be_.copy_to_host(host + 1, scalars.data() + 1, sizeof(double));
  r.loss = host[1] / r.real_tokens;
  return r;
}

void Trainer::optimizer_step() {
  ++steps_done_;
  const TimelineRange range(be_.timeline(), trace::Stream::compute, "optimizer");
  model_->adamw_step(setup_.opt, steps_done_);
}

StepResult Trainer::step() {
  ensure_batch();  // data preparation is not part of the timed step
  be_.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  StepResult r = compute_gradients();
  optimizer_step();
  be_.synchronize();
  r.time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<float> Trainer::token_losses() const {
  const std::vector<float>& all = model_->token_losses();
  std::vector<float> out;
  for (std::size_t k = 0; k < all.size() && k < labels_.size(); ++k)
    if (labels_[k] >= 0) out.push_back(all[k]);
  return out;
}

std::vector<float> Trainer::params_host() {
  std::vector<float> h(static_cast<std::size_t>(model_->param_count()));
  be_.copy_to_host(h.data(), model_->params(), h.size() * sizeof(float));
  return h;
}

void Trainer::set_params_host(const std::vector<float>& params) {
  if (params.size() != static_cast<std::size_t>(model_->param_count()))
    throw Error(fmt::format("set_params_host: {} values for {} parameters", params.size(), model_->param_count()));
  be_.copy_from_host(model_->params(), params.data(), params.size() * sizeof(float));
  model_->parameters_changed();
}

std::vector<float> Trainer::grads_host() {
  std::vector<float> h(static_cast<std::size_t>(model_->param_count()));
  be_.copy_to_host(h.data(), model_->grads(), h.size() * sizeof(float));
  return h;
}

TrainSetup reference_setup(const TrainSetup& s, int dp) {
  TrainSetup r = s;
  r.ulysses = 1;
  r.ring = 1;
  r.zigzag = false;
  r.kv = KvExchange::ring_hops;
  r.micro_batch = s.micro_batch * dp;
  r.fault = Fault::none;
  // One rank holds every token: the same documents in sequence order, no padding.
  if (r.balancer) r.balancer = Balancer::contiguous;
  r.mem = train_memory_default();  // the plain step: what every memory feature must reproduce
  r.tile_tokens = 0;
  return r;
}

}  // namespace seqpar::train
