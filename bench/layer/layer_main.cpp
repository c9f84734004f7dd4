// seqpar-bench-layer: forward+backward of one attention layer (RMSNorm, QKV projections, RoPE,
// sequence-parallel attention, output projection) and of one full decoder block (plus SwiGLU
// MLP), Ulysses vs Ring vs hybrid vs all-gather KV, on the training step's code path. Timed with warm-up and
// repetitions; each repetition counts as long as the slowest rank took; the median is reported.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cmath>
#include <cstdio>
#include <random>

#include "seqpar/comm/environment.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/stats.hpp"
#include "seqpar/core/usage_exit.hpp"
#include "seqpar/core/workload_flags.hpp"
#include "seqpar/core/doc_layout.hpp"
#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/workload.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/train/doc_shards.hpp"
#include "seqpar/train/launch.hpp"
#include "seqpar/train/model.hpp"
#include "seqpar/train/sp_attention.hpp"

namespace st = seqpar::train;

namespace {

struct Options {
  st::ModelOptions model;
  st::RunOptions run;
  std::string methods = seqpar::method_names(",");
  int reps = 5, warmup = 1;
  // Packed documents (as seqpar-train): sequence b of the micro-batch takes sampled sequence b mod
  // --doc-batches; --balancer: the method's own layout when empty.
  seqpar::WorkloadFlags docs;
};

// The micro-batch's documents on a plan: the sampled boundaries, the balancer and each sequence's
// placement, every ring group holding the most any of them needs (doc_shards.hpp).
struct PlanDocuments {
  seqpar::Balancer balancer = seqpar::Balancer::contiguous;
  std::vector<std::vector<std::int64_t>> cu_seqlens;
  std::vector<st::DocShards> shards;
  std::int64_t group_len = 0;
};

PlanDocuments plan_documents(const Options& o, const seqpar::Plan& plan) {
  PlanDocuments d;
  d.balancer =
      o.docs.balancer.empty() ? seqpar::sim::native_balancer(plan) : seqpar::parse_balancer(o.docs.balancer, "--balancer");
  const seqpar::SampledWorkload w = seqpar::sample_workload(*o.docs.workload(), plan.seq_len);
  std::vector<seqpar::DocLayout> placed;
  for (int b = 0; b < plan.micro_batch; ++b) {
    d.cu_seqlens.push_back(w.batches[static_cast<std::size_t>(b) % w.batches.size()].cu_seqlens);
    placed.push_back(seqpar::place_documents(d.cu_seqlens.back(), plan.ulysses_degree, plan.ring_degree, d.balancer));
    d.group_len = std::max(d.group_len, st::doc_group_len(placed.back(), plan.ulysses_degree));
  }
  for (std::size_t b = 0; b < placed.size(); ++b)
    d.shards.push_back(st::shard_documents(placed[b], d.cu_seqlens[b], plan.ulysses_degree, d.group_len));
  return d;
}

// Hybrid without given degrees: U = the largest divisor of P not above sqrt(P) (a square-ish split).
st::RunOptions for_method(const Options& o, const std::string& method) {
  st::RunOptions r = o.run;
  r.method = method;
  if (method != "hybrid") {
    // The method fixes its degrees from sp (r.sp: --sp or what the flags imply).
    r.ulysses_degree = r.ring_degree = 0;
    r.ulysses_given = r.ring_given = false;
    r.sp_given = true;
  } else if (!r.ulysses_given && !r.ring_given) {
    int u = 1;
    for (int d = 1; d * d <= r.sp; ++d)
      if (r.sp % d == 0) u = d;
    r.ulysses_degree = u;
    r.ring_degree = r.sp / u;
    r.ulysses_given = r.ring_given = true;
  }
  return r;
}

std::vector<float> random_host(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

int run_rank(const Options& o, const st::ModelConfig& cfg, seqpar::comm::Communicator& world,
             st::Backend& be, int argc, char** argv) {
  const bool lead = world.rank() == 0;
  nlohmann::json results = nlohmann::json::array(), skipped = nlohmann::json::array();
  if (lead)
    std::printf("# seqpar-bench-layer: model %s (hidden %d, heads %d/%d kv, head_dim %d, ffn %d), world %d, %s, backend %s, "
                "attention %s\n",
                cfg.name.c_str(), cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.ffn,
                world.size(), st::mode_name(world.backend()).c_str(), o.run.backend.c_str(),
                std::string(be.attention_engine()).c_str());
  if (lead)
    std::printf("%-16s %-26s %10s %12s %12s %14s %12s\n", "benchmark", "plan", "seq_len",
                "time_ms", "TFLOP/s/gpu", "tokens/s/gpu", "peak_MiB");
  for (const std::string& method : seqpar::split_list(o.methods, "--methods")) {
    const st::RunOptions ro = for_method(o, method);
    seqpar::Plan plan;
    try {
      plan = ro.plan(world.size());
      st::check_ulysses_heads(cfg.heads, cfg.kv_heads, plan.ulysses_degree);
      st::check_window(cfg, plan);
      if (method == "hybrid" && (plan.ulysses_degree == 1 || plan.ring_degree == 1))
        throw seqpar::Error(fmt::format("hybrid needs U > 1 and R > 1; sp = {} gives U{} x R{}",
                                        plan.sp, plan.ulysses_degree, plan.ring_degree));
    } catch (const seqpar::Error& e) {
      // Same inputs on every rank: all skip together, and the record says why.
      if (lead) std::printf("%-16s skipped: %s\n", method.c_str(), e.what());
      skipped.push_back({{"method", method}, {"reason", e.what()}});
      continue;
    }
    auto groups = seqpar::comm::make_groups(world, plan.ulysses_degree, plan.ring_degree);
    st::join_compute_stream(be, groups);
    if (be.on_gpu()) world.set_stream(be.compute_stream());
    const int w = world.rank();
    std::optional<PlanDocuments> docs;
    if (o.docs.given()) docs = plan_documents(o, plan);  // the same on every rank
    const int ring_index = groups.layout.ring_index(w), sp_index = groups.layout.sp_index(w);
    const st::SeqLayout layout(docs ? docs->group_len * plan.ring_degree : plan.seq_len, plan.ulysses_degree,
                               plan.ring_degree, docs ? docs->balancer == seqpar::Balancer::zigzag : plan.zigzag(),
                               st::kv_exchange(plan.method));
    st::ModelConfig one = cfg;
    one.layers = 1;  // the model's first layer, of its kind (sliding under --window)
    if (!one.layer_kinds.empty()) one.layer_kinds.resize(1);
    st::Model model(be, one, plan.micro_batch, layout, ring_index,
                    groups.ulysses.get(), groups.ring.get(), /*blocks_only=*/true);
    model.init(o.run.seed);
    std::vector<int> pos_b;
    if (docs) {  // RoPE positions restart at every document (padding: 0); one call per document
      std::vector<std::vector<std::vector<st::Segment>>> seqs;
      const std::size_t nl = static_cast<std::size_t>(layout.local_len());
      const std::size_t u = static_cast<std::size_t>(sp_index % plan.ulysses_degree);
      for (const st::DocShards& sh : docs->shards) {
        seqs.push_back(sh.groups);
        const std::vector<st::HeldToken> group = st::group_tokens(sh, ring_index);
        for (std::size_t i = 0; i < nl; ++i) pos_b.push_back(static_cast<int>(group[u * nl + i].doc_pos));
      }
      model.attention().set_sequences(std::move(seqs));
    } else {
      const std::vector<int> pos = layout.positions(sp_index);
      for (int b = 0; b < plan.micro_batch; ++b) pos_b.insert(pos_b.end(), pos.begin(), pos.end());
    }
    st::Ints positions(be, static_cast<std::int64_t>(pos_b.size()), st::MemCategory::working);
    be.copy_from_host(positions.data(), pos_b.data(), positions.bytes());
    const std::int64_t tc = static_cast<std::int64_t>(model.tokens_per_rank()) * cfg.hidden;
    // Real data, never zeros: random inputs and output gradients, different per rank.
    const auto x_host = random_host(static_cast<std::size_t>(tc), o.run.seed + 17 * static_cast<std::uint64_t>(w));
    const auto dx_host = random_host(static_cast<std::size_t>(tc), o.run.seed + 31 * static_cast<std::uint64_t>(w) + 1);

    for (const bool attention_only : {true, false}) {
      const char* bench = attention_only ? "attention_layer" : "decoder_block";
      std::vector<double> samples;
      be.memory().reset_peak();
      for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
        const seqpar::DType adt = model.activation_type();
        st::Tensor x = st::upload(be, x_host.data(), tc, adt, st::MemCategory::activations);
        st::Tensor dx = st::upload(be, dx_host.data(), tc, adt, st::MemCategory::working);
        model.zero_grads();
        be.synchronize();
        world.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        st::LayerActs acts;
        model.attention().reset_work();
        st::Tensor y = model.block_forward(0, std::move(x), acts, positions.data(), attention_only);
        y.reset();
        model.block_backward(0, acts, dx.ref(), positions.data(), attention_only);
        be.synchronize();
        const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::vector<double> all = st::gather_over(world, be, mine);
        if (rep >= o.warmup) samples.push_back(*std::max_element(all.begin(), all.end()));
      }
      const seqpar::Stats s = seqpar::summarize(samples);
      const double flops = st::block_flops(cfg, plan.micro_batch, plan.seq_len, attention_only) * plan.dp();
      const double tflops = flops / s.median / plan.gpus / 1e12;
      const double tokens = static_cast<double>(plan.seq_len) * plan.micro_batch * plan.dp() / s.median / plan.gpus;
      const std::string name = fmt::format("{}/{}/sp{}/U{}xR{}/seq{}/b{}", bench, method, plan.sp,
                                           plan.ulysses_degree, plan.ring_degree, plan.seq_len,
                                           plan.micro_batch);
      if (lead)
        std::printf("%-16s %-26s %10lld %12.3f %12.4f %14.1f %12.2f\n", bench,
                    seqpar::describe_structure(plan).c_str(), static_cast<long long>(plan.seq_len),
                    s.median * 1e3, tflops, tokens,
                    static_cast<double>(be.memory().peak_bytes()) / (1 << 20));
      nlohmann::json record = {{"name", name}, {"benchmark", bench}, {"plan", seqpar::to_json(plan)},
                         {"attention_engine", be.attention_engine()},
                         {"time_s", s.median}, {"samples_s", samples}, {"stats", seqpar::to_json(s, "_s")},
                         {"tflops_per_gpu", tflops}, {"tokens_per_s_per_gpu", tokens},
                         {"flops", flops}, {"peak_memory_bytes", be.memory().peak_bytes()},
                         {"memory", be.memory().parts_at_peak_json()},
                         {"kv_replication", model.attention().kv_replication()}};
      if (docs) {
        // flops above are the dense causal step's; the attention each rank computed under the mask
        // (its last repetition) is here, beside core's count of it (doc_work.hpp).
        const std::vector<double> pairs =
            st::gather_over(world, be, static_cast<double>(model.attention().work().pairs));
        const std::vector<double> calls =
            st::gather_over(world, be, static_cast<double>(model.attention().work().calls));
        const seqpar::SpShape shape{plan.ulysses_degree, plan.ring_degree,
                                    seqpar::kv_allgather(plan.method) && plan.ring_degree > 1};
        std::int64_t counted = 0;
        seqpar::WorkOptions band;
        band.window = one.window_of(0);
        for (const auto& cu : docs->cu_seqlens)
          counted += seqpar::count_batch_work(cu, shape, docs->balancer, band).ranks[static_cast<std::size_t>(ring_index)].pairs;
        const std::vector<double> counted_all =
            st::gather_over(world, be, static_cast<double>(counted * (cfg.heads / plan.ulysses_degree)));
        nlohmann::json per_rank = nlohmann::json::array();
        for (std::size_t r = 0; r < pairs.size(); ++r)
          per_rank.push_back({{"rank", r}, {"pairs", static_cast<std::int64_t>(pairs[r])},
                              {"calls", static_cast<std::int64_t>(calls[r])},
                              {"counted_pairs", static_cast<std::int64_t>(counted_all[r])}});
        record["flops_note"] = "dense causal FLOPs of the sequence; the document mask leaves attention_per_rank's pairs";
        record["documents"] = {{"balancer", seqpar::to_string(docs->balancer)}, {"cu_seqlens", docs->cu_seqlens},
                               {"group_tokens", docs->group_len}, {"attention_per_rank", per_rank}};
      }
      results.push_back(std::move(record));
    }
  }
  if (lead && !o.run.json_path.empty()) {
    nlohmann::json doc = st::measurement_document(argc, argv, "seqpar-bench-layer",
                                                  st::mode_name(world.backend()), be.on_gpu());
    doc["config"] = {{"model", {{"name", cfg.name}, {"hidden", cfg.hidden}, {"heads", cfg.heads},
                                {"kv_heads", cfg.kv_heads}, {"head_dim", cfg.head_dim},
                                {"ffn_hidden", cfg.ffn},
                                // the measured layer's band (its first layer's kind; 0: full causal)
                                {"window", cfg.window_of(0)}}},
                     {"seq_len", seqpar::parse_count(o.run.seq_len, "--seq-len")},
                     {"sp", o.run.sp}, {"micro_batch", o.run.micro_batch}, {"methods", o.methods},
                     {"reps", o.reps}, {"warmup", o.warmup}, {"backend", o.run.backend},
                     {"attention_engine", be.attention_engine()},
                     {"comm", o.run.comm}, {"world_size", world.size()}, {"dtype", seqpar::to_string(be.act_dtype())},
                     {"seed", o.run.seed}};
    if (o.docs.given()) doc["config"]["documents"] = o.docs.to_json();
    doc["results"] = results;
    doc["skipped"] = skipped;
    seqpar::write_json_file(o.run.json_path, doc);
  }
  return results.empty() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"seqpar-bench-layer: forward+backward of one attention layer and one decoder block, Ulysses vs Ring vs "
               "hybrid vs all-gather KV"};
  Options o;
  o.model.add(app);
  o.run.add(app);
  app.add_option("--methods", o.methods, "comma-separated (default every method): " + seqpar::method_names(","));
  app.add_option("--reps", o.reps, "timed repetitions (the median is reported)");
  app.add_option("--warmup", o.warmup, "untimed repetitions first");
  seqpar::add_workload_flags(&app, o.docs, true, "sequence b of the micro-batch takes sampled sequence b mod --doc-batches");
  st::LaunchChecks checks;  // --comm-timeout, and the options every MPI rank must share
  checks.add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return seqpar::usage_exit(app, e);
  }
  try {
    (void)o.docs.workload();  // checked once, its flags refused without --documents
    if (o.reps < 1) throw seqpar::Error(fmt::format("--reps = {}: must be >= 1", o.reps));
    if (o.warmup < 0) throw seqpar::Error(fmt::format("--warmup = {}: must be >= 0", o.warmup));
    const st::ModelConfig cfg = o.model.resolve();
    for (const std::string& m : seqpar::split_list(o.methods, "--methods")) seqpar::parse_method(m);
    const int local_world = o.run.gpus > 0 ? o.run.gpus : o.run.sp;
    // Parsed values; -J is left out (only rank 0 writes it).
    checks.same_options = st::run_options_json(o.run, cfg);
    checks.same_options.update({{"--methods", seqpar::split_list(o.methods, "--methods")},
                                {"--reps", o.reps}, {"--warmup", o.warmup}, {"--documents", o.docs.documents},
                                {"--packing", o.docs.packing}, {"--doc-seed", o.docs.seed},
                                {"--doc-batches", o.docs.batches}, {"--balancer", o.docs.balancer}});
    return st::launch_ranks(&argc, &argv, o.run, local_world, checks,
                            [&](seqpar::comm::Communicator& world, st::Backend& be) {
                              return run_rank(o, cfg, world, be, argc, argv);
                            });
  } catch (const seqpar::Error& e) {
    std::fprintf(stderr, "seqpar-bench-layer: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Anything else (a JSON library error, bad_alloc) is still reported, never an abort.
    std::fprintf(stderr, "seqpar-bench-layer: internal error: %s\n", e.what());
    return 3;
  }
}
