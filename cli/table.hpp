// Aligned plain-text tables for the human-readable output of the subcommands.
#pragma once
#include <string>
#include <vector>

namespace seqpar::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // First column left-aligned, the rest right-aligned (numbers).
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string gib(double bytes);      // "61.2"
std::string seconds(double s);      // "1.234 s", "12.3 ms", "45.6 us"

}  // namespace seqpar::cli
