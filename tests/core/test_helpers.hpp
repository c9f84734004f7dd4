// Small helpers the core tests share: the sanitizer pass's sample stride, an Error's message, and
// random packed sequences at awkward sizes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/rng.hpp"

namespace seqpar::core_test {

// Every k-th case under the sanitizers (scripts/test.sh sets SEQPAR_TEST_SAMPLE), as tests/sim does.
inline int stride() {
  const char* v = std::getenv("SEQPAR_TEST_SAMPLE");
  const int k = v && *v ? std::atoi(v) : 1;
  return k >= 1 ? k : 1;
}

// The message of the seqpar::Error that f throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Random packed sequence of n tokens (cu_seqlens): documents of lengths at awkward sizes (1, tiny,
// primes, longer than a rank's share, one as long as the sequence).
inline std::vector<std::int64_t> random_cu(Rng& rng, std::int64_t n) {
  std::vector<std::int64_t> cu = {0};
  const std::int64_t caps[] = {1, 3, 17, n / 5 + 1, n / 2 + 1, n};
  const std::int64_t cap = caps[rng.between(0, 5)];
  while (cu.back() < n) cu.push_back(std::min(n, cu.back() + rng.between(1, cap)));
  return cu;
}

}  // namespace seqpar::core_test
