// Device buffers of the GPU microbenchmarks and the input rotation against L2 reuse. CUDA builds
// only; the host side of the harness (Recorder, JSON) is gbench_harness.hpp.
#pragma once
#include <cstddef>

namespace seqpar::bench {

// A cudaMalloc'd buffer, freed on destruction.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// How many copies of a working set of `bytes` to rotate through so that consecutive repetitions do not
// hit in L2: enough to cover twice the L2 size, at least 1, at most `max_copies`.
int rotation_copies(std::size_t bytes, int max_copies = 16);

}  // namespace seqpar::bench
