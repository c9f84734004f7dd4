# Runs seqpar-train with ARGS ("|"-separated) and requires a clean refusal: exit 1 or 2 (not 0,
# not 3 = an internal error such as std::bad_alloc, not a signal), the output matching EXPECT, and
# no "validate: PASS" anywhere.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 120)
set(all "${out}${err}")
if(NOT (rc STREQUAL "1" OR rc STREQUAL "2"))
  message(FATAL_ERROR "seqpar-train ${args}: expected exit 1 or 2, got '${rc}':\n${all}")
endif()
if(NOT all MATCHES "${EXPECT}")
  message(FATAL_ERROR "seqpar-train ${args}: output does not match '${EXPECT}':\n${all}")
endif()
if(all MATCHES "validate: PASS")
  message(FATAL_ERROR "seqpar-train ${args}: reported a PASS:\n${all}")
endif()
