// Checked cuBLAS calls, defined once for every cuBLAS caller (the GEMM wrapper, the training step's
// CUDA back end): a failed status throws seqpar::Error naming the call, the file and line, and the
// status. Include only where cublas_v2.h is available (CUDA builds).
#pragma once
#include <cublas_v2.h>
#include <fmt/format.h>

#include "seqpar/core/error.hpp"

#define SEQPAR_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                                 \
    cublasStatus_t seqpar_status_ = (call);                                                            \
    if (seqpar_status_ != CUBLAS_STATUS_SUCCESS)                                                       \
      throw ::seqpar::Error(fmt::format("cuBLAS error at {}:{}: {} failed: {} ({})", __FILE__, __LINE__, \
                                        #call, cublasGetStatusString(seqpar_status_),                   \
                                        cublasGetStatusName(seqpar_status_)));                           \
  } while (0)
