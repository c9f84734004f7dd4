#include "seqpar/bench/device_memory.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <utility>

#include "seqpar/core/cuda_check.hpp"

namespace seqpar::bench {

DeviceMemory::DeviceMemory(std::size_t bytes) : bytes_(bytes) {
  SEQPAR_CUDA_CHECK(cudaMalloc(&ptr_, bytes ? bytes : 1));
}
DeviceMemory::~DeviceMemory() {
  if (ptr_) cudaFree(ptr_);
}
DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

int rotation_copies(std::size_t bytes, int max_copies) {
  int device = 0, l2 = 0;
  SEQPAR_CUDA_CHECK(cudaGetDevice(&device));
  SEQPAR_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  if (bytes == 0) return 1;
  // Ceiling of 2*L2 / bytes, written so that no user size near SIZE_MAX can overflow it.
  const std::size_t cover = 2 * static_cast<std::size_t>(l2);
  const std::size_t want = cover / bytes + (cover % bytes != 0 ? 1 : 0);
  return static_cast<int>(std::clamp<std::size_t>(want, 1, static_cast<std::size_t>(max_copies)));
}

}  // namespace seqpar::bench
