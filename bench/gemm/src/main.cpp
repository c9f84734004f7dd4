// seqpar-bench-gemm: cuBLAS bf16 GEMM throughput on one GPU (fp32 accumulation), the GEMM ceiling and the
// GEMM efficiency that `seqpar calibrate` fits against the token count. Two shape sets: square sizes, and the
// linear layers of a model preset (forward, input gradient, weight gradient) for a list of token counts.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "seqpar/bench/device_memory.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/bench/gbench_harness.hpp"
#include "seqpar/bench/gemm_shapes.hpp"
#include "seqpar/bench/gpu_timer.hpp"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/kernels/cublas_gemm.hpp"
#include "seqpar/kernels/cublaslt_gemm.hpp"
#include "seqpar/kernels/fill.cuh"
#include "seqpar/sim/presets.hpp"

namespace seqpar::bench {
namespace {

using kernels::CublasHandle;
using kernels::gemm_bf16;

struct Options {
  std::string shapes = "square,layer";
  std::string sizes = "1K,2K,4K,8K,16K";
  std::string model = "llama3-8b";
  std::string tokens = "256,512,1K,2K,4K,8K,16K,32K,64K";
  std::string passes = "fwd,dx,dw";
  std::string library = "lt";  // lt: cuBLASLt, what seqpar-train's GEMMs run on; gemmex: cublasGemmEx
  TimingOptions timing;
  std::string json_path;
};

// One set of operands; the benchmark rotates through several when they would fit in L2.
struct GemmBuffers {
  DeviceMemory a, b, c;
  GemmBuffers(const GemmShape& s, std::uint64_t seed) {
    const auto mk = static_cast<std::size_t>(s.m * s.k), kn = static_cast<std::size_t>(s.k * s.n),
               mn = static_cast<std::size_t>(s.m * s.n);
    a = DeviceMemory(mk * 2);
    b = DeviceMemory(kn * 2);
    c = DeviceMemory(mn * 2);
    kernels::fill_uniform(kernels::DType::bf16, a.get(), mk, seed);
    kernels::fill_uniform(kernels::DType::bf16, b.get(), kn, seed + 1);
  }
  std::size_t bytes() const { return a.bytes() + b.bytes() + c.bytes(); }
};

std::vector<GemmShape> selected_shapes(const Options& opt) {
  std::vector<GemmShape> shapes;
  for (const std::string& set : split_list(opt.shapes, "--shapes")) {
    if (set == "square") {
      for (const std::string& text : split_list(opt.sizes, "--sizes"))
        shapes.push_back(square_gemm(parse_count(text, "--sizes")));
    } else if (set == "layer") {
      const sim::Model model = sim::load_model(opt.model);
      const std::vector<std::string> passes = split_list(opt.passes, "--passes");
      for (const std::string& text : split_list(opt.tokens, "--tokens")) {
        const std::vector<GemmShape> layer = layer_gemms(model, parse_count(text, "--tokens"), passes);
        shapes.insert(shapes.end(), layer.begin(), layer.end());
      }
    } else {
      throw Error(fmt::format("--shapes: unknown shape set '{}' (square, layer)", set));
    }
  }
  return shapes;
}

// The GEMM path timed: cuBLASLt (the training step's default) or cublasGemmEx (SEQPAR_GEMM=gemmex there).
struct Gemms {
  std::shared_ptr<CublasHandle> gemmex;
  std::shared_ptr<kernels::CublasLtGemm> lt;
  void run(const GemmShape& s, const void* a, const void* b, void* c) const {
    if (lt)
      lt->matmul(s, 1.f, a, b, 0.f, nullptr, c, CUDA_R_16BF);
    else
      gemm_bf16(*gemmex, s, a, b, c);
  }
  const char* library() const { return lt ? "cublasLt" : "cublasGemmEx"; }
};

void register_all(const std::vector<GemmShape>& shapes, const std::shared_ptr<Gemms>& handle,
                  const TimingOptions& timing, Recorder& rec) {
  for (const GemmShape& s : shapes) {
    nlohmann::json fields = {{"op", "gemm"},          {"gemm", s.op},          {"m", s.m},
                             {"n", s.n},              {"k", s.k},              {"dtype", "bf16"},
                             {"accumulate", "fp32"},  {"trans_a", s.trans_a},  {"trans_b", s.trans_b},
                             {"backend", "cublas"},   {"library", handle->library()},
                             {"flops", s.flops()}};
    if (s.tokens > 0) fields["tokens"] = s.tokens;
    auto setup = [s, handle, fields]() {
      auto sets = std::make_shared<std::vector<std::unique_ptr<GemmBuffers>>>();
      sets->push_back(std::make_unique<GemmBuffers>(s, 1));
      const int copies = rotation_copies(sets->front()->bytes());
      for (int c = 1; c < copies; ++c) sets->push_back(std::make_unique<GemmBuffers>(s, 1 + 10ull * c));
      SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
      nlohmann::json f = fields;
      f["rotated_copies"] = copies;
      Recorder::Launch launch = [s, handle, sets](int rep) {
        const GemmBuffers& b = *(*sets)[static_cast<std::size_t>(rep) % sets->size()];
        handle->run(s, b.a.get(), b.b.get(), b.c.get());
      };
      return Recorder::Prepared{launch, f};
    };
    const double flops = s.flops();
    rec.add(gemm_name(s, "bf16"), setup,
            [flops](double median_s) { return nlohmann::json{{"tflops", flops / median_s / 1e12}}; }, timing);
  }
}

int run(int argc, char** argv) {
  const SplitArgs args = split_benchmark_args(argc, argv);
  Options opt;
  CLI::App app{
      "seqpar-bench-gemm: cuBLAS bf16 GEMM TFLOP/s on one GPU (fp32 accumulation, CUDA-event timing, Google "
      "Benchmark driver): square sizes for the ceiling, and a model's layer GEMMs (fwd, dx, dw) per token count. "
      "Google Benchmark's own --benchmark_* flags (e.g. --benchmark_filter=REGEX) are passed through.",
      "seqpar-bench-gemm"};
  app.add_option("--shapes", opt.shapes, "Comma-separated shape sets: square, layer")->capture_default_str();
  app.add_option("--sizes", opt.sizes, "Comma-separated square sizes m=n=k (K = 1024)")->capture_default_str();
  app.add_option("--model", opt.model, "Model preset name or JSON path for the layer GEMMs")->capture_default_str();
  app.add_option("--tokens", opt.tokens, "Comma-separated token counts of the layer GEMMs: m of fwd and dx, k of dw (K = 1024)")
      ->capture_default_str();
  app.add_option("--passes", opt.passes, "Comma-separated layer GEMM passes: fwd, dx, dw")->capture_default_str();
  app.add_option("--library", opt.library,
                 "lt: cuBLASLt (what seqpar-train's GEMMs run on); gemmex: cublasGemmEx (its SEQPAR_GEMM=gemmex)")
      ->capture_default_str();
  add_harness_options(app, opt.timing, opt.json_path);
  if (int rc = parse_harness_args(app, args, opt.timing); rc >= 0) return rc;
  // Shapes are checked before the device so bad input is reported the same with or without a GPU.
  const std::vector<GemmShape> shapes = selected_shapes(opt);
  if (opt.library != "lt" && opt.library != "gemmex")
    throw Error(fmt::format("--library '{}': must be lt (cuBLASLt) or gemmex (cublasGemmEx)", opt.library));
  if (!device_or_explain("seqpar-bench-gemm")) return 2;
  auto handle = std::make_shared<Gemms>();
  if (opt.library == "lt")
    handle->lt = std::make_shared<kernels::CublasLtGemm>();
  else
    handle->gemmex = std::make_shared<CublasHandle>();
  Recorder rec(gpu_timers());
  register_all(shapes, handle, opt.timing, rec);
  run_registered_benchmarks(args.gbench, argv[0]);
  if (!opt.json_path.empty()) {
    const nlohmann::json config = {{"shapes", opt.shapes},
                                   {"sizes", opt.sizes},
                                   {"model", opt.model},
                                   {"tokens", opt.tokens},
                                   {"passes", opt.passes},
                                   {"dtype", "bf16"},
                                   {"accumulate", "fp32"},
                                   {"library", handle->library()},
                                   {"reduced_precision_reduction", false},
                                   {"warmup", opt.timing.warmup},
                                   {"iterations", opt.timing.iterations},
                                   {"flop_convention", "2*m*n*k"}};
    write_measurement(opt.json_path, argc, argv, "seqpar-bench-gemm", Mode::real_ranks, config, rec.results());
  }
  return 0;
}

}  // namespace
}  // namespace seqpar::bench

int main(int argc, char** argv) { return seqpar::bench::harness_main("seqpar-bench-gemm", argc, argv, seqpar::bench::run); }
