// seqpar::Error: a user-facing error (bad input, impossible plan) that names the field and the rule.
// Programs catch it at the top, print the message and exit non-zero; it never means a bug.
#pragma once
#include <stdexcept>
#include <string>

namespace seqpar {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace seqpar
