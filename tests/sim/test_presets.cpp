#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <unistd.h>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

// Every number in a preset must sit in {"value": x, "source": "..."} with a non-empty source, or
// in an entry that names its own source (a framework profile's tensor: its widths and bytes are
// the one thing its source describes; a GPU's varlen_attention: its lengths and rates are one
// measurement).
void expect_sourced(const json& j, const std::string& where) {
  if (j.is_object()) {
    if (j.contains("value")) {
      ASSERT_TRUE(j.contains("source") && j["source"].is_string() && !j["source"].get<std::string>().empty())
          << where << ": a figure without a source";
      return;
    }
    if ((j.contains("name") || j.contains("lengths")) && j.contains("source") && j["source"].is_string()) {
      EXPECT_FALSE(j["source"].get<std::string>().empty()) << where << ": an entry with an empty source";
      return;
    }
    for (auto it = j.begin(); it != j.end(); ++it) expect_sourced(it.value(), where + "." + it.key());
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) expect_sourced(j[i], where + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_FALSE(j.is_number()) << where << ": a bare number, with no source beside it";
  }
}

TEST(Presets, EveryFigureNamesItsSource) {
  ASSERT_FALSE(builtin_presets().empty());
  for (const auto& p : builtin_presets()) expect_sourced(p.document, p.kind + ":" + p.name);
}

TEST(Presets, TheNamesOfTheDesignExistAndLoad) {
  for (const char* g : {"a100-40g", "a100-80g", "a800-80g", "h100-sxm", "h800", "h200", "l20"})
    EXPECT_NO_THROW(load_gpu(g)) << g;
  for (const char* s : {"dgx-a100-40g", "dgx-a100-80g", "a800-nvlink", "dgx-h100", "h800-nvlink", "hgx-h200", "l20-pcie"})
    EXPECT_NO_THROW(load_system(s)) << s;
  for (const char* m : {"llama2-7b", "llama3-8b", "llama3-70b", "gpt-1.3b", "gpt-30b"}) EXPECT_NO_THROW(load_model(m)) << m;
  bool few_kv = false;
  for (const auto& p : builtin_presets())
    if (p.kind == "model") few_kv |= load_model(p.name).kv_heads <= 4;
  EXPECT_TRUE(few_kv) << "no model preset with few KV heads";
}

TEST(Presets, AllBuiltInsLoadAndNamesAreUnique) {
  std::set<std::string> seen;
  for (const auto& p : builtin_presets()) {
    EXPECT_TRUE(seen.insert(p.kind + "/" + p.name).second) << "duplicate " << p.name;
    if (p.kind == "gpu") {
      EXPECT_NO_THROW(load_gpu(p.name));
    } else if (p.kind == "system") {
      EXPECT_NO_THROW(load_system(p.name));
    } else if (p.kind == "framework") {
      EXPECT_NO_THROW(load_framework(p.name));
    } else {
      EXPECT_NO_THROW(load_model(p.name));
    }
  }
}

TEST(Presets, PcieSystemModelsItsTopologyAndNvlinkSystemsDoNot) {
  System l20 = load_system("l20-pcie");
  EXPECT_EQ(l20.intra.kind, LinkKind::pcie);
  EXPECT_GT(l20.intra.gpus_per_socket, 0);
  EXPECT_GT(l20.intra.cross_socket_bytes_per_s, 0);
  System h100 = load_system("dgx-h100");
  EXPECT_NE(h100.intra.kind, LinkKind::pcie);
  EXPECT_GT(h100.intra.bytes_per_s, 5 * l20.intra.bytes_per_s);
  EXPECT_GT(h100.intra.bytes_per_s, h100.inter.bytes_per_s);  // the NIC share is the slower level
}

TEST(Presets, Llama3_8bParameterCountMatchesTheHandCount) {
  // Per layer: q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 + MLP 3*4096*14336 + 2 norms of 4096.
  const std::int64_t layer = 16777216 + 8388608 + 16777216 + 176160768 + 8192;
  const std::int64_t embed = 2 * std::int64_t{128256} * 4096 + 4096;
  Model m = load_model("llama3-8b");
  EXPECT_EQ(m.params_per_layer(), layer);
  EXPECT_EQ(m.total_params(), 32 * layer + embed);  // 8.03 B
}

TEST(Presets, UnknownNameListsTheKnownOnes) {
  try {
    load_system("dgx-z9000");
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("dgx-z9000"), std::string::npos);
    EXPECT_NE(msg.find("dgx-h100"), std::string::npos);
  }
}

std::string write_temp(const std::string& text) {
  char name[] = "/tmp/seqpar_preset_XXXXXX.json";
  int fd = mkstemps(name, 5);
  EXPECT_GE(fd, 0);
  std::ofstream(name) << text;
  close(fd);
  return name;
}

TEST(Presets, MalformedAndIncompleteFilesGiveClearErrors) {
  const std::string bad = write_temp("{ \"name\": \"x\", ");
  try {
    load_model(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos) << e.what();
  }
  const std::string missing = write_temp(R"({"name": "m", "layers": 2, "hidden": 8, "heads": 2, "kv_heads": 2, "head_dim": 4, "vocab": 10})");
  try {
    load_model(missing);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ffn_hidden"), std::string::npos) << e.what();
  }
  const std::string negative = write_temp(R"({"name": "m", "layers": -2, "hidden": 8, "heads": 2, "kv_heads": 2, "head_dim": 4, "ffn_hidden": 16, "vocab": 10})");
  try {
    load_model(negative);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model("/nonexistent/model.json"), Error);
  std::remove(bad.c_str());
  std::remove(missing.c_str());
  std::remove(negative.c_str());
}

TEST(Presets, ASystemFileMayCarryItsGpuInlineAsCalibratedProfilesDo) {
  json sys = builtin_presets().front().document;
  for (const auto& p : builtin_presets())
    if (p.kind == "system" && p.name == "dgx-h100") sys = p.document;
  for (const auto& p : builtin_presets())
    if (p.kind == "gpu" && p.name == "h100-sxm") sys["gpu"] = p.document;
  sys["gpu"]["gemm_efficiency"] = {{"value", 0.5}, {"source", "fitted"}};
  sys["name"] = "profile";
  const std::string path = write_temp(sys.dump());
  System s = load_system(path);
  EXPECT_EQ(s.name, "profile");
  EXPECT_DOUBLE_EQ(s.gpu.gemm_efficiency, 0.5);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace seqpar::sim
