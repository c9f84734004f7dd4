# Runs COMMAND (a ;-list) and fails unless it exits with EXPECT_RC and its output matches EXPECT_REGEX.
# (To hide the GPUs, give the test the ENVIRONMENT "CUDA_VISIBLE_DEVICES=": CMake's set(ENV{...} "") would unset
# the variable instead of emptying it.)
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "expected exit ${EXPECT_RC}, got '${rc}'; output:\n${all}")
endif()
if(NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}':\n${all}")
endif()
message(STATUS "exit ${rc} as expected; output:\n${all}")
