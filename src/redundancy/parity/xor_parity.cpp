// L3 XOR parity (xor_parity.hpp; docs/format.md 3.9 is normative).
#include "redundancy/parity/xor_parity.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <system_error>

#include "format/chain.hpp"
#include "format/le.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/parity/rs_code.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "util/crc32c.hpp"

namespace cairn::parity {

namespace impl {

std::string ParityDir(const Config& c) {
  return c.scratch_dir + (c.l3_code == L3Code::kRs ? "/.rs" : "/.xor");
}
std::string ParityFile(int64_t v) { return format::EntryFileName(format::EntryKind::kCheckpoint, v); }

Result<Header> ReadHeader(os::File& file, const std::string& path, const Sets& sets) {
  const std::vector<int>& members = sets.members();
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  std::vector<uint8_t> head(kFixed);
  if (size < kFixed + kCrc) return ParseHeader(head.data(), 0, size, path, &members);  // names it
  CAIRN_RETURN_IF_ERROR(file.ReadAt(head.data(), kFixed, 0));
  // The table only when the count is this set's: a damaged count is then
  // never a large read.
  const uint32_t m = ClaimedMembers(head.data(), head.size());
  if (m == members.size() && kFixed + kPerMember * uint64_t{m} <= size) {
    head.resize(kFixed + kPerMember * m);
    CAIRN_RETURN_IF_ERROR(file.ReadAt(head.data() + kFixed, head.size() - kFixed, kFixed));
  }
  CAIRN_ASSIGN_OR_RETURN(Header h, ParseHeader(head.data(), head.size(), size, path, &members));
  if (h.code != sets.code || h.parity != sets.parity)
    return Status::Corrupt(path +
                           ": not a parity file of this job's code (mpi.l3_code, mpi.l3_parity)");
  return h;
}

// dst ^= src, 32 bytes at a time (SIMD where the target has it).
void XorInto(uint8_t* dst, const uint8_t* src, size_t n) {
  const uint8_t* both[2] = {dst, src};
  XorOf(dst, both, 2, n);
}

void XorOf(uint8_t* dst, const uint8_t* const* srcs, size_t count, size_t n) {
  typedef uint64_t Words __attribute__((vector_size(32)));
  if (count == 0) {
    std::memset(dst, 0, n);
    return;
  }
  size_t i = 0;
  for (; i + sizeof(Words) <= n; i += sizeof(Words)) {
    Words a, b;
    std::memcpy(&a, srcs[0] + i, sizeof a);
    for (size_t k = 1; k < count; ++k) {
      std::memcpy(&b, srcs[k] + i, sizeof b);
      a ^= b;
    }
    std::memcpy(dst + i, &a, sizeof a);
  }
  for (; i < n; ++i) {
    uint8_t x = srcs[0][i];
    for (size_t k = 1; k < count; ++k) x ^= srcs[k][i];
    dst[i] = x;
  }
}

size_t ChunkOf(size_t j, size_t p, size_t m) { return (j + m - p - 1) % m; }

// The encoding and a rebuild stream one window of every chunk per round
// (docs/mpi.md): at most 1 MiB keeps the buffers small (a few windows per
// member) and each window in the caches from its read or the XOR to MPI's
// copy to the receiver's CRC and write: at 4 x 256 MiB, 4 MiB windows made
// the rebuild take 1.3x as long and 16 MiB 2x (docs/mpi.md "Measuring a
// rebuild"); at least 8 rounds for chunks over 128 KiB keep the members'
// work overlapped (and small versions, the tests', stream through several
// rounds too).
uint64_t WindowOf(uint64_t chunk) {
  return std::clamp<uint64_t>((chunk + 7) / 8, uint64_t{16} << 10, uint64_t{1} << 20);
}

uint32_t BundleCrc(const std::vector<uint32_t>& chunks, uint64_t total, uint64_t c) {
  uint32_t whole = 0;
  for (size_t k = 0; k < chunks.size() && k * c < total; ++k)
    whole = k == 0 ? chunks[0] : crc32c::Combine(whole, chunks[k], std::min(c, total - k * c));
  return whole;
}

// The same small message to every other member of the set, and theirs;
// (*got)[q] is member q's (this member's own at its position).
Status ShareInSet(Group& group, const Sets& sets, const std::vector<uint8_t>& mine,
                  std::vector<std::vector<uint8_t>>* got) {
  const std::vector<int>& members = sets.members();
  std::vector<Group::Outgoing> sends;
  std::vector<int> from;
  for (size_t q = 0; q < members.size(); ++q) {
    if (static_cast<int>(q) == sets.position) continue;
    sends.push_back({.to = members[q], .data = mine.data(), .bytes = mine.size()});
    from.push_back(members[q]);
  }
  std::vector<std::vector<uint8_t>> others;
  CAIRN_RETURN_IF_ERROR(group.Exchange(sends, from, &others));
  got->clear();
  for (size_t q = 0, i = 0; q < members.size(); ++q)
    got->push_back(static_cast<int>(q) == sets.position ? mine : std::move(others[i++]));
  return Status::Ok();
}

Result<std::vector<std::vector<int64_t>>> ShareValues(Group& group, const Sets& sets,
                                                      const std::vector<int64_t>& mine) {
  std::vector<uint8_t> msg;
  for (int64_t v : mine) redundancy::Put(&msg, v);
  std::vector<std::vector<uint8_t>> got;
  CAIRN_RETURN_IF_ERROR(ShareInSet(group, sets, msg, &got));
  std::vector<std::vector<int64_t>> out(got.size(), std::vector<int64_t>(mine.size(), -1));
  for (size_t q = 0; q < got.size(); ++q) {
    size_t at = 0;
    for (int64_t& v : out[q]) redundancy::Get(got[q], &at, &v);
  }
  return out;
}

const char* CodeName(L3Code code) { return code == L3Code::kRs ? "Reed-Solomon" : "XOR"; }

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace impl

namespace {

using namespace impl;
using redundancy::Fs;
using redundancy::Get;
using redundancy::Put;

}  // namespace

Result<Sets> SetsFromNodes(const std::vector<int>& node_of, int rank, int64_t group_size,
                           L3Code code, int64_t parity) {
  std::map<int, std::vector<int>> on_node;  // node -> its ranks, in rank order
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r) on_node[node_of[r]].push_back(r);
  const int64_t nodes = static_cast<int64_t>(on_node.size());
  const int64_t g = group_size > 0 ? group_size : std::min<int64_t>(4, nodes);
  const int64_t e = EffectiveL3Parity(code, static_cast<int>(parity));
  const std::string kind = code == L3Code::kRs ? "Reed-Solomon" : "XOR";
  const std::string why = "CAIRN_L3_GROUP is " + std::to_string(g) +
                          (group_size > 0 ? "" : " (the default)") + ", CAIRN_L3_PARITY " +
                          std::to_string(e) + " and the job's " + std::to_string(node_of.size()) +
                          " ranks are on " + std::to_string(nodes) +
                          " node(s) (CAIRN_MPI_RANKS_PER_NODE simulates nodes)";
  if (code == L3Code::kRs) CAIRN_RETURN_IF_ERROR(impl::ReedSolomon::Create(1, 1).status());
  if (g <= e)
    return Status::Config(kind + " sets (L3) need more members than the " + std::to_string(e) +
                          " lost ones they rebuild, on distinct nodes: " + why);
  if (g > nodes)
    return Status::Config(
        "a parity set (L3) needs its members on distinct nodes, so CAIRN_L3_GROUP must not exceed "
        "the number of nodes: " +
        why);
  Sets sets{.code = code, .parity = static_cast<size_t>(e)};
  for (size_t i = 0;; ++i) {
    std::vector<int> column;  // the i-th rank of every node that has one
    for (const auto& [n, ranks] : on_node) if (i < ranks.size()) column.push_back(ranks[i]);
    if (column.empty()) break;
    if (column.size() <= static_cast<size_t>(e)) {
      return Status::Config("rank " + std::to_string(column[0]) + " would be in a " + kind +
                            " set (L3) of " + std::to_string(column.size()) +
                            " member(s), no more than the lost ones it rebuilds: " + "only " +
                            std::to_string(column.size()) + " node(s) have a rank " +
                            std::to_string(i) + "; " + why);
    }
    const size_t first = sets.all.size();
    for (size_t at = 0; at < column.size(); at += static_cast<size_t>(g)) {
      const size_t end = std::min(column.size(), at + static_cast<size_t>(g));
      std::vector<int> run(column.begin() + static_cast<long>(at), column.begin() + static_cast<long>(end));
      if (run.size() < static_cast<size_t>(g) && sets.all.size() > first) {
        sets.all.back().insert(sets.all.back().end(), run.begin(), run.end());  // a short last run
      } else {
        sets.all.push_back(std::move(run));
      }
    }
  }
  for (size_t s = 0; s < sets.all.size(); ++s) {
    auto it = std::find(sets.all[s].begin(), sets.all[s].end(), rank);
    if (it == sets.all[s].end()) continue;
    sets.mine = static_cast<int>(s);
    sets.position = static_cast<int>(it - sets.all[s].begin());
  }
  if (sets.mine < 0) return Status::Internal("rank " + std::to_string(rank) + " is in no XOR set");
  return sets;
}

Result<Sets> MakeSets(Group& group, int64_t group_size, L3Code code, int64_t parity) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<int> node_of, redundancy::NodesOf(group));
  return SetsFromNodes(node_of, group.rank(), group_size, code, parity);
}

}  // namespace cairn::parity
