#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <string>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"
#include "timeline_cuda.hpp"

namespace seqpar::train::detail {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(fmt::format("--trace: {}: {}", what, cudaGetErrorString(e)));
}

class CudaEventTimeline final : public Timeline {
 public:
  CudaEventTimeline(void* stream, void* copy_stream)
      : stream_(static_cast<cudaStream_t>(stream)),
        copy_stream_(copy_stream ? static_cast<cudaStream_t>(copy_stream) : stream_) {}
  ~CudaEventTimeline() override {
    for (Open& o : open_) {
      cudaEventDestroy(o.start);
      if (o.stop) cudaEventDestroy(o.stop);
    }
  }
  int begin(trace::Stream stream, std::string name) override {
    nvtxRangePushA(name.c_str());
    Open o{stream, std::move(name), nullptr, nullptr};
    check(cudaEventCreate(&o.start), "cudaEventCreate");
    check(cudaEventRecord(o.start, on(o.stream)), "cudaEventRecord");
    open_.push_back(std::move(o));
    return static_cast<int>(open_.size()) - 1;
  }
  void end(int id) override {
    if (id < 0 || id >= static_cast<int>(open_.size()) || open_[static_cast<std::size_t>(id)].stop)
      throw Error(fmt::format("timeline: range {} was never opened or is already closed", id));
    Open& o = open_[static_cast<std::size_t>(id)];
    check(cudaEventCreate(&o.stop), "cudaEventCreate");
    check(cudaEventRecord(o.stop, on(o.stream)), "cudaEventRecord");
    nvtxRangePop();
  }
  std::vector<Range> ranges() override {
    std::vector<Range> out;
    if (open_.empty()) return out;
    for (const Open& o : open_) {
      if (!o.stop) continue;
      float from_origin = 0, dur = 0;
      check(cudaEventSynchronize(o.stop), "cudaEventSynchronize");
      check(cudaEventElapsedTime(&from_origin, open_.front().start, o.start), "cudaEventElapsedTime");
      check(cudaEventElapsedTime(&dur, o.start, o.stop), "cudaEventElapsedTime");
      out.push_back({o.stream, o.name, 1e-3 * from_origin, 1e-3 * dur});
    }
    return out;
  }

 private:
  struct Open {
    trace::Stream stream;
    std::string name;
    cudaEvent_t start, stop;
  };
  // Offload copies run on their own stream; everything else is ordered on the compute stream.
  cudaStream_t on(trace::Stream s) const { return s == trace::Stream::offload ? copy_stream_ : stream_; }
  cudaStream_t stream_;
  cudaStream_t copy_stream_;
  std::vector<Open> open_;
};

}  // namespace

std::unique_ptr<Timeline> make_cuda_event_timeline(void* stream, void* copy_stream) {
  return std::make_unique<CudaEventTimeline>(stream, copy_stream);
}

}  // namespace seqpar::train::detail
