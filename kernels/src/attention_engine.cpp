#include "seqpar/kernels/attention_engine.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"

namespace seqpar::kernels {

const char* to_string(AttentionEngine e) {
  switch (e) {
    case AttentionEngine::seqpar: return "seqpar";
    case AttentionEngine::cudnn: return "cudnn";
  }
  return "?";
}

AttentionEngine parse_attention_engine(std::string_view text, std::string_view flag) {
  for (AttentionEngine e : {AttentionEngine::seqpar, AttentionEngine::cudnn})
    if (text == to_string(e)) return e;
  throw Error(fmt::format("{} '{}': unknown attention engine (accepted: seqpar, cudnn)", flag, text));
}

AttentionEngine default_attention_engine(const EngineAvailability& a) {
  return a.cudnn ? AttentionEngine::cudnn : AttentionEngine::seqpar;
}

AttentionEngine choose_attention_engine(std::optional<AttentionEngine> requested, const EngineAvailability& a,
                                        std::string_view flag) {
  if (!requested) return default_attention_engine(a);
  if (*requested == AttentionEngine::cudnn && !a.cudnn)
    throw Error(fmt::format("{} cudnn: the cuDNN attention engine is not available here: {} (--attention seqpar "
                            "runs seqpar's own kernels)",
                            flag, a.cudnn_why.empty() ? std::string("no reason given") : a.cudnn_why));
  return *requested;
}

}  // namespace seqpar::kernels
