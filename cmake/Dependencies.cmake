# Third-party packages: Debian packages, found through their CMake config files or modules here.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3.10 CONFIG REQUIRED)
if(SEQPAR_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(SEQPAR_BUILD_BENCH OR SEQPAR_BUILD_TESTS)
  find_package(benchmark REQUIRED)
endif()
find_package(MPI COMPONENTS C CXX)   # CMake's FindMPI; optional: MPI parts are left out without it
find_package(NCCL)                   # cmake/FindNCCL.cmake; optional
