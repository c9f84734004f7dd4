// Names and sizes of element types and back ends; the interface's host defaults.
#include <fmt/format.h>

#include <array>
#include <utility>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {

std::size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

std::string_view to_string(DType dt) {
  switch (dt) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, DType>, 14> names{{
      {"f32", DType::f32},   {"float", DType::f32},   {"f64", DType::f64},
      {"double", DType::f64}, {"bf16", DType::bf16},  {"bfloat16", DType::bf16},
      {"f16", DType::f16},   {"half", DType::f16},    {"i32", DType::i32},
      {"int32", DType::i32}, {"i64", DType::i64},     {"int64", DType::i64},
      {"u8", DType::u8},     {"uint8", DType::u8},
  }};
  for (const auto& [name, dt] : names)
    if (name == s) return dt;
  throw Error(fmt::format(
      "datatype '{}' is not supported: use f32|float, f64|double, bf16|bfloat16, f16|half, "
      "i32|int32, i64|int64 or u8|uint8",
      s));
}

std::string_view to_string(Backend b) {
  switch (b) {
    case Backend::mpi: return "mpi";
    case Backend::nccl: return "nccl";
    case Backend::virtual_ranks: return "virtual";
    case Backend::loopback: return "loopback";
  }
  return "?";
}

Backend parse_backend(std::string_view s) {
  for (Backend b : {Backend::mpi, Backend::nccl, Backend::virtual_ranks, Backend::loopback})
    if (to_string(b) == s) return b;
  throw Error(fmt::format("backend '{}' is not known: use mpi, nccl, virtual or loopback", s));
}

bool backend_available(Backend b, std::string* why) {
  (void)why;  // unused where every back end is built in
  switch (b) {
    case Backend::mpi:
#ifdef SEQPAR_HAVE_MPI
      return true;
#else
      if (why) *why = "seqpar was built without MPI";
      return false;
#endif
    case Backend::nccl:
#if defined(SEQPAR_HAVE_NCCL) && defined(SEQPAR_HAVE_MPI)
      return true;
#else
      if (why) *why = "seqpar was built without NCCL, CUDA or MPI (the NCCL back end needs all three)";
      return false;
#endif
    case Backend::virtual_ranks:
    case Backend::loopback:
      return true;
  }
  return false;
}

void Communicator::set_stream(void* /*cuda_stream*/) {}
void Communicator::synchronize() {}

}  // namespace seqpar::comm
