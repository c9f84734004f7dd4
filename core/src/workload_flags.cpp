#include "seqpar/core/workload_flags.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"

namespace seqpar {

void add_workload_flags(CLI::App* app, WorkloadFlags& f, bool with_balancer, const std::string& how_sequences) {
  app->add_option("--documents", f.documents,
                  "Packed documents under a document mask: fixed:L, uniform:A:B, lognormal:MU:SIGMA (of ln length), "
                  "powerlaw:ALPHA:MIN:MAX, hist:FILE.csv (min_tokens,max_tokens,count) or lengths:FILE (one a line)" +
                      (how_sequences.empty() ? std::string() : "; " + how_sequences));
  f.dependents = {
      app->add_option("--packing", f.packing,
                      "How documents fill each sequence: fill (arrival order, split at the sequence end), "
                      "best-fit[:WINDOW] or balanced:W (the pieces of W fill sequences repacked to even their "
                      "attention work)")
          ->capture_default_str(),
      app->add_option("--doc-seed", f.seed, "Seed of the sampled document stream")->capture_default_str(),
      app->add_option("--doc-batches", f.batches, "Packed sequences sampled")->capture_default_str()};
  if (with_balancer)
    f.dependents.push_back(app->add_option(
        "--balancer", f.balancer,
        "Load balancer of the packed sequence over the ring ranks: contiguous, zigzag (head/tail of the packed "
        "sequence), per-document (2 x R chunks of every document, padded as Transformer Engine's THD), balanced "
        "(whole documents moved to even the work); default: the method's own"));
}

std::optional<Workload> WorkloadFlags::workload() const {
  if (!given()) {
    std::string named;
    auto name = [&](const std::string& flag) { named += (named.empty() ? "" : ", ") + flag; };
    if (!dependents.empty()) {
      for (const CLI::Option* o : dependents)
        if (o->count() > 0) name(o->get_name());
    } else {  // set directly (the Python module's keyword arguments arrive as flags; tests set fields)
      if (packing != "fill") name("--packing");
      if (seed != 1) name("--doc-seed");
      if (batches != 16) name("--doc-batches");
      if (!balancer.empty()) name("--balancer");
    }
    if (!named.empty())
      throw Error(fmt::format("{} {} a packed-document workload: give it with --documents", named,
                              named.find(',') == std::string::npos ? "describes" : "describe"));
    return std::nullopt;
  }
  return make_workload(documents, packing, seed, batches);
}

nlohmann::json WorkloadFlags::to_json() const {
  return {{"documents", documents}, {"packing", packing}, {"doc_seed", seed}, {"doc_batches", batches},
          {"balancer", balancer.empty() ? std::string("own") : balancer}};
}

}  // namespace seqpar
