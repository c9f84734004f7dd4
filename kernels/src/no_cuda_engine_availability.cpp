// The attention engines' availability in a build without CUDA (attention_engine.hpp): only the
// names exist, so the host code that chooses an engine links and reports why cuDNN is absent.
#include "seqpar/kernels/attention_engine.hpp"

namespace seqpar::kernels {

EngineAvailability attention_engine_availability() {
  EngineAvailability a;
  a.cudnn = false;
  a.cudnn_why = "this build has no CUDA (SEQPAR_ENABLE_CUDA=OFF or no CUDA toolkit found)";
  return a;
}

}  // namespace seqpar::kernels
