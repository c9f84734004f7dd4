// The CUDA-event timeline (timeline_cuda.cpp, host code over the CUDA runtime, in CUDA builds; no_cuda_timeline.cpp refuses).
#pragma once
#include <memory>

#include "seqpar/train/timeline.hpp"

namespace seqpar::train::detail {

// Events recorded on `stream` (a cudaStream_t) at each begin and end; ranges on the offload track
// on `copy_stream` instead (where the back end's copy_async runs), when given. An NVTX range per scope.
std::unique_ptr<Timeline> make_cuda_event_timeline(void* stream, void* copy_stream = nullptr);

}  // namespace seqpar::train::detail
