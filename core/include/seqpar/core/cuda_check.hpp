// Checked CUDA calls for CUDA translation units: a failure throws seqpar::Error naming the call,
// the file and line, and the CUDA error string. Include only where cuda_runtime.h is available.
#pragma once
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "seqpar/core/error.hpp"

#define SEQPAR_CUDA_CHECK(call)                                                              \
  do {                                                                                       \
    cudaError_t seqpar_err_ = (call);                                                        \
    if (seqpar_err_ != cudaSuccess)                                                          \
      throw ::seqpar::Error(fmt::format("CUDA error at {}:{}: {} failed: {}", __FILE__,      \
                                        __LINE__, #call, cudaGetErrorString(seqpar_err_))); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define SEQPAR_CUDA_CHECK_LAUNCH() SEQPAR_CUDA_CHECK(cudaGetLastError())
