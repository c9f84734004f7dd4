// seqpar-sim-digest: every output of simulate() over fixed varied plans, written once and compared
// after a change to the simulator's code that must not change its numbers (a speed-up):
//   seqpar-sim-digest --write before.txt      (on the old code)
//   seqpar-sim-digest --compare before.txt    (on the new: exit 1 on any difference)
// The plans are seqpar-bench-sim's 100,000 and as many again over every method, TP degree, hybrid
// placement, micro-batch, accumulation and framework profile (sim_cases.hpp). Each plan's line holds
// every field of its Result (times, figures, memory parts and phases, fits, errors) and the named
// terms of its peak; numbers must agree to --rel (1e-9) relative, everything else exactly.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "sim_cases.hpp"

namespace {

using namespace seqpar::sim;
using namespace seqpar::sim::bench;

// One plan's outputs as "name=value" tokens, numbers in round-trip precision.
std::vector<std::string> fields(const Case& c) {
  const Result r = simulate(*c.model, *c.system, c.plan);
  std::vector<std::string> out;
  auto num = [&](const char* name, double v) { out.push_back(fmt::format("{}={}", name, v)); };
  auto text = [&](const char* name, std::string_view v) {
    std::string s(v);
    for (char& ch : s)
      if (ch == ' ' || ch == '\n') ch = '_';
    out.push_back(fmt::format("{}={}", name, s));
  };
  text("plan", describe(r.plan) + "/" + std::to_string(r.plan.gpus) + "/" + std::to_string(r.plan.seq_len));
  num("valid", r.valid);
  for (const std::string& e : r.errors) text("error", e);
  if (!r.valid) return out;
  num("fits", r.fits);
  num("gpu_fits", r.gpu_fits);
  num("host_fits", r.host_fits);
  num("step_time_s", r.step_time_s);
  num("tokens_per_s_per_gpu", r.tokens_per_s_per_gpu);
  num("tflops_per_gpu", r.tflops_per_gpu);
  num("mfu", r.mfu);
  num("model_flops_per_gpu", r.model_flops_per_gpu);
  num("capacity_bytes", r.capacity_bytes);
  num("host_node_bytes", r.host_node_bytes);
  num("host_capacity_bytes", r.host_capacity_bytes);
  const TimeBreakdown& t = r.time;
  for (const auto& [n, v] : {std::pair{"forward", t.forward}, {"backward", t.backward}, {"compute", t.compute},
                             {"gemm", t.gemm}, {"attention_compute", t.attention_compute},
                             {"elementwise", t.elementwise}, {"recompute", t.recompute}, {"attention", t.attention},
                             {"attention_comm", t.attention_comm}, {"exposed_attention_comm", t.exposed_attention_comm},
                             {"dp_comm", t.dp_comm}, {"exposed_dp_comm", t.exposed_dp_comm}, {"tp_comm", t.tp_comm},
                             {"comm", t.comm}, {"exposed_comm", t.exposed_comm}, {"optimizer", t.optimizer},
                             {"offload", t.offload}, {"exposed_offload", t.exposed_offload},
                             {"first_step", t.first_step}})
    num(n, v);
  const MemoryEstimate& e = r.memory;
  const MemoryBreakdown& b = e.peak;
  for (const auto& [n, v] :
       {std::pair{"parameters", b.parameters}, {"gradients", b.gradients}, {"optimizer_states", b.optimizer_states},
        {"activations", b.activations}, {"checkpoints", b.checkpoints}, {"attention_buffers", b.attention_buffers},
        {"working", b.working}, {"logits", b.logits}, {"reserved", b.reserved},
        {"layer_phase", e.layer_phase_bytes}, {"loss_phase", e.loss_phase_bytes},
        {"optimizer_phase", e.optimizer_phase_bytes}, {"host", e.host_bytes},
        {"device_checkpoint", e.device_checkpoint_bytes}, {"loss_logits", e.loss_logits_bytes},
        {"device_reserve", e.device_reserve_bytes}, {"fragmentation", e.fragmentation_bytes}})
    num(n, v);
  text("peak_phase", e.peak_phase);
  text("peak_subphase", e.peak_subphase);
  const StepFigures& f = r.figures;
  const AttentionCost& a = f.attention;
  num("fig.layers", f.layers);
  num("fig.micro_steps", f.micro_steps);
  num("fig.full_recompute", f.full_recompute);
  num("fig.dp_bwd_every_micro_step", f.dp_bwd_every_micro_step);
  num("fig.ring_steps", a.ring_steps);
  for (const auto& [n, v] :
       {std::pair{"fig.gemm_fwd", f.gemm_fwd_s}, {"fig.gemm_bwd", f.gemm_bwd_s},
        {"fig.elementwise_fwd", f.elementwise_fwd_s}, {"fig.elementwise_bwd", f.elementwise_bwd_s},
        {"fig.layer_recompute", f.layer_recompute_s}, {"fig.tp_layer_fwd", f.tp_layer_fwd_s},
        {"fig.tp_layer_bwd", f.tp_layer_bwd_s}, {"fig.tp_head_fwd", f.tp_head_fwd_s},
        {"fig.tp_head_bwd", f.tp_head_bwd_s}, {"fig.head_fwd", f.head_fwd_s}, {"fig.head_bwd", f.head_bwd_s},
        {"fig.loss_recompute", f.loss_recompute_s}, {"fig.dp_fwd", f.dp_fwd_s}, {"fig.dp_bwd", f.dp_bwd_s},
        {"fig.dp_after", f.dp_after_s}, {"fig.dp_fwd_exposed", f.dp_fwd_exposed_s},
        {"fig.dp_bwd_exposed", f.dp_bwd_exposed_s}, {"fig.offload_one_way", f.offload_one_way_s},
        {"fig.offload_fwd_exposed", f.offload_fwd_exposed_s}, {"fig.offload_bwd_exposed", f.offload_bwd_exposed_s},
        {"fig.params_fetch", f.params_fetch_s}, {"fig.params_fwd_exposed", f.params_fwd_exposed_s},
        {"fig.params_bwd_exposed", f.params_bwd_exposed_s}, {"fig.optimizer", f.optimizer_s},
        {"fig.unattributed", f.unattributed_s}, {"att.fwd_kernel", a.fwd_kernel_s}, {"att.bwd_kernel", a.bwd_kernel_s},
        {"att.fwd", a.fwd_s}, {"att.bwd", a.bwd_s}, {"att.fwd_comm", a.fwd_comm_s}, {"att.bwd_comm", a.bwd_comm_s},
        {"att.model_flops_fwd", a.model_flops_fwd}, {"att.a2a_qkv", a.a2a_qkv_s}, {"att.a2a_o", a.a2a_o_s},
        {"att.kv_gather", a.kv_gather_s}, {"att.dkv_scatter", a.dkv_scatter_s}, {"att.hop", a.hop_s},
        {"att.step0_fwd", a.step0_fwd_s}, {"att.step_fwd", a.step_fwd_s}, {"att.step0_bwd", a.step0_bwd_s},
        {"att.step_bwd", a.step_bwd_s}})
    num(n, v);
  for (const MemoryTerm& term : memory_terms(*c.model, *c.system, r)) {
    text("term", term.name);
    text("term.part", to_string(term.part));
    num("term.bytes", term.bytes);
  }
  return out;
}

std::string line_of(const Case& c) {
  std::string s;
  for (const std::string& f : fields(c)) s += (s.empty() ? "" : " ") + f;
  return s;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// Same name and value: numbers within `rel` relative (or both zero), anything else equal.
bool same(const std::string& a, const std::string& b, double rel) {
  if (a == b) return true;
  const auto ea = a.find('='), eb = b.find('=');
  if (ea == std::string::npos || a.compare(0, ea, b, 0, eb) != 0) return false;
  try {
    std::size_t ia = 0, ib = 0;
    const double x = std::stod(a.substr(ea + 1), &ia), y = std::stod(b.substr(eb + 1), &ib);
    if (ia != a.size() - ea - 1 || ib != b.size() - eb - 1) return false;
    return std::abs(x - y) <= rel * std::max(std::abs(x), std::abs(y));
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Every output of simulate() over fixed varied plans: write it, or compare with a file written before"};
  std::string write, compare;
  double rel = 1e-9;
  std::size_t n = 100000;
  app.add_option("--write", write, "write the outputs to this file");
  app.add_option("--compare", compare, "compare the outputs with this file (exit 1 on a difference)");
  app.add_option("--rel", rel, "relative tolerance for numbers")->check(CLI::Range(0.0, 1.0));
  app.add_option("--cases", n, "plans of each kind (the benchmark's and the wide ones)")->check(CLI::Range(1, 1000000));
  auto* mode = app.add_option_group("mode");
  mode->add_options(app.get_option("--write"), app.get_option("--compare"));
  mode->require_option(1);
  CLI11_PARSE(app, argc, argv);

  std::vector<Model> models;
  std::vector<System> systems;
  load_presets(models, systems);
  const std::vector<System> framed = systems_with_frameworks();
  std::vector<Case> cases = make_cases(n, models, systems);
  for (const Case& c : make_wide_cases(n, models, framed)) cases.push_back(c);

  if (!write.empty()) {
    std::ofstream out(write);
    for (const Case& c : cases) out << line_of(c) << '\n';
    if (!out) {
      std::cerr << "seqpar-sim-digest: cannot write " << write << "\n";
      return 2;
    }
    std::cout << cases.size() << " plans written to " << write << "\n";
    return 0;
  }
  std::ifstream in(compare);
  if (!in) {
    std::cerr << "seqpar-sim-digest: cannot read " << compare << "\n";
    return 2;
  }
  std::size_t differ = 0, fields_compared = 0, valid = 0;
  std::string line;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!std::getline(in, line)) {
      std::cerr << "seqpar-sim-digest: " << compare << " ends after " << i << " plans of " << cases.size() << "\n";
      return 1;
    }
    const std::vector<std::string> was = split(line), now = fields(cases[i]);
    fields_compared += now.size();
    valid += now.size() > 1 && now[1] == "valid=1";
    bool ok = was.size() == now.size();
    for (std::size_t k = 0; ok && k < now.size(); ++k) ok = same(was[k], now[k], rel);
    if (!ok && ++differ <= 10) {
      std::cerr << "plan " << i << " differs:\n";
      for (std::size_t k = 0; k < std::max(was.size(), now.size()); ++k) {
        const std::string a = k < was.size() ? was[k] : "-", b = k < now.size() ? now[k] : "-";
        if (!same(a, b, rel)) std::cerr << "  was " << a << "\n  now " << b << "\n";
      }
    }
  }
  std::cout << fmt::format("{} plans ({} valid), {} fields compared to {:g} relative: {} differ\n", cases.size(), valid,
                           fields_compared, rel, differ);
  return differ == 0 ? 0 : 1;
}
