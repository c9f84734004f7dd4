// Builds without CUDA (or without seqpar's CUDA kernels): the CUDA back end is not available.
#include "seqpar/core/error.hpp"
#include "seqpar/train/backend.hpp"

namespace seqpar::train {

bool cuda_backend_built() { return false; }

std::unique_ptr<Backend> make_cuda_backend(int, std::optional<kernels::AttentionEngine>) {
  throw Error("--backend cuda: this build has no CUDA back end (configure with nvcc available)");
}

}  // namespace seqpar::train
