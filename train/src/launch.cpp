#include "seqpar/train/launch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "seqpar/comm/environment.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/comm/same_options.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/validity.hpp"
#include "seqpar/train/seq_layout.hpp"
#include "seqpar/train/sp_attention.hpp"
#include "seqpar/train/trainer.hpp"

#ifdef SEQPAR_HAVE_MPI
#include <mpi.h>
#endif

namespace seqpar::train {

void ModelOptions::add(CLI::App& app) {
  app.add_option("--model", model,
                 "model preset name, preset JSON file or Hugging Face config.json (default: a tiny 2-layer model)");
  app.add_option("--layers", layers, "override: decoder layers (presets scaled down in depth)");
  app.add_option("--hidden", hidden, "override: hidden size");
  app.add_option("--heads", heads, "override: attention heads");
  app.add_option("--kv-heads", kv_heads, "override: KV heads (GQA)");
  app.add_option("--head-dim", head_dim, "override: head dimension");
  app.add_option("--ffn-hidden", ffn, "override: SwiGLU hidden size");
  app.add_option("--vocab", vocab, "override: vocabulary size");
  app.add_option("--window", window,
                 "sliding-window attention in every layer: a query sees the W keys ending at itself (Hugging Face's "
                 "sliding_window); 0: full causal in every layer (default: the preset's layer kinds, else full). "
                 "Methods: ulysses and allgather (README, seqpar-train: Sliding windows)");
}

ModelConfig ModelOptions::resolve() const {
  ModelConfig c;
  if (!model.empty()) c = from_sim(sim::load_model(model));
  if (layers) c.layers = *layers;
  if (hidden) c.hidden = *hidden;
  if (heads) c.heads = *heads;
  if (kv_heads) c.kv_heads = *kv_heads;
  if (head_dim) c.head_dim = *head_dim;
  if (ffn) c.ffn = *ffn;
  if (vocab) c.vocab = *vocab;
  if (window) {
    if (*window < 0) throw Error(fmt::format("--window = {}: must be >= 0 (0: full causal attention)", *window));
    c.layer_kinds.assign(*window > 0 ? static_cast<std::size_t>(std::max(c.layers, 0)) : 0, sim::AttentionKind::sliding);
    c.sliding_window = *window;
  }
  validate(c);
  return c;
}

void RunOptions::add(CLI::App& app) {
  app.add_option("--seq-len", seq_len, "tokens per sequence, full length (accepts 64K, 1M)");
  // Each plan flag records that it was given and updates sp, so the default rank count follows
  // the same inference as the plan (seqpar::implied_sp) whatever order the flags come in.
  auto implied = [this] {
    if (sp_given) return;
    try {
      sp = seqpar::implied_sp(plan_flags()).value_or(1);
    } catch (const Error&) {
      // A bad --method or an oversized U x R: plan() reports it with the same message.
    }
  };
  app.add_option_function<std::string>("--method", [this, implied](const std::string& v) { method = v; implied(); },
                                        seqpar::method_names(" | "));
  app.add_option_function<int>("--sp", [this](const int& v) { sp = v; sp_given = true; },
                               "sequence-parallel degree P (default: U x R when both are given, else all ranks)");
  app.add_option_function<int>("--ulysses-degree", [this, implied](const int& v) { ulysses_degree = v; ulysses_given = true; implied(); },
                               "Ulysses degree U");
  app.add_option_function<int>("--ring-degree", [this, implied](const int& v) { ring_degree = v; ring_given = true; implied(); },
                               "ring degree R (P = U x R)");
  app.add_option("--micro-batch", micro_batch, "sequences per SP group per step");
  app.add_option("--gpus", gpus,
                 "ranks for --comm virtual|loopback (default: sp); mpi/nccl take the launcher's");
  app.add_option("--backend", backend, "cpu | cuda");
  app.add_option("--attention", attention,
                 "attention engine of --backend cuda: seqpar | cudnn (default: cudnn where available, else seqpar)");
  app.add_option("--comm", comm, "mpi | nccl | virtual | loopback");
  app.add_option("-J,--json", json_path, "write the measurement JSON to FILE");
  app.add_option("--seed", seed, "seed of the parameters and the synthetic data");
}

void RunOptions::add_memory(CLI::App& app) {
  seqpar::add_memory_flags(&app, mem);
  app.footer("Memory flags as in `seqpar simulate`; the step runs ZeRO 0 (plain data parallelism) and keeps the "
             "optimizer on the device, so --zero other than 0 and --offload-optimizer are refused.");
}

seqpar::MemoryOptions RunOptions::memory() const { return mem.options_over(train_memory_default()); }

seqpar::PlanFlags RunOptions::plan_flags() const {
  seqpar::PlanFlags f;
  f.method = method;
  if (sp_given) f.sp = sp;
  if (ulysses_given) f.ulysses_degree = ulysses_degree;
  if (ring_given) f.ring_degree = ring_degree;
  f.micro_batch = micro_batch;
  return f;
}

seqpar::Plan RunOptions::plan(int world_size) const {
  // 8 GPUs per node: a hybrid without degrees keeps Ulysses within 8 ranks, as on a DGX.
  seqpar::Plan p = seqpar::plan_from_flags(plan_flags(), world_size, parse_count(seq_len, "--seq-len"), 8);
  p.mem = memory();  // ZeRO 0 unless --zero says otherwise (then refused below)
  std::vector<std::string> errors;
  if (!seqpar::check_plan_structure(p, errors)) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "; ") + e;
    throw Error(all);
  }
  check_train_memory(p.mem);  // what the step cannot run: --zero != 0, --offload-optimizer
  SeqLayout(p.seq_len, p.ulysses_degree, p.ring_degree, p.zigzag(), kv_exchange(p.method));  // the step's own layout
  return p;
}

std::optional<kernels::AttentionEngine> RunOptions::attention_engine() const {
  if (attention.empty()) return std::nullopt;
  const kernels::AttentionEngine e = kernels::parse_attention_engine(attention, "--attention");
  if (backend == "cpu")
    throw Error(fmt::format("--attention {} with --backend cpu: the CPU back end has one attention, the reference "
                            "(results record \"attention_engine\": \"reference\"); the engines run on --backend cuda",
                            attention));
  return e;
}

std::string mode_name(comm::Backend b) {
  return to_string(comm::measurement_mode(b));
}

std::unique_ptr<Backend> make_backend(const std::string& name, const std::string& attention) {
  RunOptions o;
  o.backend = name;
  o.attention = attention;
  const std::optional<kernels::AttentionEngine> engine = o.attention_engine();
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend(-1, engine);
  throw Error(fmt::format("--backend '{}': must be cpu or cuda", name));
}

namespace {

int run_guarded(const char* who, int rank, const std::function<int()>& f) {
  try {
    return f();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s rank %d: error: %s\n", who, rank, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s rank %d: internal error: %s\n", who, rank, e.what());
    return 3;
  }
}

}  // namespace

void LaunchChecks::add(CLI::App& app) {
  app.add_option("--comm-timeout", comm_timeout, comm::kCommTimeoutHelp);
}

nlohmann::json run_options_json(const RunOptions& o, const ModelConfig& cfg) {
  const seqpar::MemoryOptions m = o.memory();
  return {{"--zero", m.zero},
          {"--checkpoint", seqpar::to_string(m.checkpoint)},
          {"--offload-checkpoints", m.offload_checkpoints},
          {"--offload-optimizer", m.offload_optimizer},
          {"--offload-params", m.offload_params},
          {"--tiled-mlp", m.tiled_mlp},
          {"--tiled-loss", m.tiled_loss},
          {"--model", {{"name", cfg.name},
                       {"layers", cfg.layers},
                       {"hidden", cfg.hidden},
                       {"heads", cfg.heads},
                       {"kv_heads", cfg.kv_heads},
                       {"head_dim", cfg.head_dim},
                       {"ffn_hidden", cfg.ffn},
                       {"vocab", cfg.vocab},
                       {"tied_embeddings", cfg.tied_embeddings},
                       {"sliding_layers", cfg.sliding_layers()},
                       {"sliding_window", cfg.sliding_window}}},
          {"--seq-len", parse_count(o.seq_len, "--seq-len")},
          {"--method", seqpar::to_string(seqpar::parse_method(o.method))},
          {"--sp", o.sp},
          {"--ulysses-degree", o.ulysses_degree},
          {"--ring-degree", o.ring_degree},
          {"--micro-batch", o.micro_batch},
          {"--gpus", o.gpus},
          {"--backend", o.backend},
          {"--attention", o.attention},
          {"--comm", o.comm},
          {"--seed", o.seed}};
}

int launch_ranks(int* argc, char*** argv, const RunOptions& o, int world_size,
                 const LaunchChecks& checks, const RankBody& body) {
  comm::configure_comm_timeout(checks.comm_timeout);
  const comm::Backend kind = comm::parse_backend(o.comm);
  std::string why;
  if (!comm::backend_available(kind, &why))
    throw Error(fmt::format("--comm {}: not available: {}", o.comm, why));
  const bool on_gpu = o.backend == "cuda";
  o.attention_engine();  // a bad --attention is reported before any rank starts
  if (kind == comm::Backend::nccl && !on_gpu)
    throw Error("--comm nccl needs --backend cuda (NCCL moves GPU buffers)");
  if ((kind == comm::Backend::mpi) && on_gpu)
    throw Error("--comm mpi moves host buffers: use --backend cpu, or --comm nccl on GPUs");
  if (kind == comm::Backend::mpi || kind == comm::Backend::nccl) {
    comm::MpiSession session(argc, argv);
    // Before any other communication (NCCL's bootstrap included): ranks started with different
    // options would crash, hang or compute a wrong result. All ranks agree on the outcome, so
    // they return together, without MPI_Abort; rank 0 says why.
    try {
      comm::verify_same_options(checks.same_options);
    } catch (const Error& e) {
      if (session.world_rank() == 0) std::fprintf(stderr, "seqpar: error: %s\n", e.what());
      return 2;
    }
    int rc = run_guarded("seqpar", session.world_rank(), [&] {
      auto world = kind == comm::Backend::mpi ? comm::make_mpi_world() : comm::make_nccl_world();
      auto be = make_backend(o.backend, o.attention);
      return body(*world, *be);
    });
#ifdef SEQPAR_HAVE_MPI
    // A rank that failed alone would leave the others waiting in a collective.
    if (rc == 2 || rc == 3) MPI_Abort(MPI_COMM_WORLD, rc);
#endif
    return rc;
  }
  if (kind == comm::Backend::loopback) {
    auto world = comm::make_loopback(world_size, 0, on_gpu);
    return run_guarded("seqpar", 0, [&] {
      auto be = make_backend(o.backend, o.attention);
      return body(*world, *be);
    });
  }
  auto comms = comm::make_virtual_world(world_size, on_gpu);
  std::vector<int> rcs(static_cast<std::size_t>(world_size), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r)
    threads.emplace_back([&, r] {
      rcs[static_cast<std::size_t>(r)] = run_guarded("seqpar", r, [&] {
        auto be = make_backend(o.backend, o.attention);
        return body(*comms[static_cast<std::size_t>(r)], *be);
      });
    });
  for (auto& t : threads) t.join();
  return *std::max_element(rcs.begin(), rcs.end());
}

nlohmann::json measurement_document(int argc, const char* const* argv, const std::string& program,
                                    const std::string& mode, bool on_gpu) {
  nlohmann::json j = measurement_header(argc, argv, program, parse_mode(mode), on_gpu);
  j["environment"] = comm::environment_info();
  return j;
}

double sum_over(comm::Communicator& c, Backend& be, double value) {
  Array<double> buf(be, 1, MemCategory::working);
  be.copy_from_host(buf.data(), &value, sizeof(double));
  if (c.size() > 1) c.all_reduce(buf.data(), buf.data(), 1, comm::DType::fp64);
  be.copy_to_host(&value, buf.data(), sizeof(double));
  return value;
}

std::vector<double> gather_over(comm::Communicator& c, Backend& be, double value) {
  Array<double> send(be, 1, MemCategory::working), recv(be, c.size(), MemCategory::working);
  be.copy_from_host(send.data(), &value, sizeof(double));
  c.all_gather(send.data(), recv.data(), 1, comm::DType::fp64);
  std::vector<double> out(static_cast<std::size_t>(c.size()));
  be.copy_to_host(out.data(), recv.data(), out.size() * sizeof(double));
  return out;
}

}  // namespace seqpar::train
