// The plan vocabulary of core (plan.hpp, plan_validity.hpp): names, JSON, flags, labels and the
// model-free rules. Moved here from tests/sim when the plan moved into core; the simulator's
// tests keep the rules that need a model.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/limits.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/core/plan_validity.hpp"

namespace seqpar {
namespace {

Plan plan(Method m, int gpus, std::int64_t seq, int sp, int u, int r) {
  Plan p;
  p.method = m;
  p.gpus = gpus;
  p.seq_len = seq;
  p.sp = sp;
  p.ulysses_degree = u;
  p.ring_degree = r;
  return p;
}

TEST(PlanLabels, OneSpellingPerStructure) {
  EXPECT_EQ(describe_structure(plan(Method::ulysses, 8, 1 << 16, 8, 8, 1)), "ulysses sp=8");
  EXPECT_EQ(describe_structure(plan(Method::ring_zigzag, 8, 1 << 16, 4, 1, 4)), "ring-zigzag sp=4");
  EXPECT_EQ(describe_structure(plan(Method::hybrid, 8, 1 << 16, 8, 4, 2)), "hybrid U4xR2");
  // SP = 1 is data parallelism whatever the method says: one label for all of them.
  for (Method m : kAllMethods) EXPECT_EQ(describe_structure(plan(m, 8, 1 << 16, 1, 1, 1)), "dp-only sp=1");
  EXPECT_EQ(describe_structure(plan(Method::allgather, 8, 1 << 16, 8, 1, 8)), "allgather sp=8");
  EXPECT_EQ(describe_structure(plan(Method::allgather_contiguous, 8, 1 << 16, 4, 1, 4)), "allgather-contiguous sp=4");
  Plan p = plan(Method::hybrid, 8, 1 << 16, 8, 4, 2);
  p.mem.checkpoint = Checkpoint::full;
  p.mem.tiled_mlp = true;
  EXPECT_EQ(describe(p), "hybrid U4xR2 zero=1 ckpt=full +tiled-mlp");
}

TEST(PlanLabels, InWordsForTheReportsAnswers) {
  EXPECT_EQ(describe_in_words(plan(Method::ulysses, 64, 1 << 17, 8, 8, 1)), "Ulysses 8");
  EXPECT_EQ(describe_in_words(plan(Method::ring_zigzag, 64, 1 << 17, 8, 1, 8)), "ring-zigzag 8");
  Plan h = plan(Method::hybrid, 64, 1 << 17, 8, 4, 2);
  EXPECT_EQ(describe_in_words(h), "hybrid 4x2");
  h.placement = GroupPlacement::ring_inner;
  EXPECT_EQ(describe_in_words(to_json(h)), "hybrid 4x2 ring-inner");
  EXPECT_EQ(describe_in_words(plan(Method::ring, 8, 1 << 16, 1, 1, 1)), "no SP");
  // Tensor parallelism first, as describe_structure puts it.
  Plan t = plan(Method::ulysses, 64, 1 << 17, 4, 4, 1);
  t.tp = 2;
  EXPECT_EQ(describe_in_words(t), "TP 2 x Ulysses 4");
  EXPECT_EQ(describe_in_words(to_json(t)), "TP 2 x Ulysses 4");
  t.sp = 1;
  EXPECT_EQ(describe_in_words(t), "TP 2, no SP");
  EXPECT_EQ(describe_in_words(nlohmann::json{{"method", "ulysses"}}), "ulysses");  // unreadable: the method alone
}

TEST(PlanLabels, JsonPlansLabelTheSameAsPlans) {
  const Plan p = plan(Method::hybrid, 16, 1 << 16, 8, 2, 4);
  EXPECT_EQ(describe_structure(to_json(p)), describe_structure(p));
  // Only the structure fields are needed (a report may carry a cut-down plan).
  EXPECT_EQ(describe_structure(nlohmann::json{{"method", "ring"}, {"sp", 1}}), "dp-only sp=1");
  EXPECT_EQ(describe_structure(nlohmann::json{{"method", "ulysses"}, {"sp", 4}}), "ulysses sp=4");
  // What does not parse is labelled by its method alone, or "?".
  EXPECT_EQ(describe_structure(nlohmann::json{{"method", "spiral"}, {"sp", 4}}), "spiral");
  EXPECT_EQ(describe_structure(nlohmann::json{{"method", "ring"}}), "ring");
  EXPECT_EQ(describe_structure(nlohmann::json::array()), "?");
}

TEST(PlanJson, KeysAreCoresOneList) {
  // to_json writes kPlanJsonKeys plus the derived "dp", "pp", "vp" and "ep" only where not 1 (a plan
  // without stages or split experts reads as it did before they existed); a reader keeping the kPlanJsonKeys it
  // finds loses nothing plan_from_json needs.
  auto keys = [](const nlohmann::json& j) {
    std::set<std::string> out;
    for (const auto& [k, v] : j.items()) out.insert(k);
    return out;
  };
  std::set<std::string> listed;
  for (std::string_view k : kPlanJsonKeys) listed.insert(std::string(k));
  listed.insert("dp");
  std::set<std::string> unpipelined = listed;  // and without experts split
  for (const char* k : {"pp", "vp", "ep"}) unpipelined.erase(k);
  EXPECT_EQ(keys(to_json(plan(Method::ulysses, 8, 1 << 16, 8, 8, 1))), unpipelined);
  Plan staged = plan(Method::ulysses, 64, 1 << 16, 8, 8, 1);
  staged.pp = 4;
  staged.vp = 2;
  staged.grad_accum_steps = 8;
  staged.ep = 2;
  EXPECT_EQ(keys(to_json(staged)), listed);
  for (Plan p : {plan(Method::hybrid, 32, 1 << 20, 16, 8, 2), staged}) {
    p.mem.offload_optimizer = true;
    p.placement = GroupPlacement::ring_inner;  // not the default, so a list without it would lose it
    p.ep = 4;
    const nlohmann::json full = to_json(p);
    nlohmann::json cut;
    for (std::string_view k : kPlanJsonKeys)
      if (full.contains(std::string(k))) cut[std::string(k)] = full[std::string(k)];
    EXPECT_EQ(plan_from_json(cut), p);
  }
}

TEST(PlanJson, PipelineStagesRoundTripAndLabel) {
  Plan p = plan(Method::allgather, 16384, 1 << 17, 16, 1, 16);
  p.tp = 8;
  p.pp = 16;
  p.grad_accum_steps = 16;
  EXPECT_EQ(p.dp(), 8);  // 16384 / (8 x 16 x 16)
  EXPECT_EQ(to_json(p)["pp"], 16);
  EXPECT_FALSE(to_json(p).contains("vp"));
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  EXPECT_EQ(describe_structure(p), "tp=8 allgather sp=16 pp=16");
  EXPECT_EQ(describe_structure(to_json(p)), "tp=8 allgather sp=16 pp=16");
  p.vp = 4;
  EXPECT_EQ(describe_structure(p), "tp=8 allgather sp=16 pp=16 vp=4");
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  nlohmann::json bad = to_json(p);
  bad["pp"] = 0;
  EXPECT_THROW((void)plan_from_json(bad), Error);
}

// Expert parallelism (issue 37): a plan without it writes the document it wrote before; with it,
// "ep" in the JSON and in the labels, read back, and its layout rule checked.
TEST(PlanExperts, EpWrittenOnlyWhereNotOneAndChecked) {
  Plan p = plan(Method::ulysses, 16, 1 << 16, 4, 4, 1);
  EXPECT_FALSE(to_json(p).contains("ep"));
  EXPECT_EQ(describe_structure(p), "ulysses sp=4");
  p.ep = 8;
  EXPECT_EQ(to_json(p)["ep"], 8);
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  EXPECT_EQ(describe_structure(p), "ulysses sp=4 ep=8");
  EXPECT_EQ(describe_in_words(p), "Ulysses 4, EP 8");
  EXPECT_EQ(describe_structure(to_json(p)), "ulysses sp=4 ep=8");
  std::vector<std::string> errors;
  EXPECT_TRUE(check_plan_structure(p, errors)) << (errors.empty() ? "" : errors[0]);
  // ep divides the data x sequence parallel ranks (16 / tp 1 = 16): 8 does, 3 does not; with tp 4
  // the 4 such ranks cannot hold an EP group of 8.
  p.ep = 3;
  errors.clear();
  EXPECT_FALSE(check_plan_structure(p, errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("ep: 3 does not divide the 16 data x sequence parallel ranks"), std::string::npos) << errors[0];
  p = plan(Method::ulysses, 16, 1 << 16, 4, 4, 1);
  p.tp = 4;
  p.ep = 8;
  errors.clear();
  EXPECT_FALSE(check_plan_structure(p, errors));
  EXPECT_NE(errors.back().find("ep: 8 does not divide the 4 data x sequence parallel ranks (gpus 16 / tp 4)"),
            std::string::npos) << errors.back();
  nlohmann::json j = to_json(plan(Method::ulysses, 8, 1 << 16, 8, 8, 1));
  j["ep"] = 0;
  EXPECT_THROW(plan_from_json(j), Error);
}

TEST(PlanPlacement, RecordedInJsonLabelsAndFlags) {
  Plan p = plan(Method::hybrid, 16, 1 << 16, 16, 4, 4);
  EXPECT_EQ(to_json(p)["placement"], "ulysses-inner");
  EXPECT_EQ(describe_structure(p), "hybrid U4xR4");  // the default placement keeps the old label
  p.placement = GroupPlacement::ring_inner;
  EXPECT_EQ(to_json(p)["placement"], "ring-inner");
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  EXPECT_EQ(describe_structure(p), "hybrid U4xR4 ring-inner");
  EXPECT_EQ(describe_structure(to_json(p)), "hybrid U4xR4 ring-inner");
  // A plan written before the field existed reads as the old behaviour, Ulysses inside nodes.
  nlohmann::json old = to_json(p);
  old.erase("placement");
  EXPECT_EQ(plan_from_json(old).placement, GroupPlacement::ulysses_inner);
  old["placement"] = "diagonal";
  try {
    (void)plan_from_json(old);
    ADD_FAILURE() << "an unknown placement was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "placement: unknown value 'diagonal'; expected ulysses-inner or ring-inner");
  }
  PlanFlags f;
  f.method = "hybrid";
  f.ulysses_degree = 4;
  f.placement = "ring-inner";
  EXPECT_EQ(plan_from_flags(f, 16, 1 << 16, 8).placement, GroupPlacement::ring_inner);
}

TEST(PlanRules, HeadsTakePlainCounts) {
  std::vector<std::string> errors;
  EXPECT_TRUE(check_heads(32, 8, 8, errors));   // KV heads split
  EXPECT_TRUE(check_heads(32, 8, 16, errors));  // KV heads replicated
  EXPECT_TRUE(errors.empty());
  EXPECT_FALSE(check_heads(4, 2, 3, errors));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "heads: 4 query heads are not divisible by the Ulysses degree 3");
  EXPECT_EQ(errors[1].rfind("kv_heads: 2 KV heads and Ulysses degree 3: neither divides the other", 0), 0u);
  errors.clear();
  EXPECT_FALSE(check_heads(4, 2, 0, errors));  // no division by zero: the degree is named
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "ulysses_degree: 0 must be at least 1");
  errors.clear();
  EXPECT_FALSE(check_heads(4, 0, 2, errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "kv_heads: 0 must be at least 1");
}

TEST(PlanRules, GranularityIsTwoPForZigzag) {
  EXPECT_EQ(seq_granularity(plan(Method::ulysses, 8, 0, 8, 8, 1)), 8);
  EXPECT_EQ(seq_granularity(plan(Method::ring, 8, 0, 8, 1, 8)), 8);
  EXPECT_EQ(seq_granularity(plan(Method::ring_zigzag, 8, 0, 8, 1, 8)), 16);
  EXPECT_EQ(seq_granularity(plan(Method::hybrid, 8, 0, 8, 4, 2)), 16);
  // All-gather KV: head/tail chunks are 2P of them; without load balancing one per rank.
  EXPECT_EQ(seq_granularity(plan(Method::allgather, 8, 0, 8, 1, 8)), 16);
  EXPECT_EQ(seq_granularity(plan(Method::allgather_contiguous, 8, 0, 8, 1, 8)), 8);
}

PlanFlags flags(const char* method, std::optional<int> sp, std::optional<int> u, std::optional<int> r);

TEST(PlanRules, AllGatherSplitsTheSequenceOverItsRingGroupAlone) {
  for (const char* name : {"allgather", "allgather-contiguous"}) {
    const Method m = parse_method(name);
    EXPECT_EQ(to_string(m), name);
    EXPECT_TRUE(ring_group_only(m));
    EXPECT_TRUE(kv_allgather(m));
    const Plan p = plan_from_flags(flags(name, 8, {}, {}), 16, 1 << 16, 8);
    EXPECT_EQ(p.ulysses_degree, 1) << name;
    EXPECT_EQ(p.ring_degree, 8) << name;
    EXPECT_EQ(p.dp(), 2) << name;
    EXPECT_EQ(plan_from_flags(flags(name, {}, {}, 4), 16, 1 << 16, 8).sp, 4) << name;  // --ring-degree gives P
    EXPECT_EQ(plan_from_json(to_json(p)), p) << name;
    std::vector<std::string> errors;
    EXPECT_TRUE(check_plan_structure(p, errors)) << name;
    // A Ulysses part is refused, without pointing at hybrid (which rings, not gathers).
    EXPECT_FALSE(check_plan_structure(plan(m, 8, 1 << 16, 8, 2, 4), errors));
    ASSERT_FALSE(errors.empty());
    EXPECT_EQ(errors.back(), fmt::format("ulysses_degree: method {} has no Ulysses part (got 2)", name));
  }
  EXPECT_TRUE(plan(Method::allgather, 8, 0, 8, 1, 8).zigzag());
  EXPECT_FALSE(plan(Method::allgather_contiguous, 8, 0, 8, 1, 8).zigzag());
  for (Method m : {Method::ulysses, Method::hybrid}) EXPECT_FALSE(ring_group_only(m));
  for (Method m : {Method::ring, Method::ring_zigzag, Method::hybrid}) EXPECT_FALSE(kv_allgather(m));
  std::vector<std::string> errors;
  EXPECT_FALSE(check_plan_structure(plan(Method::allgather, 8, 8 * 1001, 8, 1, 8), errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "seq_len: 8008 is not divisible by 16 (head/tail load balancing splits it into 2 x sp chunks); "
                       "pad the sequence to 8016");
}

TEST(PlanNames, OneListForMessagesHelpAndDefaults) {
  EXPECT_EQ(method_names(","), "ulysses,ring,ring-zigzag,hybrid,allgather,allgather-contiguous");
  EXPECT_EQ(method_names(", ", " or "), "ulysses, ring, ring-zigzag, hybrid, allgather or allgather-contiguous");
  try {
    (void)parse_method("all-gather");
    ADD_FAILURE() << "an unknown method was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "method: unknown method 'all-gather'; expected ulysses, ring, ring-zigzag, hybrid, allgather "
                           "or allgather-contiguous");
  }
  for (Method m : kAllMethods) EXPECT_EQ(parse_method(to_string(m)), m);
}

TEST(PlanJson, RoundTripsAndRejectsBadFields) {
  Plan p = plan(Method::hybrid, 32, 1 << 20, 16, 8, 2);
  p.mem.zero = 3;
  p.mem.checkpoint = Checkpoint::full;
  p.mem.tiled_loss = true;
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  nlohmann::json j = to_json(p);
  j["method"] = "spiral";
  EXPECT_THROW(plan_from_json(j), Error);
  j = to_json(p);
  j["sp"] = "sixteen";
  EXPECT_THROW(plan_from_json(j), Error);
  j = to_json(p);
  j.erase("gpus");
  EXPECT_THROW(plan_from_json(j), Error);
}

TEST(PlanNormalize, FillsTheDegreesTheMethodFixes) {
  Plan p = plan(Method::ulysses, 8, 1 << 16, 8, 0, 0);
  EXPECT_EQ(normalized(p, 8).ulysses_degree, 8);
  p.method = Method::ring_zigzag;
  EXPECT_EQ(normalized(p, 8).ring_degree, 8);
  p = plan(Method::hybrid, 32, 1 << 16, 32, 0, 0);
  const Plan h = normalized(p, 8);
  EXPECT_EQ(h.ulysses_degree, 8);  // Ulysses inside a node
  EXPECT_EQ(h.ring_degree, 4);
  p.ring_degree = 8;
  EXPECT_EQ(normalized(p, 8).ulysses_degree, 4);
}

TEST(PlanRules, StructureRulesNeedNoModel) {
  std::vector<std::string> errors;
  EXPECT_TRUE(check_plan_structure(plan(Method::ulysses, 64, 1 << 16, 64, 64, 1), errors));  // heads are not its rule
  EXPECT_FALSE(check_plan_structure(plan(Method::ulysses, 12, 1 << 16, 8, 8, 1), errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("gpus: 12 GPUs are not divisible by sp 8", 0), 0u);
}

PlanFlags flags(const char* method, std::optional<int> sp, std::optional<int> u, std::optional<int> r) {
  PlanFlags f;
  f.method = method;
  f.sp = sp;
  f.ulysses_degree = u;
  f.ring_degree = r;
  return f;
}

TEST(PlanFromFlags, InfersSpTheSameWayForEveryProgram) {
  // sp omitted: U x R when both are given; U for ulysses; R for rings; else every GPU.
  Plan p = plan_from_flags(flags("hybrid", {}, 2, 2), 8, 1 << 16, 8);
  EXPECT_EQ(p.sp, 4);
  EXPECT_EQ(p.dp(), 2);
  EXPECT_EQ(plan_from_flags(flags("ulysses", {}, 4, {}), 8, 1 << 16, 8).sp, 4);
  EXPECT_EQ(plan_from_flags(flags("ring-zigzag", {}, {}, 2), 8, 1 << 16, 8).sp, 2);
  p = plan_from_flags(flags("ring", {}, {}, {}), 8, 1 << 16, 8);
  EXPECT_EQ(p.sp, 8);
  EXPECT_EQ(p.ring_degree, 8);
  EXPECT_EQ(p.ulysses_degree, 1);
  // Hybrid without degrees: the largest divisor of P within a node.
  p = plan_from_flags(flags("hybrid", 12, {}, {}), 12, 1 << 16, 8);
  EXPECT_EQ(p.ulysses_degree, 6);
  EXPECT_EQ(p.ring_degree, 2);
  // One degree given: the other from P.
  p = plan_from_flags(flags("hybrid", 16, {}, 4), 16, 1 << 16, 8);
  EXPECT_EQ(p.ulysses_degree, 4);
}

// --tp 3 on 8 GPUs without --sp: the TP groups cannot tile the GPUs, and the message says so
// without citing an SP degree the user never gave.
TEST(PlanFromFlags, ATpThatDoesNotDivideTheGpusIsNamedAlone) {
  PlanFlags f = flags("ulysses", {}, {}, {});
  f.tp = 3;
  try {
    plan_from_flags(f, 8, 1 << 16, 8);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tp: 8 GPUs are not divisible by tp 3"), std::string::npos) << m;
    EXPECT_EQ(m.find("sp 8"), std::string::npos) << m;
  }
  f.sp = 2;  // given: the rules name it (check_plan)
  EXPECT_NO_THROW(plan_from_flags(f, 8, 1 << 16, 8));
}

TEST(PlanFromFlags, NeverOverridesAGivenFlag) {
  // --method ulysses --sp 8 --ulysses-degree 1: kept, so the rules can say it is wrong.
  const Plan p = plan_from_flags(flags("ulysses", 8, 1, {}), 8, 1 << 16, 8);
  EXPECT_EQ(p.ulysses_degree, 1);
  std::vector<std::string> errors;
  EXPECT_FALSE(check_plan_structure(p, errors));
  // A negative degree stays negative and is named, without noise about the degree it left open.
  errors.clear();
  EXPECT_FALSE(check_plan_structure(plan_from_flags(flags("hybrid", 8, -4, {}), 8, 1 << 16, 8), errors));
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0], "ulysses_degree: -4 must be at least 1");
}

TEST(PlanFromFlags, AFixedDegreeMethodNamesTheOtherDegreeItHasNot) {
  // --method allgather --sp 8 --ulysses-degree 2: R is the method's (8), and the rules say why U is wrong.
  std::vector<std::string> errors;
  Plan p = plan_from_flags(flags("allgather", 8, 2, {}), 8, 1 << 16, 8);
  EXPECT_EQ(p.ring_degree, 8);
  EXPECT_FALSE(check_plan_structure(p, errors));
  EXPECT_EQ(errors.back(), "ulysses_degree: method allgather has no Ulysses part (got 2)");
  errors.clear();
  p = plan_from_flags(flags("ulysses", 8, {}, 2), 8, 1 << 16, 8);
  EXPECT_EQ(p.ulysses_degree, 8);
  EXPECT_FALSE(check_plan_structure(p, errors));
  EXPECT_EQ(errors.back(), "ring_degree: method ulysses has no ring (got 2); use --method hybrid");
}

TEST(PlanFromFlags, RefusesWhatItCannotInfer) {
  try {
    plan_from_flags(flags("hybrid", 8, 3, {}), 8, 1 << 16, 8);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ring_degree: sp 8 is not divisible by ulysses_degree 3"), std::string::npos) << e.what();
  }
  try {
    plan_from_flags(flags("hybrid", {}, 4, 1073741825), 8, 1 << 16, 8);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("above the limit of 1048576"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_from_flags(flags("spiral", {}, {}, {}), 8, 1 << 16, 8), Error);
}

TEST(PlanTensorParallel, HeadRulesOverTheHeadsATpRankHolds) {
  std::vector<std::string> errors;
  // Ulysses over the heads of one TP rank: 32 / tp 4 = 8, U 8 divides them, U 16 does not.
  EXPECT_TRUE(check_heads(32, 8, 4, 8, errors));
  EXPECT_FALSE(check_heads(32, 8, 4, 16, errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("8 query heads per TP rank (32 / tp 4)"), std::string::npos) << errors[0];
  // KV heads: split over TP (8 / 4 = 2, replicated over U 8), or replicated when tp exceeds them.
  EXPECT_EQ(kv_heads_per_tp_rank(8, 4), 2);
  EXPECT_EQ(kv_heads_per_tp_rank(8, 16), 1);
  EXPECT_EQ(kv_heads_per_tp_rank(8, 1), 8);
  errors.clear();
  EXPECT_TRUE(check_heads(32, 8, 16, 2, errors));  // 2 query heads and 1 KV head per rank, U 2
  // Neither dividing: named with Megatron-Core's rule; heads not dividing tp: named.
  EXPECT_FALSE(check_heads(24, 6, 4, 1, errors));
  EXPECT_NE(errors.back().find("kv_heads: 6 KV heads and tensor-parallel degree 4"), std::string::npos);
  errors.clear();
  EXPECT_FALSE(check_heads(24, 8, 16, 1, errors));
  EXPECT_NE(errors.front().find("not divisible by the tensor-parallel degree 16"), std::string::npos);
  errors.clear();
  EXPECT_FALSE(check_heads(24, 8, 0, 1, errors));  // no division by zero: the degree is named
  EXPECT_NE(errors.front().find("tp: 0"), std::string::npos);
  // Without TP the rules are the plain ones.
  errors.clear();
  EXPECT_EQ(check_heads(32, 8, 1, 16, errors), check_heads(32, 8, 16, errors));
}

TEST(PlanTensorParallel, StructureFlagsAndNormalization) {
  Plan p;
  p.method = Method::ring;
  p.gpus = 48;
  p.tp = 4;
  p.sp = p.ring_degree = 8;
  p.seq_len = 1 << 16;
  std::vector<std::string> errors;
  EXPECT_FALSE(check_plan_structure(p, errors));  // 48 / (4 x 8) is not whole
  EXPECT_NE(errors.front().find("not divisible by tp 4 x sp 8"), std::string::npos) << errors.front();
  p.gpus = 64;
  EXPECT_EQ(p.dp(), 2);
  EXPECT_EQ(seq_granularity(p), 32);  // one shard per SP rank, split again over the TP ranks
  errors.clear();
  p.tp = limits::kMaxGpus + 1;
  EXPECT_FALSE(check_plan_structure(p, errors));
  EXPECT_NE(errors.front().find("tp"), std::string::npos);
  // Flags: without --sp, SP takes the GPUs the TP groups leave; a hybrid's Ulysses stays inside
  // the node beside its TP group (8 GPUs per node / tp 2 = 4).
  PlanFlags f;
  f.method = "hybrid";
  f.tp = 2;
  const Plan q = plan_from_flags(f, 32, 1 << 16, 8);
  EXPECT_EQ(q.tp, 2);
  EXPECT_EQ(q.sp, 16);
  EXPECT_EQ(q.ulysses_degree, 4);
  EXPECT_EQ(q.ring_degree, 4);
  EXPECT_EQ(q.dp(), 1);
  EXPECT_EQ(describe(q), "tp=2 hybrid U4xR4 zero=1 ckpt=none");
}

}  // namespace
}  // namespace seqpar
