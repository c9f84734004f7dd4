// seqpar-bench-attention --attention both: the two engines' results on the same shapes, side by side.
// Host code over the measurement rows (Recorder::results()), so it is tested without a GPU.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace seqpar::bench {

// One line per shape (op, dtype, head_dim, mask, seq_len, batch, heads, kv_heads) that has rows with
// "attention_engine": time in ms and TFLOP/s of each engine and the cudnn/seqpar speed ratio
// (seqpar's time over cuDNN's: above 1 when cuDNN is faster). An engine whose row failed or is
// missing shows "-" and the ratio is left out. Shapes in the order their first row came.
std::string attention_engine_table(const nlohmann::json& results);

}  // namespace seqpar::bench
