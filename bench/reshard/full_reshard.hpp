// The full Ulysses reshard of seqpar-bench-reshard (--comm given): pack -> all-to-all -> unpack for
// q,k,v and the output, forward and backward, fused kernels beside naive copies, timed per stage on
// real ranks (mpi, nccl), virtual ranks or the single-rank proxy (loopback), with the data check.
#pragma once
#include "options.hpp"

namespace seqpar::bench {

// Exit status: 0 all data correct (or -c 0), 1 the data check found wrong elements. Bad options
// throw seqpar::Error before `started` is set; errors after it are runtime failures.
int run_full_reshard(const ReshardOptions& opt, int argc, char** argv, int world_rank, bool& started);

}  // namespace seqpar::bench
