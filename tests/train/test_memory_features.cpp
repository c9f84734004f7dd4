// ALST's memory features in the training step (--checkpoint, --offload-checkpoints, --tiled-mlp,
// --tiled-loss): every combination gives the plain step's loss and gradients (fp32 CPU back end,
// virtual ranks, every SP method); each feature lowers the measured peak of the parts the
// simulator says it lowers; the stored activations per layer match the simulator's bytes (bf16).
#include <gtest/gtest.h>


#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/tiling.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"
#include "virtual_ranks.hpp"

namespace seqpar::train {
namespace {

using seqpar::Checkpoint;

TrainSetup tiny(int u, int r, bool zigzag) {
  TrainSetup s;
  s.model.layers = 3;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.kv_heads = 2;
  s.model.head_dim = 8;
  s.model.ffn = 64;
  s.model.vocab = 64;
  s.seq_len = 32;
  s.micro_batch = 2;
  s.ulysses = u;
  s.ring = r;
  s.zigzag = zigzag;
  return s;
}

seqpar::MemoryOptions options(Checkpoint c, bool offload, bool tiled_mlp, bool tiled_loss) {
  seqpar::MemoryOptions m = train_memory_default();
  m.checkpoint = c;
  m.offload_checkpoints = offload;
  m.tiled_mlp = tiled_mlp;
  m.tiled_loss = tiled_loss;
  return m;
}

// Every combination the flags allow (offload needs full checkpointing).
std::vector<seqpar::MemoryOptions> all_combinations() {
  std::vector<seqpar::MemoryOptions> all;
  for (Checkpoint c : {Checkpoint::none, Checkpoint::selective, Checkpoint::full})
    for (bool offload : {false, true})
      for (bool mlp : {false, true})
        for (bool loss : {false, true})
          if (!offload || c == Checkpoint::full) all.push_back(options(c, offload, mlp, loss));
  return all;
}

// One gradient computation of `s` on `world` virtual ranks for each memory option combination,
// each rank checked against the plain unsharded step (same tolerance as SpVirtual: the same sums
// in another order).
void expect_every_combination_matches_plain(TrainSetup s, int world) {
  const int dp = world / (s.ulysses * s.ring);
  StepValues ref;
  {
    auto be = make_cpu_backend();
    Trainer t(*be, nullptr, reference_setup(s, dp));
    ref = {t.compute_gradients().loss, t.grads_host()};
  }
  s.tile_tokens = 5;  // ragged tiles: 16 rows per rank in tiles of 5, 5, 5, 1
  for (const seqpar::MemoryOptions& m : all_combinations()) {
    s.mem = m;
    const testing::VirtualRun run = testing::run_on_virtual_ranks(s, world);
    const std::vector<StepValues>& steps = run.steps;
    const std::vector<ParamTensor>& tensors = run.tensors;
    const std::vector<std::string>& errors = run.errors;
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << describe(m) << " rank " << r;
      const StepValues& got = steps[static_cast<std::size_t>(r)];
      EXPECT_NEAR(got.loss, ref.loss, 1e-5 * ref.loss) << describe(m) << " rank " << r;
      const std::vector<double> e = tensor_errors(tensors, got, ref);
      for (std::size_t i = 1; i < e.size(); ++i)
        EXPECT_LT(e[i], 1e-5) << describe(m) << " rank " << r << ": grad " << tensors[i - 1].name;
    }
  }
}

TEST(MemoryFeatures, UlyssesEveryCombinationMatchesPlain) {
  expect_every_combination_matches_plain(tiny(2, 1, false), 2);
}
TEST(MemoryFeatures, RingEveryCombinationMatchesPlain) {
  expect_every_combination_matches_plain(tiny(1, 2, false), 2);
}
TEST(MemoryFeatures, RingZigzagEveryCombinationMatchesPlain) {
  expect_every_combination_matches_plain(tiny(1, 2, true), 2);
}
TEST(MemoryFeatures, HybridEveryCombinationMatchesPlain) {
  expect_every_combination_matches_plain(tiny(2, 2, true), 4);
}

// One rank, one gradient computation: the tracker's per-category peaks.
struct Measured {
  std::int64_t peak = 0;
  std::int64_t part[kMemCategories] = {};
};
Measured measure(const TrainSetup& s, Precision precision = Precision::fp32) {
  auto be = make_cpu_backend(precision);
  Trainer t(*be, nullptr, s);
  be->memory().reset_peak();
  t.compute_gradients();
  Measured m;
  m.peak = be->memory().peak_bytes();
  for (int i = 0; i < kMemCategories; ++i) m.part[i] = be->memory().peak_bytes(static_cast<MemCategory>(i));
  return m;
}
std::int64_t part(const Measured& m, MemCategory c) { return m.part[static_cast<int>(c)]; }
// What the backward keeps: the stored activations and full checkpointing's layer inputs.
std::int64_t kept(const Measured& m) {
  return part(m, MemCategory::activations) + part(m, MemCategory::checkpoints);
}

// Long enough that the stored activations and the logits outweigh the weights.
TrainSetup long_single(seqpar::MemoryOptions mem) {
  TrainSetup s = tiny(1, 1, false);
  s.seq_len = 256;
  s.micro_batch = 1;
  s.model.layers = 4;
  s.model.vocab = 512;
  s.mem = mem;
  return s;
}

// The simulator's model of the same shapes.
sim::Model sim_model(const TrainSetup& s) {
  sim::Model m;
  m.layers = s.model.layers;
  m.hidden = s.model.hidden;
  m.heads = s.model.heads;
  m.kv_heads = s.model.kv_heads;
  m.head_dim = s.model.head_dim;
  m.ffn_hidden = s.model.ffn;
  m.vocab = s.model.vocab;
  return m;
}

// The simulator with seqpar-train's framework profile (sim/presets/frameworks/seqpar-train.json).
sim::System seqpar_train() {
  sim::System sys;
  sim::use_framework(sys, sim::load_framework("seqpar-train"));
  return sys;
}

TEST(MemoryFeatures, EachFeatureLowersThePartsTheSimulatorSaysItLowers) {
  const Measured plain = measure(long_single(options(Checkpoint::none, false, false, false)));
  const Measured sel = measure(long_single(options(Checkpoint::selective, false, false, false)));
  const Measured full = measure(long_single(options(Checkpoint::full, false, false, false)));
  const Measured off = measure(long_single(options(Checkpoint::full, true, false, false)));
  const Measured mlp = measure(long_single(options(Checkpoint::none, false, true, false)));
  const Measured loss = measure(long_single(options(Checkpoint::none, false, false, true)));
  // Checkpointing and TiledMLP: fewer stored activations (sim: stored_bytes_per_token).
  EXPECT_LT(kept(sel), kept(plain));
  EXPECT_LT(kept(full), kept(sel));
  EXPECT_LT(kept(mlp), kept(plain));
  // Offload: the device keeps fewer layer inputs, the host holds all of them (sim: host_bytes).
  EXPECT_LT(part(off, MemCategory::checkpoints), part(full, MemCategory::checkpoints));
  EXPECT_EQ(part(full, MemCategory::host_offload), 0);
  const TrainSetup s = long_single({});
  const std::int64_t layer_input = s.seq_len * s.model.hidden * 4;
  EXPECT_EQ(part(off, MemCategory::host_offload), s.model.layers * layer_input);
  EXPECT_LE(part(off, MemCategory::checkpoints), 2 * layer_input);  // sim: two on the device
  // TiledMLP: a tile's MLP working set instead of all tokens' (sim: mlp_ws).
  EXPECT_LT(part(mlp, MemCategory::working), part(plain, MemCategory::working));
  // Tiled loss: one tile's logits (sim: loss_tokens).
  EXPECT_LT(part(loss, MemCategory::logits), part(plain, MemCategory::logits));
  seqpar::Plan lp;
  lp.gpus = 1;
  lp.seq_len = s.seq_len;
  EXPECT_EQ(part(loss, MemCategory::logits),
            std::int64_t(sim::alst_tile_rows(sim_model(s), lp)) * s.model.vocab * 4);  // sim's tile
  // In bf16 the logits are bf16: one tile of them is half the fp32 mode's.
  EXPECT_EQ(part(measure(long_single(options(Checkpoint::none, false, false, true)), Precision::bf16), MemCategory::logits),
            std::int64_t(sim::alst_tile_rows(sim_model(s), lp)) * s.model.vocab * 2);
  // And each lowers the overall peak at this shape.
  for (const Measured* m : {&sel, &full, &off, &mlp, &loss}) EXPECT_LT(m->peak, plain.peak);
  // Host memory is not device memory: offload's device peak is below full checkpointing's.
  EXPECT_LT(off.peak, full.peak);
}

// The simulator's stored activations per layer against the measured ones at the same shape: the
// extra layer of a 3-layer model over a 2-layer one. In bf16 the step stores what the simulator
// counts, byte for byte: its bf16 values in bf16 and its fp32 ones (LSE, RMSNorm rstd) in fp32. The
// fp32 validation mode keeps every value in 4 bytes.
TEST(MemoryFeatures, StoredActivationsPerLayerMatchTheSimulator) {
  struct Case { Checkpoint c; bool tiled_mlp; };
  for (const Precision precision : {Precision::bf16, Precision::fp32}) {
    for (const Case k : {Case{Checkpoint::none, false}, Case{Checkpoint::selective, false},
                         Case{Checkpoint::full, false}, Case{Checkpoint::none, true},
                         Case{Checkpoint::selective, true}}) {
      TrainSetup s = long_single(options(k.c, false, k.tiled_mlp, false));
      s.model.layers = 2;
      const Measured two = measure(s, precision);
      s.model.layers = 3;
      const Measured three = measure(s, precision);
      const double measured = double(kept(three) - kept(two)) / double(s.seq_len);
      seqpar::Plan p;
      p.gpus = 1;
      p.seq_len = s.seq_len;
      p.mem = s.mem;
      const sim::StoredValues v = sim::stored_values_per_token(sim_model(s), seqpar_train(), p, k.c);
      const double expected = precision == Precision::bf16 ? sim::stored_bytes_per_token(sim_model(s), seqpar_train(), p, k.c)
                                                           : 4.0 * (v.bf16 + v.fp32);
      EXPECT_DOUBLE_EQ(measured, expected)
          << to_string(precision) << " " << seqpar::to_string(k.c) << (k.tiled_mlp ? " tiled-mlp" : "");
    }
  }
}

// Checkpoint offload, layer inputs counted as the simulator counts them: all of them on the host,
// and on the device the same saving over keeping them (bf16 in both; the fp32 mode twice that).
TEST(MemoryFeatures, OffloadedLayerInputsMatchTheSimulator) {
  for (const Precision precision : {Precision::bf16, Precision::fp32})
  for (int layers : {1, 2, 4}) {
    const double width = precision == Precision::bf16 ? 1.0 : 2.0;  // step bytes over the simulator's
    TrainSetup s = long_single(options(Checkpoint::full, false, false, false));
    s.model.layers = layers;
    const Measured kept_all = measure(s, precision);
    s.mem.offload_checkpoints = true;
    const Measured off = measure(s, precision);
    seqpar::Plan p;
    p.gpus = 1;
    p.seq_len = s.seq_len;
    p.mem = s.mem;
    const sim::System sys = seqpar_train();
    const sim::MemoryEstimate e = sim::estimate_memory(sim_model(s), sys, p);
    p.mem.offload_checkpoints = false;
    const sim::MemoryEstimate k = sim::estimate_memory(sim_model(s), sys, p);
    EXPECT_DOUBLE_EQ(double(part(off, MemCategory::host_offload)), width * e.host_bytes)
        << to_string(precision) << " " << layers << " layers";
    EXPECT_DOUBLE_EQ(double(part(kept_all, MemCategory::checkpoints) - part(off, MemCategory::checkpoints)),
                     width * (k.device_checkpoint_bytes - e.device_checkpoint_bytes))
        << to_string(precision) << " " << layers << " layers";
  }
}

TEST(MemoryFeatures, RefusesWhatTheStepCannotRun) {
  auto refused = [](seqpar::MemoryOptions m, const std::string& expect) {
    try {
      check_train_memory(m);
      ADD_FAILURE() << "accepted: " << expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  refused(options(Checkpoint::selective, true, false, false), "offload_checkpoints: offloading keeps full-checkpoint layer inputs");
  seqpar::MemoryOptions z = train_memory_default();
  z.zero = 1;
  refused(z, "--zero 1: the training step runs plain data parallelism");
  z = train_memory_default();
  z.offload_optimizer = true;
  refused(z, "--offload-optimizer");
  EXPECT_NO_THROW(check_train_memory(options(Checkpoint::full, true, true, true)));
}

// ALST cuts every sequence of the micro-batch into ceil(seq / hidden) tiles (core/tiling.hpp, the
// rule the simulator prices): a tile holds `batch` sequences' slices, not a slice of the batch's
// concatenated tokens.
TEST(MemoryFeatures, AlstTileIsBatchTimesThePerSequenceTile) {
  TrainSetup s = tiny(1, 1, false);
  s.seq_len = 48;  // hidden 32: 2 tiles of 24 per sequence
  s.micro_batch = 2;
  s.mem = options(Checkpoint::none, false, true, true);
  auto be = make_cpu_backend();
  Trainer t(*be, nullptr, s);
  EXPECT_EQ(t.model().tile_tokens(), 2 * alst_tile_tokens(48, s.model.hidden));
  EXPECT_EQ(t.model().tile_tokens(), 48);
}

}  // namespace
}  // namespace seqpar::train
