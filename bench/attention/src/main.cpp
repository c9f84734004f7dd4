// seqpar-bench-attention: flash attention forward and backward throughput on one GPU, on either attention
// engine (--attention seqpar | cudnn, attention_engine.hpp) or on both, side by side on the same shapes.
// TFLOP/s by the FLOP convention of docs/ARCHITECTURE.md: forward 4*b*s^2*heads*d (half with a causal mask),
// backward 2.5x the forward. scripts/bench_sdpa.py times PyTorch's SDPA on the same shapes with the same
// result fields, so a report can set them side by side.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "seqpar/bench/device_memory.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/bench/gbench_harness.hpp"
#include "seqpar/bench/gpu_timer.hpp"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/workload.hpp"
#include "seqpar/core/workload_flags.hpp"
#include "seqpar/bench/attention_engine_table.hpp"
#include "seqpar/kernels/attention_engine.hpp"
#include "seqpar/kernels/cudnn_attention.hpp"
#include "seqpar/kernels/fill.cuh"
#include "seqpar/kernels/flash_attention.cuh"

namespace seqpar::bench {
namespace {

using kernels::AttentionEngine;
using kernels::AttentionShape;
using kernels::DType;

struct Options {
  std::string seq_lens = "1K,2K,4K,8K,16K,32K,64K";
  std::string head_dims = "64,128";
  std::string masks = "full,causal";
  std::string ops = "fwd,bwd";
  std::string dtype = "bf16";
  std::string attention;  // seqpar | cudnn | both; empty: the default engine (attention_engine.hpp)
  int batch = 1;
  int heads = 16;
  int kv_heads = 0;  // 0: same as heads
  // Packed documents (core's workload.hpp): batch entry b takes sampled sequence b mod --doc-batches,
  // each document one causal call (as a varlen kernel runs cu_seqlens); replaces --masks.
  WorkloadFlags docs;  // no --balancer: one GPU, the whole sequence
  bool masks_given = false;
  TimingOptions timing;
  std::string json_path;
};

double attention_flops(const AttentionShape& s, bool backward) {
  double f = 4.0 * s.batch * static_cast<double>(s.seq_q) * static_cast<double>(s.seq_k) * s.heads * s.head_dim;
  if (s.causal) f /= 2;
  return backward ? 2.5 * f : f;
}

// --attention as given: nullopt for the default, else the engine; `both` sets *both. Checked
// before the device is, so a misspelt flag is reported as such everywhere.
std::optional<AttentionEngine> requested_engine(const std::string& flag, bool* both) {
  *both = flag == "both";
  if (flag.empty() || *both) return std::nullopt;
  try {
    return kernels::parse_attention_engine(flag, "--attention");
  } catch (const Error&) {
    throw Error(fmt::format("--attention '{}': unknown attention engine (accepted: seqpar, cudnn, both)", flag));
  }
}

// The engines to run: the requested one or the default, or both (seqpar first) to compare them on
// the same shapes. cudnn where it is absent is an error naming why (choose_attention_engine).
std::vector<AttentionEngine> engines_to_run(const std::string& flag) {
  bool both = false;
  const std::optional<AttentionEngine> requested = requested_engine(flag, &both);
  const kernels::EngineAvailability have = kernels::attention_engine_availability();
  if (both) {
    kernels::choose_attention_engine(AttentionEngine::cudnn, have, "--attention both:");
    return {AttentionEngine::seqpar, AttentionEngine::cudnn};
  }
  return {kernels::choose_attention_engine(requested, have, "--attention")};
}

// One call of a packed sequence under the document mask: one document of one batch entry, causal
// within it, at its element offsets in the [b, s, heads, d] buffers (lse: its own [heads][len] block).
struct DocCall {
  AttentionShape s;
  std::size_t q_off = 0, k_off = 0, lse_off = 0;
};

std::vector<DocCall> document_calls(const AttentionShape& whole, const std::vector<std::vector<std::int64_t>>& cu) {
  std::vector<DocCall> calls;
  for (std::size_t b = 0; b < cu.size(); ++b)
    for (std::size_t i = 0; i + 1 < cu[b].size(); ++i) {
      DocCall c;
      c.s = whole;
      c.s.batch = 1;
      c.s.seq_q = c.s.seq_k = static_cast<int>(cu[b][i + 1] - cu[b][i]);
      c.s.causal = true;
      const std::size_t row = b * static_cast<std::size_t>(whole.seq_q) + static_cast<std::size_t>(cu[b][i]);
      c.q_off = row * static_cast<std::size_t>(whole.heads) * static_cast<std::size_t>(whole.head_dim);
      c.k_off = row * static_cast<std::size_t>(whole.kv_heads) * static_cast<std::size_t>(whole.head_dim);
      c.lse_off = row * static_cast<std::size_t>(whole.heads);
      calls.push_back(c);
    }
  return calls;
}

// The view `elems` elements of type t further on.
template <class P>
P* offset_by(P* p, std::size_t elems, DType t) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P*>(reinterpret_cast<Byte*>(p) + elems * kernels::dtype_size(t));
}

// One attention call on `engine`; the cuDNN engine's plan cache lives in `cudnn` (null for seqpar).
void run_forward(AttentionEngine engine, kernels::CudnnAttention* cudnn, const AttentionShape& s, DType t,
                 const void* q, const void* k, const void* v, void* o, float* lse, void* ws) {
  if (engine == AttentionEngine::cudnn) cudnn->forward(s, t, q, k, v, o, lse, ws);
  else kernels::flash_attention_forward(s, t, q, k, v, o, lse);
}

// All buffers of one attention call; the benchmark rotates through several sets against L2 reuse.
struct AttentionBuffers {
  DeviceMemory q, k, v, o, lse, dout, dq, dk, dv, ws;
  // The workspace the engine asks for this call (its own size query), recorded with each row so
  // that the memory model's workspace figures come from the engine (seqpar calibrate fits them).
  std::size_t call_workspace_bytes = 0;
  AttentionBuffers(const AttentionShape& s, DType t, bool backward, std::uint64_t seed, AttentionEngine engine,
                   kernels::CudnnAttention* cudnn, const std::vector<DocCall>& docs = {}) {
    const std::size_t es = kernels::dtype_size(t);
    const std::size_t nq = std::size_t(s.batch) * s.seq_q * s.heads * s.head_dim;
    const std::size_t nk = std::size_t(s.batch) * s.seq_k * s.kv_heads * s.head_dim;
    q = DeviceMemory(nq * es);
    k = DeviceMemory(nk * es);
    v = DeviceMemory(nk * es);
    o = DeviceMemory(nq * es);
    lse = DeviceMemory(std::size_t(s.batch) * s.heads * s.seq_q * 4);
    kernels::fill_uniform(t, q.get(), nq, seed);
    kernels::fill_uniform(t, k.get(), nk, seed + 1);
    kernels::fill_uniform(t, v.get(), nk, seed + 2);
    // The engine's workspace: cuDNN's per graph (forward and backward differ); seqpar's forward needs none.
    std::size_t fwd_ws = engine == AttentionEngine::cudnn ? cudnn->forward_workspace_bytes(s, t) : 0;
    std::size_t bwd_ws = !backward                         ? 0
                         : engine == AttentionEngine::cudnn ? cudnn->backward_workspace_bytes(s, t)
                                                            : kernels::flash_attention_backward_workspace_bytes(s);
    for (const DocCall& c : docs) {  // the largest any document's call asks for
      if (engine == AttentionEngine::cudnn) fwd_ws = std::max(fwd_ws, cudnn->forward_workspace_bytes(c.s, t));
      if (backward)
        bwd_ws = std::max(bwd_ws, engine == AttentionEngine::cudnn
                                      ? cudnn->backward_workspace_bytes(c.s, t)
                                      : kernels::flash_attention_backward_workspace_bytes(c.s));
    }
    if (!backward) {
      ws = DeviceMemory(fwd_ws);
      call_workspace_bytes = fwd_ws;
      return;
    }
    dout = DeviceMemory(nq * es);
    dq = DeviceMemory(nq * es);
    dk = DeviceMemory(nk * es);
    dv = DeviceMemory(nk * es);
    call_workspace_bytes = bwd_ws;
    ws = DeviceMemory(std::max(fwd_ws, call_workspace_bytes));
    kernels::fill_uniform(t, dout.get(), nq, seed + 3);
    // The backward's o and lse come from a real forward of the same engine, as in training.
    if (docs.empty())
      run_forward(engine, cudnn, s, t, q.get(), k.get(), v.get(), o.get(), static_cast<float*>(lse.get()), ws.get());
    for (const DocCall& c : docs)
      run_forward(engine, cudnn, c.s, t, offset_by(q.get(), c.q_off, t), offset_by(k.get(), c.k_off, t),
                  offset_by(v.get(), c.k_off, t), offset_by(o.get(), c.q_off, t), static_cast<float*>(lse.get()) + c.lse_off,
                  ws.get());
  }
  std::size_t bytes() const {
    return q.bytes() + k.bytes() + v.bytes() + o.bytes() + lse.bytes() + dout.bytes() + dq.bytes() + dk.bytes() +
           dv.bytes() + ws.bytes();
  }
};

// One benchmarked shape: every input check is here, on the host, before the device is asked for,
// so input that can never be valid exits 2 as in every other program (README "Exit codes").
struct Point {
  std::string op, mask;
  bool backward = false;
  std::int64_t d = 0, seq = 0;
  AttentionShape s;
  std::vector<std::vector<std::int64_t>> cu;
  std::vector<DocCall> docs;
  double flops = 0;
};

std::vector<Point> points_of(const Options& opt) {
  const DType t = kernels::parse_dtype(opt.dtype, "--dtype");
  if (t == DType::fp32) throw Error("--dtype: fp32 is not supported by the attention kernels (bf16 or fp16)");
  if (opt.batch <= 0 || opt.heads <= 0 || opt.kv_heads < 0)
    throw Error("--batch and --heads must be positive, --kv-heads positive or 0 (= --heads)");
  const int kv_heads = opt.kv_heads == 0 ? opt.heads : opt.kv_heads;
  std::vector<Point> out;
  for (const std::string& op : split_list(opt.ops, "--ops")) {
    if (op != "fwd" && op != "bwd") throw Error(fmt::format("--ops: unknown operation '{}' (fwd, bwd)", op));
    const bool backward = op == "bwd";
    for (const std::string& dtext : split_list(opt.head_dims, "--head-dims")) {
      const auto d = parse_count(dtext, "--head-dims");
      if (opt.docs.given() && opt.masks_given)
        throw Error("--masks with --documents: the document mask (causal within each document) replaces them");
      const std::string masks = opt.docs.given() ? std::string("documents") : opt.masks;
      for (const std::string& mask : split_list(masks, "--masks")) {
        if (mask != "full" && mask != "causal" && mask != "documents")
          throw Error(fmt::format("--masks: unknown mask '{}' (full, causal)", mask));
        for (const std::string& stext : split_list(opt.seq_lens, "--seq-lens")) {
          const auto seq = parse_count(stext, "--seq-lens");
          AttentionShape s;
          s.batch = opt.batch;
          s.seq_q = s.seq_k = static_cast<int>(seq);
          s.heads = opt.heads;
          s.kv_heads = kv_heads;
          s.head_dim = static_cast<int>(d);
          s.causal = mask != "full";
          ref::validate(s);
          if (seq > (1 << 30)) throw Error("--seq-lens: at most 1G tokens");
          // --documents: the sampled sequences' boundaries, one call per document (host side).
          std::vector<std::vector<std::int64_t>> cu;
          if (opt.docs.given()) {
            const SampledWorkload w = sample_workload(*opt.docs.workload(), seq);
            for (int b = 0; b < s.batch; ++b)
              cu.push_back(w.batches[static_cast<std::size_t>(b) % w.batches.size()].cu_seqlens);
          }
          std::vector<DocCall> docs = document_calls(s, cu);
          double flops = docs.empty() ? attention_flops(s, backward) : 0.0;
          for (const DocCall& c : docs) flops += attention_flops(c.s, backward);
          out.push_back({op, mask, backward, d, seq, s, std::move(cu), std::move(docs), flops});
        }
      }
    }
  }
  return out;
}

void register_all(const Options& opt, const std::vector<Point>& points, const std::vector<AttentionEngine>& engines,
                  Recorder& rec) {
  const DType t = kernels::parse_dtype(opt.dtype, "--dtype");  // checked in points_of
  // One cuDNN handle and plan cache for the run, shared by every benchmark on that engine.
  std::shared_ptr<kernels::CudnnAttention> cudnn;
  for (AttentionEngine e : engines)
    if (e == AttentionEngine::cudnn) cudnn = std::make_shared<kernels::CudnnAttention>();
  for (const Point& p : points) {
    const std::string& op = p.op;
    const std::string& mask = p.mask;
    const bool backward = p.backward;
    const std::int64_t d = p.d, seq = p.seq;
    const AttentionShape& s = p.s;
    const std::vector<std::vector<std::int64_t>>& cu = p.cu;
    const std::vector<DocCall>& docs = p.docs;
    const double flops = p.flops;
          for (AttentionEngine engine : engines) {
          const std::string name = fmt::format("attention_{}/{}/{}/d{}/{}/seq{}", op, kernels::to_string(engine),
                                               kernels::to_string(t), d, mask, seq);
          // "backend" names the program's side (seqpar vs scripts/bench_sdpa.py's sdpa-*), "attention_engine"
          // which of seqpar's engines ran.
          nlohmann::json fields = {{"backend", "seqpar"},  {"attention_engine", kernels::to_string(engine)},
                                   {"op", op},             {"dtype", kernels::to_string(t)},
                                   {"head_dim", d},        {"causal", s.causal},
                                   {"seq_len", seq},       {"batch", s.batch},
                                   {"heads", s.heads},     {"kv_heads", s.kv_heads}};
          if (!docs.empty())
          {
            fields["documents"] = opt.docs.to_json();
            fields["documents"].update({{"cu_seqlens", cu}, {"calls", docs.size()}});
          }
          kernels::CudnnAttention* eng = engine == AttentionEngine::cudnn ? cudnn.get() : nullptr;
          auto setup = [s, t, backward, fields, engine, eng, cudnn, docs, flops]() {
            auto first = std::make_shared<AttentionBuffers>(s, t, backward, 1, engine, eng, docs);
            auto sets = std::make_shared<std::vector<std::shared_ptr<AttentionBuffers>>>();
            sets->push_back(first);
            const int copies = rotation_copies(first->bytes());
            for (int c = 1; c < copies; ++c)
              sets->push_back(std::make_shared<AttentionBuffers>(s, t, backward, 1 + 10ull * c, engine, eng, docs));
            SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
            nlohmann::json f = fields;
            f["flops"] = flops;
            f["rotated_copies"] = copies;
            f["workspace_bytes"] = first->call_workspace_bytes;
            Recorder::Launch launch = [s, t, backward, sets, engine, eng, cudnn, docs](int rep) {
              const AttentionBuffers& b = *(*sets)[static_cast<std::size_t>(rep) % sets->size()];
              if (!docs.empty()) {  // one call per document, as a varlen kernel walks cu_seqlens
                for (const DocCall& c : docs) {
                  const void* q = offset_by(b.q.get(), c.q_off, t);
                  const void* k = offset_by(b.k.get(), c.k_off, t);
                  const void* v = offset_by(b.v.get(), c.k_off, t);
                  void* o = offset_by(b.o.get(), c.q_off, t);
                  float* lse = static_cast<float*>(b.lse.get()) + c.lse_off;
                  if (backward && engine == AttentionEngine::cudnn)
                    eng->backward(c.s, t, q, k, v, o, lse, offset_by(b.dout.get(), c.q_off, t), offset_by(b.dq.get(), c.q_off, t),
                                  offset_by(b.dk.get(), c.k_off, t), offset_by(b.dv.get(), c.k_off, t), b.ws.get());
                  else if (backward)
                    kernels::flash_attention_backward(c.s, t, q, k, v, o, lse, offset_by(b.dout.get(), c.q_off, t),
                                                      offset_by(b.dq.get(), c.q_off, t), offset_by(b.dk.get(), c.k_off, t),
                                                      offset_by(b.dv.get(), c.k_off, t), b.ws.get());
                  else
                    run_forward(engine, eng, c.s, t, q, k, v, o, lse, b.ws.get());
                }
                return;
              }
              if (backward && engine == AttentionEngine::cudnn)
                eng->backward(s, t, b.q.get(), b.k.get(), b.v.get(), b.o.get(), static_cast<const float*>(b.lse.get()),
                              b.dout.get(), b.dq.get(), b.dk.get(), b.dv.get(), b.ws.get());
              else if (backward)
                kernels::flash_attention_backward(s, t, b.q.get(), b.k.get(), b.v.get(), b.o.get(),
                                                  static_cast<const float*>(b.lse.get()), b.dout.get(), b.dq.get(),
                                                  b.dk.get(), b.dv.get(), b.ws.get());
              else
                run_forward(engine, eng, s, t, b.q.get(), b.k.get(), b.v.get(), b.o.get(),
                            static_cast<float*>(b.lse.get()), b.ws.get());
            };
            return Recorder::Prepared{launch, f};
          };
          rec.add(name, setup, [flops](double median_s) { return nlohmann::json{{"tflops", flops / median_s / 1e12}}; },
                  opt.timing);
          }
  }
}

int run(int argc, char** argv) {
  const SplitArgs args = split_benchmark_args(argc, argv);
  Options opt;
  CLI::App app{
      "seqpar-bench-attention: flash attention forward/backward TFLOP/s on one GPU (CUDA-event timing, "
      "Google Benchmark driver). Google Benchmark's own --benchmark_* flags (e.g. --benchmark_filter=REGEX) "
      "are passed through.",
      "seqpar-bench-attention"};
  app.add_option("--seq-lens", opt.seq_lens, "Comma-separated sequence lengths (K = 1024)")->capture_default_str();
  app.add_option("--head-dims", opt.head_dims, "Comma-separated head dims (64, 128)")->capture_default_str();
  CLI::Option* masks = app.add_option("--masks", opt.masks, "Comma-separated masks: full, causal")->capture_default_str();
  add_workload_flags(&app, opt.docs, false,
                     "batch entry b takes sampled sequence b mod --doc-batches, one causal call per document; replaces "
                     "--masks");
  app.add_option("--ops", opt.ops, "Comma-separated: fwd, bwd")->capture_default_str();
  app.add_option("--dtype", opt.dtype, "bf16 or fp16")->capture_default_str();
  app.add_option("--attention", opt.attention,
                 "Attention engine: seqpar, cudnn, or both (side by side on the same shapes); default cudnn where "
                 "available, else seqpar");
  app.add_option("--batch", opt.batch, "Batch size")->capture_default_str();
  app.add_option("--heads", opt.heads, "Query heads")->capture_default_str();
  app.add_option("--kv-heads", opt.kv_heads, "KV heads (0 = same as --heads)")->capture_default_str();
  add_harness_options(app, opt.timing, opt.json_path);
  std::vector<Point> points;
  try {
    if (int rc = parse_harness_args(app, args, opt.timing); rc >= 0) return rc;
    opt.masks_given = masks->count() > 0;
    (void)opt.docs.workload();  // checked early, its flags refused without --documents
    bool both = false;
    requested_engine(opt.attention, &both);
    points = points_of(opt);
  } catch (const Error& e) {
    // Input that can never be valid: exit 2 (harness_main's 1 is for a run that failed on the device).
    std::cerr << "seqpar-bench-attention: " << e.what() << '\n';
    return 2;
  }
  if (!device_or_explain("seqpar-bench-attention")) return 2;
  const std::vector<AttentionEngine> engines = engines_to_run(opt.attention);
  std::string engine_names;
  for (AttentionEngine e : engines) engine_names += (engine_names.empty() ? "" : ",") + std::string(kernels::to_string(e));
  std::printf("# seqpar-bench-attention: attention engine %s (cuDNN: %s)\n", engine_names.c_str(),
              kernels::cudnn_attention_version().c_str());
  std::fflush(stdout);
  Recorder rec(gpu_timers());
  register_all(opt, points, engines, rec);
  run_registered_benchmarks(args.gbench, argv[0]);
  if (engines.size() > 1) std::printf("\n%s", attention_engine_table(rec.results()).c_str());
  if (!opt.json_path.empty()) {
    const nlohmann::json config = {{"seq_lens", opt.seq_lens}, {"head_dims", opt.head_dims}, {"masks", opt.masks},
                                   {"ops", opt.ops},           {"dtype", opt.dtype},         {"batch", opt.batch},
                                   {"attention", engine_names},
                                   {"heads", opt.heads},       {"kv_heads", opt.kv_heads == 0 ? opt.heads : opt.kv_heads},
                                   {"warmup", opt.timing.warmup}, {"iterations", opt.timing.iterations},
                                   {"flop_convention", "fwd 4*b*s^2*heads*d, /2 causal; bwd 2.5x fwd; --documents: "
                                                       "the sum over the documents' causal calls"},
                                   {"documents", opt.docs.documents}};
    write_measurement(opt.json_path, argc, argv, "seqpar-bench-attention", Mode::real_ranks, config,
                      rec.results());
  }
  return 0;
}

}  // namespace
}  // namespace seqpar::bench

int main(int argc, char** argv) { return seqpar::bench::harness_main("seqpar-bench-attention", argc, argv, seqpar::bench::run); }
