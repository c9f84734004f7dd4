# SEQPAR_SANITIZE=ON: AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer on all C++
# code, for the host-code check of scripts/test.sh (configured with -DSEQPAR_ENABLE_CUDA=OFF).
# Applied globally rather than per target (as seqpar_warnings is): every object and every link line
# must agree, tests and their helpers included, and third-party code here comes prebuilt anyway.
# -fno-sanitize-recover=all makes every UBSan finding fatal, so a test cannot pass over one.
option(SEQPAR_SANITIZE "Build with AddressSanitizer + UndefinedBehaviorSanitizer (host code)" OFF)
if(SEQPAR_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "SEQPAR_SANITIZE needs GCC or Clang (found ${CMAKE_CXX_COMPILER_ID})")
  endif()
  set(_seqpar_sanitize_flags -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  # -g1: line tables for the reports' stack traces, at a fraction of full debug info's build time.
  # One generator expression per flag: a list inside one would be split before it is evaluated.
  foreach(_flag IN LISTS _seqpar_sanitize_flags ITEMS -g1)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${_flag}>)
  endforeach()
  foreach(_flag IN LISTS _seqpar_sanitize_flags)
    add_link_options($<$<LINK_LANGUAGE:CXX>:${_flag}>)
  endforeach()
  message(STATUS "SEQPAR_SANITIZE: C++ built with -fsanitize=address,undefined (device code is not instrumented)")
endif()
