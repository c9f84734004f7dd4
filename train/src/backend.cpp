#include "seqpar/train/backend.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "seqpar/core/bf16.hpp"
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

Tensor::Tensor(Backend& be, std::int64_t count, DType t, MemCategory c) : be_(&be), t_(t), cat_(c) {
  if (count < 0) throw Error(fmt::format("buffer of {} elements: the count must not be negative", count));
  const auto size = static_cast<std::int64_t>(dtype_size(t));
  if (count > INT64_MAX / size)
    throw Error(fmt::format("buffer of {} {} elements: the byte size overflows 64 bits", count, to_string(t)));
  p_ = be.allocate(count * size, c);
  n_ = count;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    reset();
    be_ = std::exchange(o.be_, nullptr);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
    t_ = o.t_;
    cat_ = o.cat_;
  }
  return *this;
}

void Tensor::recharge(MemCategory c) {
  if (p_) {
    be_->memory().on_free(cat_, static_cast<std::int64_t>(bytes()));
    be_->memory().on_alloc(c, static_cast<std::int64_t>(bytes()));
  }
  cat_ = c;
}

void Tensor::reset() noexcept {
  if (p_) be_->deallocate(p_, static_cast<std::int64_t>(bytes()), cat_);
  p_ = nullptr;
  n_ = 0;
}

void check_activation_type(DType t, const char* op) {
  if (t != DType::fp32 && t != DType::bf16)
    throw Error(fmt::format("{}: an activation view of type {}: activations are fp32 or bf16", op, to_string(t)));
}

Tensor upload(Backend& be, const float* host, std::int64_t count, DType t, MemCategory c) {
  check_activation_type(t, "upload");
  Tensor out(be, count, t, c);
  if (t == DType::fp32) {
    be.copy_from_host(out.data(), host, out.bytes());
    return out;
  }
  std::vector<std::uint16_t> words(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = float_to_bf16(host[i]);
  be.copy_from_host(out.data(), words.data(), out.bytes());
  return out;
}

std::vector<float> download(Backend& be, CRef src, std::int64_t count) {
  check_activation_type(src.t, "download");
  std::vector<float> out(static_cast<std::size_t>(count));
  if (src.t == DType::fp32) {
    be.copy_to_host(out.data(), src.p, out.size() * sizeof(float));
    return out;
  }
  std::vector<std::uint16_t> words(out.size());
  be.copy_to_host(words.data(), src.p, words.size() * sizeof(std::uint16_t));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(words[i]);
  return out;
}

}  // namespace seqpar::train
