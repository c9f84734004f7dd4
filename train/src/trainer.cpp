#include "seqpar/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

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
  const SeqLayout layout(setup.seq_len, setup.ulysses, setup.ring, setup.zigzag, setup.kv);
  check_step_sizes(setup);  // before the first allocation
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

void Trainer::load_batch() {
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
  r.mem = train_memory_default();  // the plain step: what every memory feature must reproduce
  r.tile_tokens = 0;
  return r;
}

}  // namespace seqpar::train
