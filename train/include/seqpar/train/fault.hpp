// Sharding bugs planted on purpose, for tests only: they prove that --validate catches a real
// sharding mistake and not only rounding. Set through TrainSetup::fault by the tests; no
// command-line flag sets them. The unsharded reference never has one (there is no shard edge).
#pragma once

namespace seqpar::train {

enum class Fault {
  none,
  // The last token of SP rank 0's first contiguous run (a shard edge, whose label lives on the
  // next shard) takes the label one position too far: seq[p + 2] instead of seq[p + 1].
  label_off_by_one,
  // One rank attends with the wrong K,V block: with a ring (R > 1), ring rank 1 computes ring step
  // 1 with the K,V of step 0 (its own block) in place of the block it just received; with
  // Ulysses only (R = 1), Ulysses rank 1 swaps the K,V chunks of its first two peers after the
  // all-to-all (the chunk of the wrong peer); with an all-gather of K,V, ring rank 1 swaps the
  // gathered chunks of peers 0 and 1. The backward uses the right blocks.
  kv_wrong_block,
};

}  // namespace seqpar::train
