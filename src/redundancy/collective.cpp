// Collective agreement over a Group (collective.hpp, docs/mpi.md).
#include "redundancy/collective.hpp"

#include <algorithm>
#include <limits>

namespace cairn::collective {

namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
// A failure is reduced as rank * kCodes + |code|: the minimum names the
// lowest failed rank and its code in one MPI_Allreduce.
constexpr int64_t kCodes = 64;

// The keys that must be the same on every rank, each with its value as text.
// A rank's own directories are derived from storage.scratch/persistent, so
// those are compared before the rank's subdirectory is added.
struct AgreedKey {
  const char* key;
  std::string value;
};
std::vector<AgreedKey> AgreedKeys(const Config& c) {
  return {
      {"storage.scratch (CAIRN_SCRATCH)", c.scratch_dir},
      {"storage.persistent (CAIRN_PERSISTENT)", c.persistent_dir},
      {"storage.fsync (CAIRN_FSYNC)", c.fsync ? "true" : "false"},
      {"host_cache.block_size (CAIRN_BLOCK_SIZE)", std::to_string(c.block_bytes)},
      {"retention.keep_versions (CAIRN_KEEP)", std::to_string(c.keep_versions)},
      // The redundancy levels: every rank must take the same turns.
      {"mpi.l2_every (CAIRN_L2_EVERY)", std::to_string(c.l2_every)},
      {"mpi.l3_every (CAIRN_L3_EVERY)", std::to_string(c.l3_every)},
      {"mpi.l3_group (CAIRN_L3_GROUP)", std::to_string(c.l3_group)},
      {"mpi.l3_code (CAIRN_L3_CODE)", L3CodeName(c.l3_code)},
      {"mpi.l3_parity (CAIRN_L3_PARITY)", std::to_string(c.l3_parity)},
      {"mpi.l4_every (CAIRN_L4_EVERY)", std::to_string(c.l4_every)},
      // Cairn's own progress thread changes where an L3 turn's wait ends.
      {"mpi.progress_thread (CAIRN_MPI_PROGRESS_THREAD)", c.progress_thread ? "true" : "false"},
  };
}

}  // namespace

// FNV-1a.
int64_t Digest(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h >> 1);  // non-negative
}

Status Agree(Group& group, const Status& local, std::string_view what) {
  int64_t v = local.ok() ? kNone : group.rank() * kCodes + (-static_cast<int64_t>(local.code()) % kCodes);
  Status s = group.AllReduce(Group::Op::kMin, &v, 1);
  if (!s.ok()) return s.WithContext(std::string(what) + ": agreeing on the outcome across ranks");
  if (v == kNone) return Status::Ok();
  if (!local.ok()) return local.WithContext(std::string(what) + " (rank " + std::to_string(group.rank()) + ")");
  const int64_t rank = v / kCodes;
  const auto code = static_cast<Code>(-(v % kCodes));
  return Status(code, std::string(what) + " failed on rank " + std::to_string(rank) + " (" +
                          CodeName(code) + "; that rank's error says why), so it fails on every rank");
}

Status CheckConfigsAgree(Group& group, const Config& config) {
  const std::vector<AgreedKey> keys = AgreedKeys(config);
  std::vector<int64_t> lo(keys.size()), hi(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) lo[i] = hi[i] = Digest(keys[i].value);
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, lo.data(), lo.size()));
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMax, hi.data(), hi.size()));
  std::string differ;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (lo[i] == hi[i]) continue;
    differ += differ.empty() ? "" : ", ";
    differ += std::string(keys[i].key) + " (here '" + keys[i].value + "')";
  }
  if (differ.empty()) return Status::Ok();
  return Status::Config("the configuration differs across the " + std::to_string(group.size()) +
                        " ranks (rank " + std::to_string(group.rank()) + "): " + differ +
                        "; every rank must use the same value (docs/mpi.md)");
}

Config RankConfig(const Config& config, const Group& group) {
  Config c = config;
  const std::string rank = "/rank" + std::to_string(group.rank());
  const std::string node = group.simulated_nodes() ? "/node" + std::to_string(group.node()) : "";
  c.scratch_dir = config.scratch_dir + node + rank;
  if (!config.persistent_dir.empty()) c.persistent_dir = config.persistent_dir + rank;
  return c;
}

Result<int64_t> NewestCommon(Group& group, const std::vector<int64_t>& descending, int64_t bound) {
  // Each round: the least of the members' newest candidates <= bound is an
  // upper bound of every common one; if every member has it, it is the
  // answer, else the search continues below it. Each round drops at least
  // one candidate of some member: at most (keep_versions x tiers) rounds.
  while (bound >= 0) {
    auto it = std::find_if(descending.begin(), descending.end(), [&](int64_t v) { return v <= bound; });
    int64_t c = it == descending.end() ? -1 : *it;
    CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, &c, 1));
    if (c < 0) return int64_t{-1};
    int64_t everyone = std::find(descending.begin(), descending.end(), c) != descending.end() ? 1 : 0;
    CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, &everyone, 1));
    if (everyone == 1) return c;
    bound = c - 1;
  }
  return int64_t{-1};
}

}  // namespace cairn::collective
