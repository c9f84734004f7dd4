// Mutation fuzzer over the built-in preset files (sim/presets/{gpus,systems,models}): each run
// mutates one file (bytes flipped, inserted, deleted; numbers swapped for extremes such as 1e-320,
// 1e308 and 1e400; wrong types; invalid UTF-8; deep nesting; duplicate keys; truncation), writes it
// to a temporary file and takes it through the path the CLI takes: load_model / load_system (which
// loads a GPU file named by the system), simulate, result JSON and dump, and advise on 4 GPUs.
// A run passes when it ends in a seqpar::Error or in results whose JSON, where valid, holds only
// finite, non-negative numbers. Any other exception fails the test; a crash or hang ends the binary.
//
// Reproduce a failure with the seed it prints: SEQPAR_FUZZ_SEED=<seed> (SEQPAR_FUZZ_RUNS=<n> for more).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.hpp"
#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"

namespace {

namespace fs = std::filesystem;
using namespace seqpar::sim;
using nlohmann::json;

struct PresetFile {
  std::string kind;  // "gpus", "systems", "models"
  std::string path, text;
};

std::vector<PresetFile> preset_files() {
  std::vector<PresetFile> out;
  for (const char* kind : {"gpus", "systems", "models"})
    for (const auto& e : fs::directory_iterator(fs::path(SEQPAR_PRESETS_DIR) / kind))
      if (e.path().extension() == ".json")
        out.push_back({kind, e.path().string(), seqpar::testing::slurp(e.path().string())});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Mutates preset text. Each operator says what it did, so a failure report shows the input's story.
class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::string mutate(std::string s, std::string& log) {
    const std::size_t n = 1 + pick(3);
    for (std::size_t i = 0; i < n && !s.empty(); ++i) s = once(std::move(s), log);
    return s;
  }

 private:
  std::mt19937_64 rng_;

  std::size_t pick(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

  // Spans of number literals (not inside strings: a number in a source text is just text).
  static std::vector<std::pair<std::size_t, std::size_t>> numbers(const std::string& s) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    bool in_string = false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (in_string) {
        if (c == '\\') ++i;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '"') { in_string = true; continue; }
      if (c == '-' || (c >= '0' && c <= '9')) {
        std::size_t j = i + 1;
        while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == 'e' ||
                                s[j] == 'E' || s[j] == '+' || s[j] == '-'))
          ++j;
        out.emplace_back(i, j - i);
        i = j - 1;
      }
    }
    return out;
  }

  // Spans of string literals with their quotes.
  static std::vector<std::pair<std::size_t, std::size_t>> strings(const std::string& s) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '"') continue;
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      if (j >= s.size()) break;
      out.emplace_back(i, j - i + 1);
      i = j;
    }
    return out;
  }

  std::string once(std::string s, std::string& log) {
    static const char* const kExtremes[] = {
        "0", "-1", "-0", "1e-320", "4.9e-324", "1e308", "1.7976931348623157e308", "1e400", "-1e400",
        "NaN", "Infinity", "-Infinity", "nan", "99999999999999999999999", "18446744073709551616",
        "9223372036854775807", "-9223372036854775808", "2147483648", "4294967297", "1e-5", "0.5",
        "3", "65536", "1e9", "\"text\"", "\"\"", "null", "true", "[]", "{}", "[1,2]", "{\"value\": 1e400}",
        "{\"value\": \"x\"}", "{\"source\": \"no value\"}"};
    static const char* const kStrings[] = {"\"\"", "\"h100-sxm\"", "\"nope\"", "\"/nonexistent/x.json\"",
                                           "\"\xff\xfe\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"\\ud800\"",
                                           "1", "null", "[\"h100-sxm\"]", "{}"};
    static const char* const kKeys[] = {"name", "memory_gib", "bf16_tflops", "hbm_gbps", "pcie_gbps",
                                        "gemm_efficiency", "layers", "hidden", "heads", "kv_heads", "head_dim",
                                        "vocab", "gpu", "gpus_per_node", "intra_node", "bandwidth_gbps",
                                        "latency_us", "efficiency", "link"};
    const std::size_t at = pick(s.size());
    switch (pick(11)) {
      case 0: {  // flip one bit
        const int bit = int(pick(8));
        s[at] = static_cast<char>(static_cast<unsigned char>(s[at]) ^ (1u << bit));
        log += "flip@" + std::to_string(at) + " ";
        break;
      }
      case 1: {  // insert random bytes
        const std::size_t n = 1 + pick(4);
        std::string bytes;
        for (std::size_t i = 0; i < n; ++i) bytes += static_cast<char>(pick(256));
        s.insert(at, bytes);
        log += "insert@" + std::to_string(at) + " ";
        break;
      }
      case 2: {  // delete a range
        const std::size_t n = 1 + pick(16);
        s.erase(at, n);
        log += "delete@" + std::to_string(at) + " ";
        break;
      }
      case 3:
      case 4:
      case 5: {  // a number becomes an extreme value or the wrong type
        auto spans = numbers(s);
        if (spans.empty()) break;
        const auto [pos, len] = spans[pick(spans.size())];
        const std::string v = kExtremes[pick(std::size(kExtremes))];
        s.replace(pos, len, v);
        log += "number@" + std::to_string(pos) + "=" + v + " ";
        break;
      }
      case 6: {  // a string becomes invalid UTF-8, another name or the wrong type
        auto spans = strings(s);
        if (spans.empty()) break;
        const auto [pos, len] = spans[pick(spans.size())];
        const std::string v = kStrings[pick(std::size(kStrings))];
        s.replace(pos, len, v);
        log += "string@" + std::to_string(pos) + " ";
        break;
      }
      case 7: {  // deep nesting around a value
        static const std::size_t kDepths[] = {200, 300, 5000, 100000};
        auto spans = numbers(s);
        if (spans.empty()) break;
        const auto [pos, len] = spans[pick(spans.size())];
        const std::size_t d = kDepths[pick(std::size(kDepths))];
        s.replace(pos, len, std::string(d, '[') + s.substr(pos, len) + std::string(pick(2) ? d : d / 2, ']'));
        log += "nest" + std::to_string(d) + "@" + std::to_string(pos) + " ";
        break;
      }
      case 8: {  // a duplicate key with an extreme value, before the original (nlohmann keeps the last)
        const std::size_t brace = s.find('{');
        if (brace == s.npos) break;
        const std::string key = kKeys[pick(std::size(kKeys))];
        const std::string v = kExtremes[pick(std::size(kExtremes))];
        s.insert(brace + 1, "\"" + key + "\": " + v + ", ");
        log += "dup:" + key + "=" + v + " ";
        break;
      }
      case 9: {  // a duplicate key after the original: this one wins
        const std::size_t brace = s.rfind('}');
        if (brace == s.npos || brace == 0) break;
        const std::string key = kKeys[pick(std::size(kKeys))];
        const std::string v = kExtremes[pick(std::size(kExtremes))];
        s.insert(brace, ", \"" + key + "\": " + v);
        log += "dup-last:" + key + "=" + v + " ";
        break;
      }
      default:  // truncation
        s.resize(at);
        log += "truncate@" + std::to_string(at) + " ";
        break;
    }
    return s;
  }
};

// Every number in a valid result must be finite and non-negative (nlohmann would write NaN and
// infinities as null, so the check is on the value before dumping). Returns the first offending path.
std::string bad_number(const json& j, const std::string& path = "") {
  if (j.is_number()) {
    const double v = j.get<double>();
    return std::isfinite(v) && v >= 0 ? "" : path + " = " + std::to_string(v);
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items())
      if (auto b = bad_number(v, path + "." + k); !b.empty()) return b;
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      if (auto b = bad_number(j[i], path + "[" + std::to_string(i) + "]"); !b.empty()) return b;
  }
  return "";
}

// A hang inside one run cannot be interrupted in-process: the watchdog ends the binary, naming it.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void start(std::string what) {
    std::lock_guard<std::mutex> lock(m_);
    what_ = std::move(what);
    ++run_;
    cv_.notify_all();
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(m_);
    while (!done_) {
      const std::uint64_t seen = run_;
      if (!cv_.wait_for(lock, limit_, [&] { return done_ || run_ != seen; })) {
        std::fprintf(stderr, "fuzz: run hung for more than %llds: %s\n", static_cast<long long>(limit_.count()),
                     what_.c_str());
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }
  std::chrono::seconds limit_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::uint64_t run_ = 0;
  std::string what_;
  std::thread thread_;
};

// What a run ended in. `problem` is empty when the run passed.
struct Outcome {
  bool rejected = false;  // a seqpar::Error: bad input, told clearly
  std::string problem;
};

std::string check_result(const Model& m, const System& s, const Result& r, const char* what) {
  const json j = to_json(m, s, r);
  (void)seqpar::dump_json(j);  // must not throw, whatever text the presets carried
  if (j.value("valid", false))
    if (auto b = bad_number(j); !b.empty()) return std::string(what) + ": valid result with " + b;
  return "";
}

Outcome run_one(const std::string& model_path, const std::string& system_path) {
  Outcome o;
  try {
    const Model m = load_model(model_path);
    const System s = load_system(system_path);
    Plan p;
    p.method = Method::hybrid;
    p.gpus = 16;
    p.sp = 16;
    p.seq_len = 256 * 1024;
    p.mem.checkpoint = Checkpoint::full;
    p.mem.offload_checkpoints = true;
    p.mem.offload_optimizer = true;
    for (Method method : {Method::ulysses, Method::ring_zigzag, Method::hybrid}) {
      p.method = method;
      p.ulysses_degree = p.ring_degree = 0;
      const Plan q = normalized(p, s.gpus_per_node);
      if (auto b = check_result(m, s, simulate(m, s, q), "simulate"); !b.empty()) o.problem = b;
    }
    SearchSpace space;
    space.tp = {1, 2};  // with and without tensor parallelism, at half the cost of all of 1, 2, 4
    const Advice a = advise(m, s, 4, 32 * 1024, space);
    for (const Result& r : a.ranked)
      if (auto b = check_result(m, s, r, "advise"); !b.empty()) o.problem = b;
  } catch (const seqpar::Error&) {
    o.rejected = true;
  } catch (const std::exception& e) {
    o.problem = std::string("escaped exception: ") + e.what();
  }
  return o;
}

class FuzzPresets : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("seqpar_fuzz_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // A system file naming `gpu_path` as its GPU, so a mutated GPU is reached through load_system.
  std::string system_with_gpu(const std::string& gpu_path) {
    json sys = preset_document("system", "dgx-h100");
    sys["gpu"] = gpu_path;
    return write("system_for_gpu.json", sys.dump());
  }

  fs::path dir_;
};

TEST_F(FuzzPresets, MutatedPresetsNeverCrashOrYieldValidNonFiniteResults) {
  const std::uint64_t seed = env_or("SEQPAR_FUZZ_SEED", std::random_device{}());
  // 2000 mutations, or a share of them where the test runs sampled (the sanitizer pass).
  const std::uint64_t runs = env_or("SEQPAR_FUZZ_RUNS", 2000 / seqpar::sim::testing::sample_stride());
  std::printf("fuzz: SEQPAR_FUZZ_SEED=%llu SEQPAR_FUZZ_RUNS=%llu\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(runs));
  std::fflush(stdout);
  const auto files = preset_files();
  ASSERT_GE(files.size(), 15u) << SEQPAR_PRESETS_DIR;

  Mutator mutator(seed);
  std::mt19937_64 choose(seed ^ 0x9e3779b97f4a7c15ull);
  Watchdog watchdog(std::chrono::seconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t rejected = 0, failures = 0;
  for (std::uint64_t i = 0; i < runs; ++i) {
    const PresetFile& f = files[std::uniform_int_distribution<std::size_t>(0, files.size() - 1)(choose)];
    std::string log;
    const std::string text = mutator.mutate(f.text, log);
    const std::string what = "run " + std::to_string(i) + " of seed " + std::to_string(seed) + ": " + f.path +
                             ": " + log;
    watchdog.start(what);
    const std::string mutated = write("mutated.json", text);
    std::string model = "llama3-8b", system = "dgx-h100";
    if (f.kind == "models") model = mutated;
    else if (f.kind == "systems") system = mutated;
    else system = system_with_gpu(mutated);
    const Outcome o = run_one(model, system);
    rejected += o.rejected;
    if (!o.problem.empty()) {
      ++failures;
      // The first few in full (with the input kept for a look); the count says the rest.
      if (failures <= 5) {
        const std::string keep = write("failure_" + std::to_string(failures) + ".json", text);
        ADD_FAILURE() << what << "\n  " << o.problem << "\n  input: " << keep
                      << " (the temp folder is removed at the end; rerun with the seed)";
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("fuzz: %llu runs in %.1f s, %llu rejected with a seqpar::Error, %llu failed\n",
              static_cast<unsigned long long>(runs), secs, static_cast<unsigned long long>(rejected),
              static_cast<unsigned long long>(failures));
  EXPECT_EQ(failures, 0u) << "seed " << seed;
  // Mutations that keep the file valid must leave enough runs that reach the simulator.
  EXPECT_LT(rejected, runs) << "every mutated file was rejected: the fuzzer no longer reaches simulate";
}

// The same kind of inputs through the real program: exit status 0, 1 (a plan that does not fit
// or is invalid) or 2 (bad input), never a signal; a message on failure; JSON that parses.
TEST_F(FuzzPresets, MutatedPresetsThroughTheCli) {
  const std::uint64_t seed = env_or("SEQPAR_FUZZ_SEED", std::random_device{}()) + 1;
  std::printf("fuzz (CLI): SEQPAR_FUZZ_SEED=%llu\n", static_cast<unsigned long long>(seed - 1));
  const auto files = preset_files();
  Mutator mutator(seed);
  std::mt19937_64 choose(seed);
  for (int i = 0; i < 24; ++i) {
    const PresetFile& f = files[std::uniform_int_distribution<std::size_t>(0, files.size() - 1)(choose)];
    std::string log;
    const std::string mutated = write("cli_mutated.json", mutator.mutate(f.text, log));
    std::string model = "llama3-8b", system = "dgx-h100";
    if (f.kind == "models") model = mutated;
    else if (f.kind == "systems") system = mutated;
    else system = system_with_gpu(mutated);
    const std::string what = "CLI run " + std::to_string(i) + ": " + f.path + ": " + log;
    const auto r = seqpar::testing::seqpar("simulate --model '" + model + "' --system '" + system +
                                           "' --gpus 16 --seq-len 256K --method hybrid --json");
    ASSERT_LE(r.code, 2) << what << "\nstderr: " << r.err;
    json j;
    ASSERT_NO_THROW(j = r.json()) << what << "\nstdout: " << r.out;
    if (r.code == 0) {
      EXPECT_TRUE(j["valid"].get<bool>()) << what;
      EXPECT_EQ(bad_number(j["time"]) + bad_number(j["memory"]), "") << what;
      for (const char* k : {"step_time_s", "tokens_per_s_per_gpu", "peak_memory_bytes"})
        EXPECT_TRUE(j[k].is_number()) << what << ": " << k << " is " << j[k].dump();
    } else {
      EXPECT_FALSE(j["valid"].get<bool>()) << what;
      EXPECT_FALSE(j["errors"].empty()) << what;
    }
  }
}

}  // namespace
