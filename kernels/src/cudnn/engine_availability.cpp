// The attention engines' availability in this process (attention_engine.hpp): built beside the
// cuDNN engine or its stub, whose cudnn_attention_available says why it cannot run.
#include <string>

#include "seqpar/kernels/attention_engine.hpp"
#include "seqpar/kernels/cudnn_attention.hpp"

namespace seqpar::kernels {

EngineAvailability attention_engine_availability() {
  EngineAvailability a;
  std::string why;
  a.cudnn = cudnn_attention_available(&why);
  if (!a.cudnn) a.cudnn_why = why.empty() ? "cudnn_attention_available gave no reason" : why;
  return a;
}

}  // namespace seqpar::kernels
