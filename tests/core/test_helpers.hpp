// Small helpers the core tests share: the sanitizer pass's sample stride and an Error's message.
#pragma once
#include <cstdlib>
#include <string>

#include "seqpar/core/error.hpp"

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

}  // namespace seqpar::core_test
