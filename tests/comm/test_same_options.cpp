// The start-up option check's pure half (option lists, digests, the first difference) and the
// watchdog's settings and virtual-rank timeout; the MPI exchange itself is in test_mpi.cpp and
// the programs' end-to-end checks in CMakeLists.txt.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/comm/same_options.hpp"
#include "seqpar/comm/watchdog.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm::test {
namespace {

const nlohmann::json kOptions = {{"--seq-len", 65536},
                                 {"--method", "ulysses"},
                                 {"--validate", false},
                                 {"--model", {{"layers", 2}, {"heads", 4}}}};

TEST(SameOptions, ListsAreFlatSortedAndTypedByTheirJsonText) {
  const OptionValues v = option_values(kOptions);
  const OptionValues expected = {{"--method", "\"ulysses\""},
                                 {"--model.heads", "4"},
                                 {"--model.layers", "2"},
                                 {"--seq-len", "65536"},
                                 {"--validate", "false"}};
  EXPECT_EQ(v, expected);
  EXPECT_THROW(option_values(nlohmann::json::array({1, 2})), Error);
}

TEST(SameOptions, DigestChangesWithAnyValueOrName) {
  const std::uint64_t d = options_digest(option_values(kOptions));
  EXPECT_EQ(d, options_digest(option_values(kOptions)));
  nlohmann::json other = kOptions;
  other["--seq-len"] = 131072;
  EXPECT_NE(d, options_digest(option_values(other)));
  other = kOptions;
  other["--model"]["heads"] = 8;
  EXPECT_NE(d, options_digest(option_values(other)));
  // The separator keeps ("ab", "c") apart from ("a", "bc").
  EXPECT_NE(options_digest({{"ab", "c"}}), options_digest({{"a", "bc"}}));
}

TEST(SameOptions, FirstDifferenceNamesTheOptionAndBothValues) {
  nlohmann::json other = kOptions;
  other["--validate"] = true;
  other["--seq-len"] = 128;
  const auto d = first_difference(option_values(kOptions), option_values(other));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "--seq-len");  // the first in name order of the two that differ
  EXPECT_EQ(d->root_value, "65536");
  EXPECT_EQ(d->other_value, "128");
  EXPECT_FALSE(first_difference(option_values(kOptions), option_values(kOptions)).has_value());

  const std::string msg = mismatch_message(*d, 3);
  EXPECT_NE(msg.find("--seq-len is 65536 on rank 0 but 128 on rank 3"), std::string::npos) << msg;
}

TEST(SameOptions, AnOptionOnlyOneSideHasIsADifference) {
  nlohmann::json more = kOptions;
  more["--extra"] = 1;
  const auto d = first_difference(option_values(kOptions), option_values(more));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "--extra");
  EXPECT_EQ(d->root_value, "(not set)");
  EXPECT_EQ(d->other_value, "1");
  const auto back = first_difference(option_values(more), option_values(kOptions));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->other_value, "(not set)");
}

// Restores the process-wide limit after a test changes it.
struct TimeoutGuard {
  double saved = comm_timeout_s();
  ~TimeoutGuard() { set_comm_timeout_s(saved); }
};

TEST(Watchdog, LimitMustBeFiniteAndNotNegative) {
  TimeoutGuard g;
  set_comm_timeout_s(0);
  EXPECT_EQ(comm_timeout_s(), 0);
  try {
    set_comm_timeout_s(-1);
    FAIL() << "a negative timeout was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--comm-timeout"), std::string::npos) << e.what();
  }
  EXPECT_THROW(set_comm_timeout_s(std::nan("")), Error);
  EXPECT_THROW(configure_comm_timeout(-2.0), Error);
  EXPECT_EQ(configure_comm_timeout(7.5), 7.5);
  EXPECT_EQ(comm_timeout_s(), 7.5);
}

TEST(Watchdog, FlagOverEnvironmentOverDefault) {
  TimeoutGuard g;
  ::unsetenv(kCommTimeoutEnv);
  EXPECT_EQ(configure_comm_timeout(std::nullopt), kDefaultCommTimeoutS);
  ::setenv(kCommTimeoutEnv, "12", 1);
  EXPECT_EQ(configure_comm_timeout(std::nullopt), 12);
  EXPECT_EQ(configure_comm_timeout(4.0), 4);
  ::setenv(kCommTimeoutEnv, "soon", 1);
  try {
    configure_comm_timeout(std::nullopt);
    FAIL() << "a malformed SEQPAR_COMM_TIMEOUT was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SEQPAR_COMM_TIMEOUT='soon'"), std::string::npos) << e.what();
  }
  ::unsetenv(kCommTimeoutEnv);
}

TEST(Watchdog, VirtualRankWhosePeerNeverArrivesGetsAnError) {
  TimeoutGuard g;
  set_comm_timeout_s(0.3);
  auto comms = make_virtual_world(2, false);
  std::string error;
  // Rank 1 never calls the barrier, as a thread that died would not.
  std::thread t([&] {
    try {
      comms[0]->barrier();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  t.join();
  EXPECT_NE(error.find("virtual rank 0 waited 0.3 s for barrier (1 of 2 ranks arrived)"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace seqpar::comm::test
