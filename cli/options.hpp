// The options the subcommands share (README): model, system, GPUs, sequence length, plan
// degrees, memory options, --json; and the envelope every JSON document carries.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/core/memory_flags.hpp"
#include "seqpar/core/plan.hpp"

namespace seqpar::cli {

// --global-batch-tokens / --global-batch: the batch of one optimizer step (counts such as 4M), as given.
struct BatchOptions {
  std::string tokens, sequences;
};
// Registers the two flags (advise and maxlen through add_search; sweep itself). cli/global_batch.cpp.
void add_batch(CLI::App* app, BatchOptions& o);
// The batch they name, or nullopt when neither is given; seqpar::Error naming the flag for a bad count.
std::optional<sim::GlobalBatch> global_batch(const BatchOptions& o);
// For the documents and the table headers: {"tokens", "sequences"} at `seq_len` (tokens null when
// only sequences were given and no length is known, seq_len 0), or null without a batch; and
// ", global batch 4M tokens = 32 sequences per optimizer step" (empty without one).
nlohmann::json batch_json(const std::optional<sim::GlobalBatch>& b, std::int64_t seq_len);
std::string batch_text(const std::optional<sim::GlobalBatch>& b, std::int64_t seq_len);

struct CommonOptions {
  std::string model = "llama3-8b";
  std::string system = "dgx-h100";
  std::string attention_kernel;  // empty: the GPU preset's default (sim/attention_kernels.hpp)
  bool json = false;
  std::string framework;         // empty: the system profile's, else the default (sim/framework.hpp)
};

// --method, --sp, --tp, --ulysses-degree, --ring-degree, --micro-batch as given (seqpar::plan_from_flags
// turns them into a plan, the same way for every program).
using PlanOptions = seqpar::PlanFlags;

// The memory flags, registered once for every program (seqpar/core/memory_flags.hpp).
using MemoryFlags = seqpar::MemoryFlags;

// What advise and maxlen search: all plans, or those of one method / SP degree / Ulysses degree.
struct SearchOptions {
  int gpus = 8;
  std::string method;
  std::optional<int> sp, ulysses_degree;  // nullopt: not given, search them all
  std::optional<int> tp;                  // nullopt: every TP degree sim::tp_degrees gives
  std::optional<int> pp, vp;              // nullopt: with a global batch every count sim::pp_degrees / vp_degrees give
  std::optional<int> ep;                  // nullopt: every EP degree sim::ep_degrees gives
  std::optional<int> micro_batch;         // nullopt: 1, or every micro-batch that fills a global batch
  BatchOptions batch;
  seqpar::PrecisionFlags precision;       // --fp8 fixes it; --allow-fp8 searches bf16 and the framework's FP8
};

void add_common(CLI::App* app, CommonOptions& o);
void add_search(CLI::App* app, SearchOptions& o);
// The search space the flags name, checked by sim::check_search (seqpar::Error naming the field).
// Memory flags given fix the options, on top of the framework's defaults (sim::default_memory_options).
sim::SearchSpace search_space(const SearchOptions& o, const MemoryFlags& m, const sim::System& s);
void add_plan(CLI::App* app, PlanOptions& o);
void add_memory(CLI::App* app, MemoryFlags& m);

sim::Model load_model(const CommonOptions& o);
sim::System load_system(const std::string& name_or_path);
// --system with --attention-kernel's figures (an unknown kernel is refused naming the GPU's kernels).
sim::System load_system(const CommonOptions& o);
// The system with its framework profile, refused (seqpar::Error) when the profile does not
// describe the model's block: one message, before any plan is searched.
// With pipeline stages asked for (`pp` > 1) and a default framework that has none (not named with
// --framework, not a calibrated profile's), megatron-core, the framework that runs them, saying so.
sim::System load_system(const CommonOptions& o, const sim::Model& m, int pp = 1);
// What the commands inferred, printed once: "framework seqpar-train (--framework), attention kernel
// cudnn (seqpar-train runs it)".
std::string inferred_text(const sim::System& s);
// The precisions a search tries, as a line for advise and maxlen: "" for bf16 alone by default;
// the fixed one (--fp8); bf16 and the framework's FP8 sets (--allow-fp8), or why there are none.
std::string precision_text(const sim::SearchSpace& space, const sim::System& s, const seqpar::PrecisionFlags& f);
// Registers --attention-kernel (add_common does; sweep, with its own options, calls it itself).
void add_attention_kernel(CLI::App* app, std::string& kernel);
void add_framework(CLI::App* app, std::string& framework);

// A normalized plan from the flags (seqpar::plan_from_flags; validity is the simulator's to check).
seqpar::Plan make_plan(const PlanOptions& o, const MemoryFlags& m, int gpus, std::int64_t seq_len, const sim::System& s);

// For an integer option (--gpus, --sp, the degrees, --micro-batch): checks the text before CLI11
// converts it, so a value above `max` (99999999999 included, which CLI11 would call "Could not
// convert") is "<field>: <value> is above the limit of <max>" (seqpar::Error, exit 2). Zero and
// negative values pass on to the plan rules, which name them.
CLI::Validator at_most(const char* field, std::int64_t max);

// --seq-len: a count (128K, 1M) of at most sim::limits::kMaxSeqLen tokens; `field` names it.
std::int64_t parse_seq_len(const std::string& text, const char* field = "seq_len");

// {schema_version, tool_version, command, host, created_utc, kind: "prediction", program, mode: "modelled"}
nlohmann::json document(const std::string& program);
void print_json(const nlohmann::json& j);
// A document already written to `path` (sweep.json), printed byte for byte as print_json would
// print it, without holding it in memory; a capturing run (the Python module) gets it parsed.
void print_json_file(const std::string& path);

}  // namespace seqpar::cli

namespace seqpar::cli {
// Runs a subcommand body. A seqpar::Error becomes, with --json, a document with valid=false and
// the message in errors (exit 2); without it, the message on stderr (exit 2).
void guarded(bool json, const std::string& program, const std::function<void()>& body);

// The exit status of a command that answered nothing (README "Exit codes", one rule for every
// command): 1 when some plan breaks no rule but none fits (a valid question without an answer), 2
// when no plan is valid (the question can never be answered as asked).
[[noreturn]] void no_answer(bool some_plan_valid);
}  // namespace seqpar::cli
