// Helpers of the GPU kernel tests: device buffers, host-side rounding to bf16/fp16, uploads and
// downloads through that rounding, NaN poisoning, and the skip when no device is present.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/comm/environment.hpp"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/dtype.hpp"

#define SEQPAR_SKIP_WITHOUT_GPU()                                                      \
  do {                                                                                 \
    std::string seqpar_why_;                                                           \
    if (!::seqpar::comm::cuda_device_available(&seqpar_why_))                        \
      GTEST_SKIP() << "no usable CUDA device (" << seqpar_why_ << "): GPU test skipped"; \
  } while (0)

namespace seqpar::test {

using kernels::DType;

inline float round_to(DType t, float x) {
  switch (t) {
    case DType::bf16: return __bfloat162float(__float2bfloat16_rn(x));
    case DType::fp16: return __half2float(__float2half_rn(x));
    case DType::fp32: return x;
    default: break;  // no kernel takes core's other element types
  }
  return x;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) { SEQPAR_CUDA_CHECK(cudaMalloc(&ptr_, bytes ? bytes : 1)); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  // Every byte 0xFF: NaN in bf16, fp16 and fp32, so an output the kernel fails to write shows up.
  void poison() const { SEQPAR_CUDA_CHECK(cudaMemset(ptr_, 0xFF, bytes_)); }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

// Uploads `host` converted to `t`; also rounds `host` in place so the CPU sees the kernel's exact inputs.
inline void upload(DType t, std::vector<float>& host, const DeviceBuffer& dev) {
  std::vector<std::uint16_t> bits(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = round_to(t, host[i]);
    if (t == DType::bf16) bits[i] = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(host[i])).x;
    if (t == DType::fp16) bits[i] = static_cast<__half_raw>(__float2half_rn(host[i])).x;
  }
  const void* src = t == DType::fp32 ? static_cast<const void*>(host.data()) : bits.data();
  SEQPAR_CUDA_CHECK(cudaMemcpy(dev.get(), src, host.size() * kernels::dtype_size(t), cudaMemcpyHostToDevice));
}

inline std::vector<float> download(DType t, const void* dev, std::size_t n) {
  std::vector<float> out(n);
  if (t == DType::fp32) {
    SEQPAR_CUDA_CHECK(cudaMemcpy(out.data(), dev, n * 4, cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<std::uint16_t> bits(n);
  SEQPAR_CUDA_CHECK(cudaMemcpy(bits.data(), dev, n * 2, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; ++i) {
    if (t == DType::bf16) {
      __nv_bfloat16_raw raw;
      raw.x = bits[i];
      out[i] = __bfloat162float(__nv_bfloat16(raw));
    } else {
      __half_raw raw;
      raw.x = bits[i];
      out[i] = __half2float(__half(raw));
    }
  }
  return out;
}

}  // namespace seqpar::test
