// seqpar-bench-gemm: cuBLAS bf16 GEMM throughput on one GPU (fp32 accumulation), the GEMM ceiling and the
// GEMM efficiency that `seqpar calibrate` fits against the token count. Two shape sets: square sizes, and the
// linear layers of a model preset (forward, input gradient, weight gradient) for a list of token counts.
// --dtype fp8 times cuBLASLt's FP8 GEMM beside it (E4M3 operands quantized on the GPU with per-tensor or
// row-wise scales, bf16 D), each shape checked once against the CPU reference before it is timed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "seqpar/bench/device_memory.hpp"
#include "seqpar/comm/environment.hpp"
#include "seqpar/bench/gbench_harness.hpp"
#include "seqpar/bench/gemm_precision.hpp"
#include "seqpar/bench/gemm_shapes.hpp"
#include "seqpar/bench/gpu_timer.hpp"
#include "seqpar/core/bf16.hpp"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/kernels/cublas_gemm.hpp"
#include "seqpar/kernels/cublaslt_gemm.hpp"
#include "seqpar/kernels/fill.cuh"
#include "seqpar/kernels/fp8_cast.cuh"
#include "seqpar/kernels/fp8_gemm_ref.hpp"
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
  std::string dtype = "bf16";  // bf16, fp8 or both
  std::string fp8_scaling = "tensor,row";
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

// FP8 operands in the TN layout: A [m,k] and B [n,k] E4M3, quantized on the GPU from bf16 uniform values
// with current scaling (amax, scale, cast: kernels/fp8_cast.cuh), their dequantize scales, and D bf16.
struct Fp8GemmBuffers {
  DeviceMemory a, b, d, a_scale_inv, b_scale_inv;
  Fp8GemmBuffers(const GemmShape& s, Fp8Scaling scaling, std::uint64_t seed) {
    const auto mk = static_cast<std::size_t>(s.m * s.k), nk = static_cast<std::size_t>(s.n * s.k),
               mn = static_cast<std::size_t>(s.m * s.n);
    a = DeviceMemory(mk);
    b = DeviceMemory(nk);
    d = DeviceMemory(mn * 2);
    a_scale_inv = quantize(s.m, s.k, scaling, seed, a);
    b_scale_inv = quantize(s.n, s.k, scaling, seed + 1, b);
  }
  std::size_t bytes() const { return a.bytes() + b.bytes() + d.bytes(); }

 private:
  static DeviceMemory quantize(std::int64_t rows, std::int64_t cols, Fp8Scaling scaling, std::uint64_t seed,
                               const DeviceMemory& out) {
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto groups = static_cast<std::size_t>(kernels::fp8_groups(rows, scaling));
    DeviceMemory staging(n * 2), amax(groups * 4), scale(groups * 4), scale_inv(groups * 4);
    kernels::fill_uniform(kernels::DType::bf16, staging.get(), n, seed);
    kernels::fp8_quantize_current(kernels::DType::bf16, staging.get(), rows, cols, scaling, Fp8Format::e4m3, 0,
                                  static_cast<std::uint8_t*>(out.get()), static_cast<float*>(amax.get()),
                                  static_cast<float*>(scale.get()), static_cast<float*>(scale_inv.get()));
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());  // the staging buffers are freed on return
    return scale_inv;
  }
};

// One FP8 GEMM on `b`, then sampled elements of D against the CPU reference (kernels/fp8_gemm_ref.hpp):
// the corners and random elements, from the FP8 codes and scales the GPU used. Throws seqpar::Error
// naming the worst element when the result is wrong, so a row never carries the time of a wrong GEMM.
nlohmann::json check_fp8_gemm(kernels::CublasLtGemm& lt, const GemmShape& s, Fp8Scaling scaling,
                              const Fp8GemmBuffers& b) {
  SEQPAR_CUDA_CHECK(cudaMemset(b.d.get(), 0xFF, b.d.bytes()));  // bf16 NaN: an unwritten element shows
  lt.matmul_fp8(s, scaling, b.a.get(), static_cast<const float*>(b.a_scale_inv.get()), b.b.get(),
                static_cast<const float*>(b.b_scale_inv.get()), b.d.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  const auto k = static_cast<std::size_t>(s.k);
  const auto copy = [](void* dst, const void* src, std::size_t offset, std::size_t bytes) {
    SEQPAR_CUDA_CHECK(cudaMemcpy(dst, static_cast<const char*>(src) + offset, bytes, cudaMemcpyDeviceToHost));
  };
  std::vector<kernels::Fp8GemmSample> samples;
  std::vector<std::uint8_t> a_row(k), b_row(k);
  for (auto [i, j] : kernels::fp8_gemm_sample_indices(s.m, s.n, 32, static_cast<std::uint64_t>(s.m * 131 + s.n))) {
    const std::size_t gi = scaling == Fp8Scaling::row ? static_cast<std::size_t>(i) : 0,
                      gj = scaling == Fp8Scaling::row ? static_cast<std::size_t>(j) : 0;
    float sa = 0, sb = 0;
    std::uint16_t d_bits = 0;
    copy(a_row.data(), b.a.get(), static_cast<std::size_t>(i) * k, k);
    copy(b_row.data(), b.b.get(), static_cast<std::size_t>(j) * k, k);
    copy(&sa, b.a_scale_inv.get(), gi * 4, 4);
    copy(&sb, b.b_scale_inv.get(), gj * 4, 4);
    copy(&d_bits, b.d.get(), (static_cast<std::size_t>(i) * static_cast<std::size_t>(s.n) + static_cast<std::size_t>(j)) * 2, 2);
    samples.push_back({i, j, bf16_to_float(d_bits), kernels::fp8_gemm_expected(a_row.data(), sa, b_row.data(), sb, s.k)});
  }
  const kernels::Fp8GemmCheck c = kernels::fp8_gemm_check(samples);
  if (!c.passed())
    throw Error(fmt::format("FP8 GEMM {} (m={} n={} k={}, {} scales) is wrong: D[{},{}] = {} where the CPU reference "
                            "gives {} +- {} ({} samples)",
                            s.op, s.m, s.n, s.k, to_string(scaling), c.worst.i, c.worst.j, c.worst.got,
                            c.worst.expected.value, c.worst.expected.tolerance, c.samples));
  return {{"samples", c.samples}, {"worst_error_over_tolerance", c.worst_ratio}};
}

void register_fp8(const std::vector<GemmShape>& shapes, Fp8Scaling scaling,
                  const std::shared_ptr<kernels::CublasLtGemm>& lt, const TimingOptions& timing, Recorder& rec) {
  const GemmPrecision precision{true, scaling};
  for (const GemmShape& layer : shapes) {
    const GemmShape s = fp8_layout(layer);
    const nlohmann::json fields = gemm_row_fields(layer, precision, "cublasLt");
    auto setup = [s, scaling, lt, fields]() {
      auto sets = std::make_shared<std::vector<std::unique_ptr<Fp8GemmBuffers>>>();
      sets->push_back(std::make_unique<Fp8GemmBuffers>(s, scaling, 1));
      nlohmann::json f = fields;
      f["check"] = check_fp8_gemm(*lt, s, scaling, *sets->front());
      const int copies = rotation_copies(sets->front()->bytes());
      for (int c = 1; c < copies; ++c) sets->push_back(std::make_unique<Fp8GemmBuffers>(s, scaling, 1 + 10ull * c));
      SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
      f["rotated_copies"] = copies;
      Recorder::Launch launch = [s, scaling, lt, sets](int rep) {
        const Fp8GemmBuffers& b = *(*sets)[static_cast<std::size_t>(rep) % sets->size()];
        lt->matmul_fp8(s, scaling, b.a.get(), static_cast<const float*>(b.a_scale_inv.get()), b.b.get(),
                       static_cast<const float*>(b.b_scale_inv.get()), b.d.get());
      };
      return Recorder::Prepared{launch, f};
    };
    const double flops = s.flops();
    rec.add(gemm_name(layer, precision.label()), setup,
            [flops](double median_s) { return nlohmann::json{{"tflops", flops / median_s / 1e12}}; }, timing);
  }
}

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
    const nlohmann::json fields = gemm_row_fields(s, GemmPrecision{}, handle->library());
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
      "seqpar-bench-gemm: cuBLAS bf16 (and with --dtype fp8, cuBLASLt E4M3) GEMM TFLOP/s on one GPU (fp32 "
      "accumulation, CUDA-event timing, Google Benchmark driver): square sizes for the ceiling, and a model's layer "
      "GEMMs (fwd, dx, dw) per token count. "
      "Google Benchmark's own --benchmark_* flags (e.g. --benchmark_filter=REGEX) are passed through.",
      "seqpar-bench-gemm"};
  app.add_option("--shapes", opt.shapes, "Comma-separated shape sets: square, layer")->capture_default_str();
  app.add_option("--sizes", opt.sizes, "Comma-separated square sizes m=n=k (K = 1024)")->capture_default_str();
  app.add_option("--model", opt.model, "Model preset name or JSON path for the layer GEMMs")->capture_default_str();
  app.add_option("--tokens", opt.tokens, "Comma-separated token counts of the layer GEMMs: m of fwd and dx, k of dw (K = 1024)")
      ->capture_default_str();
  app.add_option("--passes", opt.passes, "Comma-separated layer GEMM passes: fwd, dx, dw")->capture_default_str();
  app.add_option("--dtype", opt.dtype,
                 "Comma-separated operand types: bf16; fp8 (E4M3 A and B, bf16 output, fp32 accumulation, cuBLASLt, "
                 "every GEMM in the TN layout)")
      ->capture_default_str();
  app.add_option("--fp8-scaling", opt.fp8_scaling,
                 "Comma-separated FP8 scalings: tensor (one scale per operand), row (one per row of A and of B)")
      ->capture_default_str();
  app.add_option("--library", opt.library,
                 "lt: cuBLASLt (what seqpar-train's GEMMs run on); gemmex: cublasGemmEx (its SEQPAR_GEMM=gemmex)")
      ->capture_default_str();
  add_harness_options(app, opt.timing, opt.json_path);
  if (int rc = parse_harness_args(app, args, opt.timing); rc >= 0) return rc;
  // Shapes are checked before the device so bad input is reported the same with or without a GPU.
  const std::vector<GemmShape> shapes = selected_shapes(opt);
  if (opt.library != "lt" && opt.library != "gemmex")
    throw Error(fmt::format("--library '{}': must be lt (cuBLASLt) or gemmex (cublasGemmEx)", opt.library));
  const std::vector<GemmPrecision> precisions = parse_gemm_precisions(opt.dtype, opt.fp8_scaling, opt.library);
  if (!device_or_explain("seqpar-bench-gemm")) return 2;
  auto handle = std::make_shared<Gemms>();
  if (opt.library == "lt")
    handle->lt = std::make_shared<kernels::CublasLtGemm>();
  else
    handle->gemmex = std::make_shared<CublasHandle>();
  Recorder rec(gpu_timers());
  for (const GemmPrecision& p : precisions) {
    if (p.fp8)
      register_fp8(shapes, p.scaling, handle->lt, opt.timing, rec);
    else
      register_all(shapes, handle, opt.timing, rec);
  }
  run_registered_benchmarks(args.gbench, argv[0]);
  if (!opt.json_path.empty()) {
    const nlohmann::json config = {{"shapes", opt.shapes},
                                   {"sizes", opt.sizes},
                                   {"model", opt.model},
                                   {"tokens", opt.tokens},
                                   {"passes", opt.passes},
                                   {"dtype", opt.dtype},
                                   {"fp8_scaling", opt.fp8_scaling},
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
