#include "seqpar/core/error.hpp"
#include "timeline_cuda.hpp"

namespace seqpar::train::detail {

std::unique_ptr<Timeline> make_cuda_event_timeline(void*, void*) {
  throw Error("--trace: this build has no CUDA, so a GPU back end's timeline cannot be recorded");
}

}  // namespace seqpar::train::detail
