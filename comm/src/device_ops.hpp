// The few CUDA runtime calls the virtual-rank and loopback back ends need, behind plain
// pointers so those back ends build without CUDA (the GPU calls then throw seqpar::Error).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

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

// A ring step started on a side stream: the event recorded there after the transfer.
inline Request event_request(void* side) {
  auto st = std::make_unique<EventRequest>();
  st->event = record_event(side);
  return Request{std::move(st)};
}

// Completes an event_request: `compute` waits for the transfer without blocking the host.
// `owner` names the back end for the error when the request came from another one.
inline void wait_event_request(Request& r, void* compute, const char* owner) {
  if (!r.pending()) return;
  auto* st = dynamic_cast<EventRequest*>(r.state.get());
  if (!st) throw Error(std::string("wait: the request does not belong to ") + owner);
  stream_wait_event(compute, st->event);
  r.state.reset();
}

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
