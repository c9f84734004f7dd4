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

// An Error in the input itself, found where a program cannot tell it by where it was raised (the
// benchmark library's flags, read after the device is opened): exit 2, input never valid.
class InputError : public Error {
 public:
  using Error::Error;
};

}  // namespace seqpar
