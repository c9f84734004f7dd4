#include "seqpar/train/backend.hpp"

#include <fmt/format.h>

#include <new>

#include "seqpar/core/error.hpp"

namespace seqpar::train {

void* Backend::allocate(std::int64_t bytes, MemCategory c) {
  if (bytes < 0) throw Error(fmt::format("allocation of {} bytes: size must not be negative", bytes));
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  try {
    p = on_device(c) ? raw_allocate(static_cast<std::size_t>(bytes))
                     : raw_host_allocate(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
    // A size the up-front limits (size_limits.hpp) let through but this machine cannot hold.
    throw Error(fmt::format("out of {} memory: allocating {} bytes for {} while {} bytes are held "
                            "(reduce the model, --seq-len or --micro-batch, or raise --sp)",
                            on_gpu() && on_device(c) ? "GPU" : "host", bytes, to_string(c), memory_.current_bytes()));
  }
  memory_.on_alloc(c, bytes);
  return p;
}

void Backend::deallocate(void* p, std::int64_t bytes, MemCategory c) noexcept {
  if (!p) return;
  if (on_device(c))
    raw_free(p);
  else
    raw_host_free(p);
  memory_.on_free(c, bytes);
}

}  // namespace seqpar::train
