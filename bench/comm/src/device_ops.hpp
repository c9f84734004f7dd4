// The few CUDA runtime calls the virtual-rank and loopback back ends need, behind plain
// pointers so those back ends build without CUDA (the GPU calls then throw seqpar::Error).
#pragma once
#include <cstddef>

#include "seqpar/comm/communicator.hpp"

namespace seqpar::comm::detail {

// Blocking copy; on_gpu: either side may be device memory (cudaMemcpyDefault).
void copy_sync(void* dst, const void* src, std::size_t bytes, bool on_gpu);
// Enqueued on `stream`; GPU only.
void copy_async(void* dst, const void* src, std::size_t bytes, void* stream);
void sync_stream(void* stream);
void* create_stream();          // non-blocking stream
void destroy_stream(void* stream) noexcept;
void* record_event(void* stream);  // a new event, recorded on stream
void stream_wait_event(void* stream, void* event);
void destroy_event(void* event) noexcept;

// A ring step on a side stream: wait() makes the compute stream wait for `event`.
struct EventRequest : RequestState {
  void* event = nullptr;
  ~EventRequest() override { destroy_event(event); }
};

// Orders `side` after the work already on `compute`.
inline void join(void* side, void* compute) {
  void* ev = record_event(compute);
  try {
    stream_wait_event(side, ev);
  } catch (...) {
    destroy_event(ev);
    throw;
  }
  destroy_event(ev);
}

}  // namespace seqpar::comm::detail
