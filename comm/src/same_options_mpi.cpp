// The MPI half of the start-up option check: one watched all-reduce of the digests, and on a
// mismatch one watched all-gather of the lists so that every rank names the same first difference.
#include <fmt/format.h>
#include <mpi.h>

#include <climits>
#include <string_view>

#include "seqpar/comm/mpi_check.hpp"
#include "seqpar/comm/mpi_watch.hpp"
#include "seqpar/comm/same_options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

namespace seqpar::comm {
namespace {

// A rank that failed its own checks sends this one entry instead of its options.
constexpr const char* kStartError = "(start-up error)";

bool g_exchanged = false;  // the exchange happened in this process (it happens once)

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// Every rank's list, rank order.
std::vector<OptionValues> gather_lists(const OptionValues& mine, int size) {
  const std::string text = dump_json(nlohmann::json(mine), -1);
  if (text.size() > static_cast<std::size_t>(INT_MAX / size))
    throw Error("verify_same_options: the option list is too long to exchange");
  int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  MPI_Request req = MPI_REQUEST_NULL;
  SEQPAR_MPI_CHECK(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, "the start-up option check (list lengths)");
  long long total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<std::size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<std::size_t>(r)];
    if (total > INT_MAX) throw Error("verify_same_options: the option lists are too long to exchange");
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  SEQPAR_MPI_CHECK(MPI_Iallgatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(),
                                   offsets.data(), MPI_CHAR, MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, "the start-up option check (option lists)");
  std::vector<OptionValues> lists;
  for (int r = 0; r < size; ++r)
    lists.push_back(parse_json(std::string_view(all).substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                                                            static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])),
                               fmt::format("the option list of rank {}", r))
                        .get<OptionValues>());
  return lists;
}

std::optional<std::string> start_error_of(const OptionValues& list) {
  if (list.size() == 1 && list[0].first == kStartError) return list[0].second;
  return std::nullopt;
}

// The exchange: nullopt when every rank sent the same list, else the message for all ranks.
std::optional<std::string> exchange(const OptionValues& mine) {
  g_exchanged = true;
  int size = 1;
  SEQPAR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  detail::mpi_stall_point();
  // max(d) == ~max(~d) exactly when min(d) == max(d): one all-reduce tells whether all agree.
  const std::uint64_t d = options_digest(mine);
  std::uint64_t in[2] = {d, ~d}, out[2] = {0, 0};
  MPI_Request req = MPI_REQUEST_NULL;
  SEQPAR_MPI_CHECK(MPI_Iallreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &req));
  detail::mpi_wait_watched(req, "the start-up option check (digests)");
  if (out[0] == ~out[1]) return std::nullopt;

  const std::vector<OptionValues> lists = gather_lists(mine, size);
  for (int r = 0; r < size; ++r)
    if (auto e = start_error_of(lists[static_cast<std::size_t>(r)]))
      return fmt::format("rank {} could not start: {}", r, *e);
  for (int r = 1; r < size; ++r)
    if (auto diff = first_difference(lists[0], lists[static_cast<std::size_t>(r)]))
      return mismatch_message(*diff, r);
  return std::nullopt;  // equal lists with different digests cannot happen; nothing to report
}

}  // namespace

void verify_same_options(const nlohmann::json& options) {
  const OptionValues mine = option_values(options);
  if (auto msg = exchange(mine)) throw Error(*msg);
}

std::string report_start_error(const std::string& message) {
  if (g_exchanged || !mpi_running()) return message;
  try {
    return exchange({{kStartError, message}}).value_or(message);
  } catch (const Error&) {
    return message;
  }
}

}  // namespace seqpar::comm
