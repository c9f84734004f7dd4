// seqpar::Progress: the shared progress line (done, left, an estimate), written only to a terminal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "seqpar/core/progress.hpp"

namespace {

struct Capture {
  std::FILE* f = std::tmpfile();
  ~Capture() { std::fclose(f); }
  std::string text() const {
    std::fflush(f);
    std::rewind(f);
    std::string out;
    for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
    return out;
  }
};

TEST(Progress, EstimateFromTheTimePerItemSoFar) {
  Capture c;
  double now = 100;
  seqpar::Progress p("train", 12, c.f, 0, true, [&] { return now; });
  now += 90;  // 3 items in 90 s: 30 s each, 9 left
  p.update(3);
  EXPECT_EQ(c.text(), "train: 3/12 done, 9 left, about 4m 30s to go\n");
  now += 270;
  p.update(12);
  EXPECT_EQ(c.text(), "train: 3/12 done, 9 left, about 4m 30s to go\ntrain: 12/12 done, 0 left, took 6m 00s\n");
}

TEST(Progress, SkippedItemsDoNotShortenTheEstimate) {
  double now = 0;
  seqpar::Progress p("sweep", 10, nullptr, 0, true, [&] { return now; });
  EXPECT_EQ(p.line(4, 4), "sweep: 4/10 done, 6 left, no estimate yet");
  now = 60;
  EXPECT_EQ(p.line(5, 4), "sweep: 5/10 done, 5 left, about 5m 00s to go");
}

TEST(Progress, QuietOffATerminalAndThrottledOnOne) {
  Capture piped;
  seqpar::Progress quiet("bench", 3, piped.f);  // a file is not a terminal
  EXPECT_FALSE(quiet.enabled());
  for (int k = 1; k <= 3; ++k) quiet.update(k);
  EXPECT_EQ(piped.text(), "");

  Capture c;
  double now = 0;
  seqpar::Progress p("bench", 100, c.f, 2.0, true, [&] { return now; });
  for (int k = 1; k < 100; ++k) {
    now += 0.1;
    p.update(k);
  }
  const std::string text = c.text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5) << text;  // 9.9 s, one line per 2 s at most
  p.update(100);  // the last line is always written
  EXPECT_NE(c.text().find("bench: 100/100 done, 0 left, took 10s\n"), std::string::npos) << c.text();
}

TEST(Progress, Durations) {
  EXPECT_EQ(seqpar::format_duration(0), "0s");
  EXPECT_EQ(seqpar::format_duration(12.4), "12s");
  EXPECT_EQ(seqpar::format_duration(754), "12m 34s");
  EXPECT_EQ(seqpar::format_duration(7384), "2h 03m");
}

}  // namespace
