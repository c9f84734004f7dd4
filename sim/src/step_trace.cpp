#include "seqpar/sim/step_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "seqpar/core/error.hpp"

namespace seqpar::sim {

namespace {

using trace::Stream;

// Lays slices out along the compute stream's clock: `now` is when compute may start its next
// kernel. Zero-length phases (no Ulysses, no tiled loss) get no slice.
class Layout {
 public:
  Layout(trace::Trace& t, int pid) : t_(t), pid_(pid) {}
  double now = 0;

  void kernel(const std::string& name, const char* category, double dur, nlohmann::json args = nlohmann::json::object()) {
    if (dur > 0) t_.add(pid_, Stream::compute, name, category, now, dur, std::move(args));
    now += dur;
  }
  // A transfer on `s` from `start`, of which `exposed` stalls compute.
  void transfer(Stream s, const std::string& name, double start, double dur, double exposed) {
    if (dur > 0) t_.add(pid_, s, name, "comm", start, dur, {{"exposed_s", exposed}});
  }
  // A transfer compute waits for in full (a Ulysses all-to-all, the ring's last dK,dV hop).
  void blocking(Stream s, const std::string& name, double dur) {
    transfer(s, name, now, dur, dur);
    now += dur;
  }

  // One layer's attention: all-to-all in, the ring steps (hop k beside kernel k), all-to-all out.
  // Backward: dO in first, K,V travel with the partial dK,dV (two blocks per hop) and the last
  // dK,dV makes one more hop home, exposed; the q,k,v gradients go back last. All-gather KV: the
  // K,V all-gather before the kernels and, backward, the dK,dV reduce-scatter after them, exposed.
  double attention(const AttentionCost& a, const std::string& pre, bool backward) {
    const double start = now;
    blocking(Stream::ulysses_a2a, pre + (backward ? "all-to-all dO" : "all-to-all q,k,v"),
             backward ? a.a2a_o_s : a.a2a_qkv_s);
    blocking(Stream::ring, pre + "K,V all-gather", a.kv_gather_s);  // all-gather KV only
    const double hop = (backward ? 2 : 1) * a.hop_s;
    for (int k = 0; k < a.ring_steps; ++k) {
      const double kern = k == 0 ? (backward ? a.step0_bwd_s : a.step0_fwd_s) : (backward ? a.step_bwd_s : a.step_fwd_s);
      const bool sends = k + 1 < a.ring_steps;
      const double step_start = now;
      kernel(a.ring_steps > 1 ? fmt::format("{}attention ring step {}", pre, k) : pre + "attention", "attention", kern,
             {{"ring_step", k}});
      if (sends) {
        transfer(Stream::ring, fmt::format("{}{} hop {}", pre, backward ? "K,V + dK,dV" : "K,V", k), step_start, hop,
                 std::max(0.0, hop - kern));
        now = step_start + std::max(kern, hop);
      }
    }
    if (backward && a.ring_steps > 1) blocking(Stream::ring, pre + "dK,dV hop home", a.hop_s);
    if (backward) blocking(Stream::ring, pre + "dK,dV reduce-scatter", a.dkv_scatter_s);
    blocking(Stream::ulysses_a2a, pre + (backward ? "all-to-all dq,dk,dv" : "all-to-all output"),
             backward ? a.a2a_qkv_s : a.a2a_o_s);
    // A hybrid model's linear-attention layers, their share of the mean layer in one block.
    kernel(pre + "linear-attention layers (their share)", "attention", backward ? a.linear_bwd_s : a.linear_fwd_s);
    return now - start;
  }

  // A stream's traffic that hides under the pass [pass_start, now) and stalls compute by `exposed`
  // at its end: the slice ends when the stall does.
  void hidden_under_pass(Stream s, const std::string& name, double dur, double exposed) {
    if (dur <= 0) return;
    transfer(s, name, std::max(0.0, now + exposed - dur), dur, exposed);
    now += exposed;
  }

 private:
  trace::Trace& t_;
  int pid_;
};

void check_attention_layout(double laid_out, double simulated, const char* pass) {
  if (std::abs(laid_out - simulated) > 1e-9 * std::max(1e-12, simulated))
    throw Error(fmt::format("step trace: the {} attention laid out takes {} s, the simulator's figure is {} s; "
                            "sim/src/step_trace.cpp no longer follows sim/src/attention_cost.cpp",
                            pass, laid_out, simulated));
}

}  // namespace

trace::Trace step_trace(const Result& r, int pid, std::string_view process_name) {
  if (!r.valid) throw Error("--trace: the plan is invalid, so there is no step to draw");
  const StepFigures& f = r.figures;
  // Every micro-step is drawn slice by slice; past this many the timeline would run to millions of
  // slices that repeat the first micro-step.
  constexpr int kMaxMicroSteps = 64;
  if (f.micro_steps > kMaxMicroSteps)
    throw Error(fmt::format("--trace: grad_accum_steps {} is above the {} micro-steps a timeline draws; every "
                            "micro-step is the same, so trace the plan with --grad-accum-steps 1",
                            f.micro_steps, kMaxMicroSteps));
  trace::Trace t;
  t.add_process(pid, process_name);
  for (Stream s : trace::kAllStreams) t.add_stream(pid, s);
  if (f.ep_layer_fwd_s > 0 || f.ep_layer_bwd_s > 0)
    for (Stream s : trace::kExpertStreams) t.add_stream(pid, s);
  Layout lay(t, pid);

  for (int micro = 0; micro < f.micro_steps; ++micro) {
    // Slices of a micro-step other than the first are named for it ("m1 L0 fwd ...").
    const std::string ms = micro == 0 ? "" : fmt::format("m{} ", micro);
    const bool last = micro + 1 == f.micro_steps;
    // ---- forward ----
    for (int l = 0; l < f.layers; ++l) {
      const std::string pre = ms + fmt::format("L{} fwd ", l);
      check_attention_layout(lay.attention(f.attention, pre, false), f.attention.fwd_s, "forward");
      lay.blocking(Stream::tensor_parallel, pre + "TP all-gathers and reduce-scatters", f.tp_layer_fwd_s);
      lay.kernel(pre + "gemm (q,k,v,o,mlp)", "gemm", f.gemm_fwd_s, {{"layer", l}});
      lay.blocking(Stream::expert_a2a, pre + "expert dispatch and combine", f.ep_layer_fwd_s);
      lay.kernel(pre + "elementwise", "elementwise", f.elementwise_fwd_s, {{"layer", l}});
    }
    lay.blocking(Stream::tensor_parallel, ms + "TP embedding and head collectives fwd", f.tp_head_fwd_s);
    lay.kernel(ms + "lm head fwd", "gemm", f.head_fwd_s);
    lay.hidden_under_pass(Stream::data_parallel, ms + "fwd parameter all-gather (ZeRO-3)", f.dp_fwd_s, f.dp_fwd_exposed_s);
    lay.hidden_under_pass(Stream::offload, ms + "checkpoints to host", f.offload_one_way_s, f.offload_fwd_exposed_s);
    lay.hidden_under_pass(Stream::offload, ms + "parameters from host (fwd)", f.params_fetch_s, f.params_fwd_exposed_s);

    // ---- backward ----
    lay.kernel(ms + "lm head bwd", "gemm", f.head_bwd_s);
    lay.blocking(Stream::tensor_parallel, ms + "TP embedding and head collectives bwd", f.tp_head_bwd_s);
    lay.kernel(ms + "loss recompute (tiled)", "recompute", f.loss_recompute_s);
    for (int l = f.layers - 1; l >= 0; --l) {
      if (f.full_recompute) {
        const std::string pre = ms + fmt::format("L{} recompute ", l);
        check_attention_layout(lay.attention(f.attention, pre, false), f.attention.fwd_s, "recomputed");
        lay.blocking(Stream::tensor_parallel, pre + "TP all-gathers and reduce-scatters", f.tp_layer_fwd_s);
        lay.kernel(pre + "gemm (q,k,v,o,mlp)", "recompute", f.gemm_fwd_s, {{"layer", l}});
        lay.blocking(Stream::expert_a2a, pre + "expert dispatch and combine", f.ep_layer_fwd_s);
        lay.kernel(pre + "elementwise", "recompute", f.elementwise_fwd_s, {{"layer", l}});
      }
      const std::string pre = ms + fmt::format("L{} bwd ", l);
      lay.kernel(pre + "recompute", "recompute", f.layer_recompute_s, {{"layer", l}});
      lay.kernel(pre + "gemm (mlp,o,q,k,v)", "gemm", f.gemm_bwd_s, {{"layer", l}});
      lay.blocking(Stream::expert_a2a, pre + "expert combine and dispatch gradients", f.ep_layer_bwd_s);
      lay.blocking(Stream::tensor_parallel, pre + "TP reduce-scatters and all-gathers", f.tp_layer_bwd_s);
      check_attention_layout(lay.attention(f.attention, pre, true), f.attention.bwd_s, "backward");
      lay.kernel(pre + "elementwise", "elementwise", f.elementwise_bwd_s, {{"layer", l}});
    }
    if (last || f.dp_bwd_every_micro_step)
      lay.hidden_under_pass(Stream::data_parallel, ms + "bwd gradient reduction", f.dp_bwd_s, f.dp_bwd_exposed_s);
    lay.hidden_under_pass(Stream::offload, ms + "checkpoints from host", f.offload_one_way_s, f.offload_bwd_exposed_s);
    lay.hidden_under_pass(Stream::offload, ms + "parameters from host (bwd)", f.params_fetch_s, f.params_bwd_exposed_s);
  }

  // ---- after the backward ----
  lay.kernel("optimizer", "optimizer", f.optimizer_s);
  lay.blocking(Stream::data_parallel, "parameter all-gather (ZeRO-1/2)", f.dp_after_s);
  lay.kernel("fixed step overhead", "overhead", f.unattributed_s);

  if (std::abs(lay.now - r.step_time_s) > 1e-9 * r.step_time_s)
    throw Error(fmt::format("step trace: the timeline ends at {} s but the predicted step takes {} s; "
                            "sim/src/step_trace.cpp no longer follows sim/src/simulate.cpp",
                            lay.now, r.step_time_s));
  return t;
}

}  // namespace seqpar::sim
