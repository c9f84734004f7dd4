// The CUDA-event timeline (timeline_cuda.cpp, host code over the CUDA runtime, in CUDA builds; no_cuda_timeline.cpp refuses).
#pragma once
#include <memory>

#include "seqpar/train/timeline.hpp"

namespace seqpar::train::detail {

// Events recorded on `stream` (a cudaStream_t) at each begin and end; an NVTX range per scope.
std::unique_ptr<Timeline> make_cuda_event_timeline(void* stream);

}  // namespace seqpar::train::detail
