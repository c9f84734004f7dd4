// The packed-document workload flags (--documents, --packing, --doc-seed, --doc-batches and, where a
// program lays a sequence over ranks, --balancer) of every program that takes them: seqpar's
// simulate, advise, maxlen and sweep, seqpar-train, seqpar-bench-layer and seqpar-bench-attention.
// One registration, one rule for the flags that need --documents, one record in the documents.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/workload.hpp"

namespace seqpar {

struct WorkloadFlags {
  std::string documents;  // empty: one causal sequence filling every sequence (no document mask)
  std::string packing = "fill";
  std::uint64_t seed = 1;
  int batches = 16;
  std::string balancer;   // empty: the method's own layout
  std::vector<CLI::Option*> dependents;  // registered by add_workload_flags: given only with --documents

  bool given() const { return !documents.empty(); }
  // The workload named (make_workload's checks), nullopt without --documents; a dependent flag given
  // without it (or, where the flags were set directly, not at its default) is a seqpar::Error naming
  // it: "--balancer describes a packed-document workload: give it with --documents".
  std::optional<Workload> workload() const;
  // {"documents", "packing", "doc_seed", "doc_batches", "balancer" ("own" when not given)}.
  nlohmann::json to_json() const;
};

// Registers the flags on `app`, bound to `f` (kept alive by the caller); --balancer only where
// `with_balancer`. `how_sequences` ends --documents' help: how the program takes sampled sequences.
void add_workload_flags(CLI::App* app, WorkloadFlags& f, bool with_balancer, const std::string& how_sequences = "");

}  // namespace seqpar
