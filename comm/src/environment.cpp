#include "seqpar/comm/environment.hpp"

#include <fmt/format.h>

#include <fstream>
#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

#ifdef SEQPAR_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef SEQPAR_HAVE_MPI
#include <mpi.h>
#endif
#ifdef SEQPAR_HAVE_NCCL
#include <nccl.h>
#endif

namespace seqpar::comm {

bool cuda_device_available(std::string* why) {
#ifdef SEQPAR_HAVE_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    if (why) *why = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device present";
    cudaGetLastError();  // clear the sticky "no device" error for later callers
    return false;
  }
  return true;
#else
  if (why) *why = "built without CUDA";
  return false;
#endif
}

nlohmann::json environment_info(int device) {
  nlohmann::json env;
  env["gpu"] = nullptr;
  env["gpu_count"] = 0;
  env["driver_version"] = nullptr;
  env["cuda_runtime_version"] = nullptr;
  env["nccl_version"] = nullptr;
  env["mpi_version"] = nullptr;
#ifdef SEQPAR_HAVE_CUDA
  std::string why;
  int rt = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
    env["cuda_runtime_version"] = fmt::format("{}.{}", rt / 1000, (rt % 1000) / 10);
  if (cuda_device_available(&why)) {
    int n = 0, drv = 0;
    cudaGetDeviceCount(&n);
    cudaDriverGetVersion(&drv);
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, device) == cudaSuccess) {
      env["gpu"] = {{"name", p.name},
                    {"compute_capability", fmt::format("{}.{}", p.major, p.minor)},
                    {"memory_bytes", p.totalGlobalMem},
                    {"sm_count", p.multiProcessorCount},
                    {"l2_bytes", p.l2CacheSize}};
    }
    env["gpu_count"] = n;
    env["driver_version"] = fmt::format("{}.{}", drv / 1000, (drv % 1000) / 10);
  } else {
    env["gpu_error"] = why;
  }
#else
  (void)device;
  env["gpu_error"] = "built without CUDA";
#endif
#ifdef SEQPAR_HAVE_NCCL
  int nv = 0;
  if (ncclGetVersion(&nv) == ncclSuccess)
    env["nccl_version"] = fmt::format("{}.{}.{}", nv / 10000, (nv % 10000) / 100, nv % 100);
#endif
#ifdef SEQPAR_HAVE_MPI
  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(ver, &len) == MPI_SUCCESS) {
    std::string s(ver, static_cast<std::size_t>(len));
    if (auto nl = s.find_first_of("\n,"); nl != std::string::npos) s.resize(nl);
    env["mpi_version"] = s;
  }
#endif
  return env;
}

}  // namespace seqpar::comm
