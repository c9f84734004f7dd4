#include "fixtures.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "seqpar/sim/presets.hpp"

namespace seqpar::sim::testing {

std::string write_config(const std::string& suite, const std::string& folder, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / suite / folder;
  std::filesystem::create_directories(dir);
  const auto path = dir / "config.json";
  std::ofstream(path) << text;
  return path.string();
}

int sample_stride() {
  const char* v = std::getenv("SEQPAR_TEST_SAMPLE");
  if (!v || !*v) return 1;
  const int k = std::atoi(v);
  return k >= 1 ? k : 1;
}

Gpu round_gpu() {
  Gpu g;
  g.name = "round";
  g.memory_bytes = 80e9;
  g.bf16_flops = 100e12;
  g.hbm_bytes_per_s = 1e12;
  g.pcie_bytes_per_s = 10e9;
  g.gemm_efficiency = 0.5;
  g.gemm_half_tokens = 100;
  g.attention_fwd_efficiency = 0.5;
  g.attention_bwd_efficiency = 0.25;
  g.attention_half_tokens = 0;
  g.kernel_overhead_s = 0;
  g.reserved_bytes = 1e9;
  return g;
}

System round_system() {
  System s;
  s.name = "round-system";
  s.gpu = round_gpu();
  s.gpus_per_node = 4;
  // A ring collective's start (10 / 20 us) and what each of its steps adds (1 / 5 us).
  s.intra = {LinkKind::nvswitch, 100e9, 10e-6, 0, 0, 1e-6};
  s.inter = {LinkKind::nvswitch, 10e9, 20e-6, 0, 0, 5e-6};
  s.host_adam_params_per_s = 1e9;
  return s;
}

System round_pcie_system() {
  System s = round_system();
  s.name = "round-pcie";
  s.intra = {LinkKind::pcie, 20e9, 10e-6, 2, 5e9, 1e-6};
  return s;
}

Model tiny_model() {
  Model m;
  m.name = "tiny";
  m.layers = 2;
  m.hidden = 8;
  m.heads = 2;
  m.kv_heads = 2;
  m.head_dim = 4;
  m.ffn_hidden = 16;
  m.vocab = 32;
  return m;
}

Plan plan(Method m, int gpus, std::int64_t seq, int sp, int u, int r, int tp) {
  Plan p;
  p.method = m;
  p.gpus = gpus;
  p.tp = tp;
  p.seq_len = seq;
  p.sp = sp;
  p.ulysses_degree = u;
  p.ring_degree = r;
  return p;
}

Plan plan_all_sp(Method m, int sp, std::int64_t seq) {
  const int u = m == Method::ulysses ? sp : m == Method::hybrid ? 2 : 1;
  return plan(m, sp, seq, sp, u, sp / u);
}

System with_kernel(std::string_view name, std::string_view kernel) {
  System s = load_system(name);
  s.gpu.attention_kernel = std::string(kernel);
  return s;
}

}  // namespace seqpar::sim::testing
