#include "seqpar/comm/element.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "seqpar/core/bf16.hpp"

namespace seqpar::comm {
namespace {

template <class T>
T get(const void* buf, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void put(void* buf, std::size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

float f16_to_float(std::uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
std::uint16_t float_to_f16(float f) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
}

// Two's-complement wrap without signed-overflow UB.
template <class S>
S wrap_add(S a, S b) {
  using U = std::make_unsigned_t<S>;
  return static_cast<S>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}

}  // namespace

double load(const void* buf, std::size_t i, DType dt) {
  switch (dt) {
    case DType::fp32: return static_cast<double>(get<float>(buf, i));
    case DType::fp64: return get<double>(buf, i);
    case DType::bf16: return static_cast<double>(bf16_to_float(get<std::uint16_t>(buf, i)));
    case DType::fp16: return static_cast<double>(f16_to_float(get<std::uint16_t>(buf, i)));
    case DType::i32: return static_cast<double>(get<std::int32_t>(buf, i));
    case DType::i64: return static_cast<double>(get<std::int64_t>(buf, i));
    case DType::u8: return static_cast<double>(get<std::uint8_t>(buf, i));
  }
  return 0;
}

void store(void* buf, std::size_t i, DType dt, double v) {
  switch (dt) {
    case DType::fp32: put(buf, i, static_cast<float>(v)); return;
    case DType::fp64: put(buf, i, v); return;
    case DType::bf16: put(buf, i, float_to_bf16(static_cast<float>(v))); return;
    case DType::fp16: put(buf, i, float_to_f16(static_cast<float>(v))); return;
    case DType::i32: put(buf, i, static_cast<std::int32_t>(v)); return;
    case DType::i64: put(buf, i, static_cast<std::int64_t>(v)); return;
    case DType::u8: {
      auto m = static_cast<std::int64_t>(v) % 256;
      put(buf, i, static_cast<std::uint8_t>(m < 0 ? m + 256 : m));
      return;
    }
  }
}

void add_into(void* acc, const void* in, std::size_t n, DType dt) {
  switch (dt) {
    case DType::fp32:
      for (std::size_t i = 0; i < n; ++i) put(acc, i, get<float>(acc, i) + get<float>(in, i));
      return;
    case DType::fp64:
      for (std::size_t i = 0; i < n; ++i) put(acc, i, get<double>(acc, i) + get<double>(in, i));
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i)
        put(acc, i,
            float_to_bf16(bf16_to_float(get<std::uint16_t>(acc, i)) +
                          bf16_to_float(get<std::uint16_t>(in, i))));
      return;
    case DType::fp16:
      for (std::size_t i = 0; i < n; ++i)
        put(acc, i,
            float_to_f16(f16_to_float(get<std::uint16_t>(acc, i)) +
                         f16_to_float(get<std::uint16_t>(in, i))));
      return;
    case DType::i32:
      for (std::size_t i = 0; i < n; ++i)
        put(acc, i, wrap_add(get<std::int32_t>(acc, i), get<std::int32_t>(in, i)));
      return;
    case DType::i64:
      for (std::size_t i = 0; i < n; ++i)
        put(acc, i, wrap_add(get<std::int64_t>(acc, i), get<std::int64_t>(in, i)));
      return;
    case DType::u8:
      for (std::size_t i = 0; i < n; ++i)
        put(acc, i,
            static_cast<std::uint8_t>(get<std::uint8_t>(acc, i) + get<std::uint8_t>(in, i)));
      return;
  }
}

}  // namespace seqpar::comm
