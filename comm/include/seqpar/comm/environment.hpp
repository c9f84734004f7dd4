// What a measurement ran on: GPU name and count, compute capability, memory, driver, CUDA
// runtime, NCCL and MPI library versions. Fields that do not apply are null, never guessed.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace seqpar::comm {

// Safe to call without a GPU or before MPI_Init (then "gpu" is null with "gpu_error" saying why).
nlohmann::json environment_info(int device = 0);

// True when at least one CUDA device is usable; `why` gets the reason when not.
bool cuda_device_available(std::string* why = nullptr);

}  // namespace seqpar::comm
