// Builds without CUDA: the GPU engines refuse with the reason; the host engines still run.
#include "movers.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::bench::reshard_full {
namespace {
[[noreturn]] void no_cuda() { throw Error("this seqpar-bench-reshard was built without CUDA: use --comm mpi"); }
}  // namespace

std::unique_ptr<Mover> make_gpu_mover(Variant, kernels::DType, void*) { no_cuda(); }
std::unique_ptr<Clock> make_gpu_clock(void*) { no_cuda(); }
std::shared_ptr<void> make_gpu_stream() { no_cuda(); }
void sync_gpu_stream(void*) { no_cuda(); }

}  // namespace seqpar::bench::reshard_full
