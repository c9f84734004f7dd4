#include "seqpar/core/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/limits.hpp"

namespace seqpar {

std::string_view to_string(Method m) {
  switch (m) {
    case Method::ulysses: return "ulysses";
    case Method::ring: return "ring";
    case Method::ring_zigzag: return "ring-zigzag";
    case Method::hybrid: return "hybrid";
    case Method::allgather: return "allgather";
    case Method::allgather_contiguous: return "allgather-contiguous";
  }
  return "?";
}

std::string_view to_string(Checkpoint c) {
  switch (c) {
    case Checkpoint::none: return "none";
    case Checkpoint::selective: return "selective";
    case Checkpoint::full: return "full";
  }
  return "?";
}

std::string_view to_string(GroupPlacement g) {
  switch (g) {
    case GroupPlacement::ulysses_inner: return "ulysses-inner";
    case GroupPlacement::ring_inner: return "ring-inner";
  }
  return "?";
}

GroupPlacement parse_placement(std::string_view s) {
  for (GroupPlacement g : {GroupPlacement::ulysses_inner, GroupPlacement::ring_inner})
    if (s == to_string(g)) return g;
  throw Error(fmt::format("placement: unknown value '{}'; expected ulysses-inner or ring-inner", s));
}

std::string method_names(std::string_view separator, std::string_view last_separator) {
  std::string out;
  for (std::size_t i = 0; i < kAllMethods.size(); ++i) {
    if (i > 0) out += i + 1 == kAllMethods.size() ? last_separator : separator;
    out += to_string(kAllMethods[i]);
  }
  return out;
}

Method parse_method(std::string_view s) {
  for (Method m : kAllMethods)
    if (s == to_string(m)) return m;
  throw Error(fmt::format("method: unknown method '{}'; expected {}", s, method_names(", ", " or ")));
}

Checkpoint parse_checkpoint(std::string_view s) {
  for (Checkpoint c : {Checkpoint::none, Checkpoint::selective, Checkpoint::full})
    if (s == to_string(c)) return c;
  throw Error(fmt::format("checkpoint: unknown value '{}'; expected none, selective or full", s));
}

Plan normalized(Plan p, int gpus_per_node) {
  switch (p.method) {
    // A method that fixes a degree fills it when it is missing, also beside a given other degree
    // (which the rules then name: "has no ring", "has no Ulysses part").
    case Method::ulysses:
      if (p.ulysses_degree == 0 || (p.ulysses_degree <= 1 && p.ring_degree <= 1)) p.ulysses_degree = p.sp;
      if (p.ring_degree == 0) p.ring_degree = 1;
      break;
    case Method::ring:
    case Method::ring_zigzag:
    case Method::allgather:
    case Method::allgather_contiguous:
      if (p.ring_degree == 0 || (p.ulysses_degree <= 1 && p.ring_degree <= 1)) p.ring_degree = p.sp;
      if (p.ulysses_degree == 0) p.ulysses_degree = 1;
      break;
    case Method::hybrid:
      if (p.ulysses_degree == 0 && p.ring_degree == 0 && p.sp > 0) {
        // The largest divisor of P that fits in a node: Ulysses inside, the ring across nodes.
        // TP groups sit innermost, so a node holds gpus_per_node / tp ranks of one SP group.
        const int in_node = std::max(1, gpus_per_node / std::max(1, p.tp));
        for (int u = std::min(p.sp, in_node); u >= 1; --u)
          if (p.sp % u == 0) {
            p.ulysses_degree = u;
            break;
          }
      }
      if (p.ulysses_degree == 0 && p.ring_degree > 0 && p.sp % p.ring_degree == 0) p.ulysses_degree = p.sp / p.ring_degree;
      if (p.ring_degree == 0 && p.ulysses_degree > 0 && p.sp % p.ulysses_degree == 0) p.ring_degree = p.sp / p.ulysses_degree;
      break;
  }
  return p;
}

std::optional<int> implied_sp(const PlanFlags& f) {
  if (f.sp) return f.sp;
  const Method method = parse_method(f.method);
  const std::optional<int> U = f.ulysses_degree, R = f.ring_degree;
  if (U && R && *U >= 1 && *R >= 1) {
    // In 64 bits: each degree is an int, so the product cannot wrap here; the bound says why it
    // is refused instead of passing a wrapped P on to the divisibility rules.
    const std::int64_t P = std::int64_t{*U} * *R;
    if (P > limits::kMaxGpus)
      throw Error(fmt::format("sp: ulysses_degree {} x ring_degree {} = {} is above the limit of {} GPUs", *U, *R, P,
                              limits::kMaxGpus));
    return static_cast<int>(P);
  }
  if (method == Method::ulysses && U && !R && *U >= 1) return U;
  if (ring_group_only(method) && R && !U && *R >= 1) return R;
  return std::nullopt;
}

Plan plan_from_flags(const PlanFlags& f, int gpus, std::int64_t seq_len, int gpus_per_node) {
  const Precision precision = f.precision.precision();
  Plan p;
  p.method = parse_method(f.method);
  p.gpus = gpus;
  p.seq_len = seq_len;
  p.tp = f.tp;
  p.pp = f.pp;
  p.vp = f.vp;
  p.ep = f.ep;
  p.precision = precision;
  // Without an SP degree, SP takes every GPU the TP groups leave (check_plan names a TP that does
  // not divide the GPUs).
  const std::optional<int> sp = implied_sp(f);
  // Without an SP degree SP takes the GPUs the TP groups leave: a TP degree that does not divide
  // the GPUs leaves no whole SP degree, and naming one (the GPU count) would cite an SP never given.
  if (!sp && f.tp >= 1 && gpus >= 1 && gpus % f.tp != 0)
    throw Error(fmt::format("tp: {} GPUs are not divisible by tp {}: the tensor-parallel groups must tile the GPUs "
                            "(without --sp, sequence parallelism takes the GPUs they leave)",
                            gpus, f.tp));
  // The same for the pipeline stages: without --sp, SP takes the GPUs the TP groups and stages leave.
  // In 64 bits: both degrees are at most 2^20.
  const std::int64_t tp_pp = std::int64_t{std::max(1, f.tp)} * std::max(1, f.pp);
  if (!sp && f.pp > 1 && gpus >= 1 && gpus % tp_pp != 0)
    throw Error(fmt::format("pp: {} GPUs are not divisible by tp {} x pp {}: the tensor-parallel groups and pipeline "
                            "stages must tile the GPUs (without --sp, sequence parallelism takes the GPUs they leave)",
                            gpus, f.tp, f.pp));
  p.sp = sp.value_or(f.tp >= 1 && gpus % tp_pp == 0 ? static_cast<int>(gpus / tp_pp) : gpus);
  p.ulysses_degree = f.ulysses_degree.value_or(0);
  p.ring_degree = f.ring_degree.value_or(0);
  p.micro_batch = f.micro_batch;
  p.grad_accum_steps = f.grad_accum_steps;
  p.placement = parse_placement(f.placement);
  // Placement orders a hybrid's two groups; the other methods have one group, so a ring-inner
  // placement would be ignored while the user believes it applied.
  if (p.placement != GroupPlacement::ulysses_inner && p.method != Method::hybrid)
    throw Error(fmt::format("placement: {} places a hybrid's Ulysses and ring groups; method {} has one group, so "
                            "--placement applies to --method hybrid only",
                            to_string(p.placement), to_string(p.method)));
  p = normalized(p, gpus_per_node);
  // A given degree stands as given (check_plan says what is wrong with it), never replaced.
  if (f.ulysses_degree) p.ulysses_degree = *f.ulysses_degree;
  if (f.ring_degree) p.ring_degree = *f.ring_degree;
  const bool u_missing = !f.ulysses_degree && p.ulysses_degree == 0, r_missing = !f.ring_degree && p.ring_degree == 0;
  if (u_missing || r_missing) {  // hybrid only: the other methods always fill their degrees
    const int known = u_missing ? p.ring_degree : p.ulysses_degree;
    if (p.sp >= 1 && known >= 1 && u_missing != r_missing)
      throw Error(fmt::format("{}: sp {} is not divisible by {} {}, so no whole {} makes ulysses_degree x "
                              "ring_degree = sp",
                              u_missing ? "ulysses_degree" : "ring_degree", p.sp, u_missing ? "ring_degree" : "ulysses_degree",
                              known, u_missing ? "Ulysses degree" : "ring degree"));
    // sp or the given degree is below 1: check_plan names that; a 0 here would only add noise.
    if (u_missing) p.ulysses_degree = 1;
    if (r_missing) p.ring_degree = 1;
  }
  return p;
}

nlohmann::json to_json(const Plan& p) {
  nlohmann::json j = {{"method", to_string(p.method)},
          {"gpus", p.gpus},
          {"seq_len", p.seq_len},
          {"sp", p.sp},
          {"tp", p.tp},
          {"dp", p.dp()},
          {"ulysses_degree", p.ulysses_degree},
          {"ring_degree", p.ring_degree},
          {"micro_batch", p.micro_batch},
          {"grad_accum_steps", p.grad_accum_steps},
          {"placement", to_string(p.placement)},
          {"zero", p.mem.zero},
          {"checkpoint", to_string(p.mem.checkpoint)},
          {"offload_checkpoints", p.mem.offload_checkpoints},
          {"offload_optimizer", p.mem.offload_optimizer},
          {"offload_params", p.mem.offload_params},
          {"tiled_mlp", p.mem.tiled_mlp},
          {"tiled_loss", p.mem.tiled_loss},
          {"fp8", fp8_parts_text(p.precision)},
          {"fp8_recipe", to_string(p.precision.recipe)}};
  // Only where pipelined: a plan without stages writes the object it always wrote (nlohmann's
  // objects keep their keys sorted, so the position is the reader's concern, not ours).
  if (p.pp != 1) j["pp"] = p.pp;
  if (p.vp != 1) j["vp"] = p.vp;
  if (p.ep != 1) j["ep"] = p.ep;  // only where experts are split: other documents stay as they were
  return j;
}

namespace {
template <typename T>
T field(const nlohmann::json& j, const char* key, T fallback, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) throw Error(fmt::format("plan: missing field '{}'", key));
    return fallback;
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("plan: field '{}' has the wrong type ({})", key, it->dump()));
  }
}

// A whole number in [lo, hi], checked before it is narrowed: nlohmann's get<int>() wraps
// 1099511627776 to 0 and truncates 8.5 to 8, and a message would then name a number the user never wrote.
template <typename T>
T count_field(const nlohmann::json& j, const char* key, T fallback, bool required, std::int64_t lo, std::int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return field<T>(j, key, fallback, required);
  if (!it->is_number()) throw Error(fmt::format("plan: field '{}' has the wrong type ({})", key, it->dump()));
  if (it->is_number_float()) {
    const double x = it->get<double>();
    if (!std::isfinite(x) || x != std::floor(x))
      throw Error(fmt::format("plan: field '{}' must be a whole number (got {})", key, it->dump()));
    if (x > static_cast<double>(hi)) throw Error(fmt::format("plan: field '{}': {} is above the limit of {}", key, it->dump(), hi));
    if (x < static_cast<double>(lo)) throw Error(fmt::format("plan: field '{}': {} must be at least {}", key, it->dump(), lo));
    return static_cast<T>(x);
  }
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw Error(fmt::format("plan: field '{}': {} is above the limit of {}", key, it->get<std::uint64_t>(), hi));
  const std::int64_t v = it->get<std::int64_t>();
  if (auto e = range_error(fmt::format("plan: field '{}'", key), v, lo, hi)) throw Error(*e);
  return static_cast<T>(v);
}

constexpr std::int64_t kIntMin = std::numeric_limits<int>::min(), kIntMax = std::numeric_limits<int>::max();
}  // namespace

Plan plan_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("plan: expected a JSON object");
  Plan p;
  p.method = parse_method(field<std::string>(j, "method", "", true));
  p.gpus = count_field<int>(j, "gpus", 0, true, 1, limits::kMaxGpus);
  p.seq_len = count_field<std::int64_t>(j, "seq_len", 0, true, 1, limits::kMaxSeqLen);
  p.sp = count_field<int>(j, "sp", 0, true, 1, limits::kMaxGpus);
  p.tp = count_field<int>(j, "tp", 1, false, 1, limits::kMaxGpus);
  p.pp = count_field<int>(j, "pp", 1, false, 1, limits::kMaxGpus);
  p.vp = count_field<int>(j, "vp", 1, false, 1, limits::kMaxGpus);
  p.ep = count_field<int>(j, "ep", 1, false, 1, limits::kMaxGpus);
  // 0: not given (normalized() fills it in).
  p.ulysses_degree = count_field<int>(j, "ulysses_degree", 0, false, 0, limits::kMaxGpus);
  p.ring_degree = count_field<int>(j, "ring_degree", 0, false, 0, limits::kMaxGpus);
  p.micro_batch = count_field<int>(j, "micro_batch", 1, false, 1, limits::kMaxMicroBatch);
  p.grad_accum_steps = count_field<int>(j, "grad_accum_steps", 1, false, 1, limits::kMaxGradAccumSteps);
  p.placement = parse_placement(field<std::string>(j, "placement", "ulysses-inner", false));
  p.mem.zero = count_field<int>(j, "zero", 1, false, kIntMin, kIntMax);  // the stage rule: check_plan
  p.mem.checkpoint = parse_checkpoint(field<std::string>(j, "checkpoint", "none", false));
  p.mem.offload_checkpoints = field<bool>(j, "offload_checkpoints", false, false);
  p.mem.offload_optimizer = field<bool>(j, "offload_optimizer", false, false);
  p.mem.offload_params = field<bool>(j, "offload_params", false, false);
  p.mem.tiled_mlp = field<bool>(j, "tiled_mlp", false, false);
  p.mem.tiled_loss = field<bool>(j, "tiled_loss", false, false);
  p.precision.fp8 = parse_fp8_parts(field<std::string>(j, "fp8", "none", false), "plan: field 'fp8'");
  p.precision.recipe = parse_fp8_recipe(field<std::string>(j, "fp8_recipe", "delayed", false), "plan: field 'fp8_recipe'");
  return p;
}

namespace {
// The pipeline's part of a label, after the SP part (the order [TP, CP, PP, DP]): " pp=16",
// " pp=8 vp=5"; empty without stages.
std::string pipeline_label(const Plan& p) {
  if (p.pp == 1 && p.vp == 1) return {};
  return p.vp != 1 ? fmt::format(" pp={} vp={}", p.pp, p.vp) : fmt::format(" pp={}", p.pp);
}
std::string pipeline_words(const Plan& p) {
  if (p.pp == 1 && p.vp == 1) return {};
  return p.vp != 1 ? fmt::format(" x PP {} (VP {})", p.pp, p.vp) : fmt::format(" x PP {}", p.pp);
}
}  // namespace

std::string describe_structure(const Plan& p) {
  // TP first: it is the innermost group, and the SP method runs over what it leaves.
  const std::string tp = p.tp != 1 ? fmt::format("tp={} ", p.tp) : std::string();
  const std::string pp = pipeline_label(p);
  // Experts last: they split the MLP, not the sequence ("ulysses sp=4 ep=8").
  const std::string ep = p.ep != 1 ? fmt::format(" ep={}", p.ep) : std::string();
  if (p.sp == 1) return (p.tp != 1 || !pp.empty() ? tp + "sp=1" : "dp-only sp=1") + pp + ep;
  if (p.method == Method::hybrid)
    return fmt::format("{}hybrid U{}xR{}{}{}{}", tp, p.ulysses_degree, p.ring_degree,
                       p.placement == GroupPlacement::ring_inner ? " ring-inner" : "", pp, ep);
  return fmt::format("{}{} sp={}{}{}", tp, to_string(p.method), p.sp, pp, ep);
}

std::string describe_in_words(const Plan& p) {
  const std::string pp = pipeline_words(p);
  const std::string ep = p.ep != 1 ? fmt::format(", EP {}", p.ep) : std::string();
  if (p.sp == 1) return (p.tp != 1 ? fmt::format("TP {}, no SP", p.tp) : std::string("no SP")) + pp + ep;
  // TP first, as in describe_structure: the innermost group.
  const std::string tp = p.tp != 1 ? fmt::format("TP {} x ", p.tp) : std::string();
  if (p.method == Method::hybrid)
    return fmt::format("{}hybrid {}x{}{}{}", tp, p.ulysses_degree, p.ring_degree,
                       p.placement == GroupPlacement::ring_inner ? " ring-inner" : "", pp, ep);
  return fmt::format("{}{} {}{}{}", tp, p.method == Method::ulysses ? "Ulysses" : to_string(p.method), p.sp, pp, ep);
}

namespace {
// Only the fields a label shows: a plan object cut down to its structure labels the same. One that
// does not parse is labelled by its "method" string alone (or "?"), so a report still shows the row.
std::string describe_json(const nlohmann::json& plan, std::string (*describe)(const Plan&)) {
  try {
    if (!plan.is_object()) throw Error("plan: expected a JSON object");
    Plan p;
    p.method = parse_method(field<std::string>(plan, "method", "", true));
    p.sp = count_field<int>(plan, "sp", 0, true, kIntMin, kIntMax);
    p.tp = count_field<int>(plan, "tp", 1, false, kIntMin, kIntMax);
    p.pp = count_field<int>(plan, "pp", 1, false, kIntMin, kIntMax);
    p.vp = count_field<int>(plan, "vp", 1, false, kIntMin, kIntMax);
    p.ep = count_field<int>(plan, "ep", 1, false, kIntMin, kIntMax);
    p.ulysses_degree = count_field<int>(plan, "ulysses_degree", 0, false, kIntMin, kIntMax);
    p.ring_degree = count_field<int>(plan, "ring_degree", 0, false, kIntMin, kIntMax);
    p.placement = parse_placement(field<std::string>(plan, "placement", "ulysses-inner", false));
    return describe(p);
  } catch (const Error&) {
    auto it = plan.is_object() ? plan.find("method") : plan.end();
    return it != plan.end() && it->is_string() ? it->get<std::string>() : std::string("?");
  }
}
}  // namespace

std::string describe_structure(const nlohmann::json& plan) {
  return describe_json(plan, [](const Plan& p) { return describe_structure(p); });
}
std::string describe_in_words(const nlohmann::json& plan) {
  return describe_json(plan, [](const Plan& p) { return describe_in_words(p); });
}

std::string describe(const MemoryOptions& m) {
  std::string s = fmt::format("zero={} ckpt={}", m.zero, to_string(m.checkpoint));
  if (m.offload_checkpoints) s += " +offload-ckpt";
  if (m.offload_optimizer) s += " +offload-opt";
  if (m.offload_params) s += " +offload-params";
  if (m.tiled_mlp) s += " +tiled-mlp";
  if (m.tiled_loss) s += " +tiled-loss";
  return s;
}

std::string describe(const Plan& p) {
  std::string s = describe_structure(p);
  if (p.micro_batch != 1) s += fmt::format(" mb={}", p.micro_batch);
  if (p.grad_accum_steps != 1) s += fmt::format(" ga={}", p.grad_accum_steps);
  if (p.precision.any_fp8())
    s += fmt::format(" fp8={}{}", fp8_parts_text(p.precision),
                     p.precision.recipe == Fp8Recipe::delayed ? "" : "/" + std::string(to_string(p.precision.recipe)));
  return s + " " + describe(p.mem);
}

}  // namespace seqpar
