# SEQPAR_VERSION at configure time (the status line); core's version.cpp is written again at every
# build by the same script (WriteVersion.cmake).
set(SEQPAR_SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/WriteVersion.cmake)
