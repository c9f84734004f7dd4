#include "seqpar/core/workload_flags.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <limits>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/workload.hpp"

namespace seqpar {

namespace {
// Checks on the text before CLI11 converts it (a usage error, exit 2, in every program): a seed is
// unsigned 64-bit, and CLI11 read "-1" as 18446744073709551615 (and 2^64 as some other seed); a
// batch count beyond int was "Could not convert" where the limit is the rule broken.
CLI::Validator seed_value(const char* field) {
  return CLI::Validator(
      [field](std::string& text) {
        const auto first = text.find_first_not_of(" \t");
        if (first == std::string::npos) return std::string();
        if (text[first] == '-') {
          // "-0" is 0, as every other count flag reads it (--gpus -0 is "0 must be at least 1", --top -0 is 0).
          if (text.size() > first + 1 && text.find_first_not_of('0', first + 1) == std::string::npos) {
            text = "0";
            return std::string();
          }
          return fmt::format("{}: {} is negative; give a whole number from 0", field, text);
        }
        // Decimal digits only, written back as the number: CLI11 read "010" as 8 (octal), "0x8" as 8
        // and "+8" as 8, where --gpus reads 010 as 10 and refuses the others.
        std::uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto r = std::from_chars(text.data() + first, end, v);
        if (r.ec == std::errc::result_out_of_range)
          return fmt::format("{}: {} is above the limit of {}", field, text, std::numeric_limits<std::uint64_t>::max());
        if (r.ec != std::errc() || r.ptr != end)
          return fmt::format("{}: '{}' is not a whole number; expected decimal digits, 0 to {}", field, text,
                             std::numeric_limits<std::uint64_t>::max());
        text = std::to_string(v);
        return std::string();
      },
      "");
}

CLI::Validator count_at_most(const char* field, std::int64_t max) {
  return CLI::Validator(
      [field, max](std::string& text) {
        try {  // empty, negative and zero: for the range check, which names them as cli's at_most does
          normalize_count_text(text, field, max);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "");
}
}  // namespace

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
      app->add_option("--doc-seed", f.seed, "Seed of the sampled document stream")
          ->capture_default_str()
          ->transform(seed_value("doc-seed")),
      app->add_option("--doc-batches", f.batches, "Packed sequences sampled")
          ->capture_default_str()
          ->transform(count_at_most("doc-batches", kMaxDocBatches))};
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
