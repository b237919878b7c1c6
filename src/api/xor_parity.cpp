// L3 XOR parity (xor_parity.hpp; docs/format.md 3.9 is normative).
#include "api/xor_parity.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "format/chain.hpp"
#include "format/le.hpp"
#include "format/naming.hpp"
#include "os/fs.hpp"
#include "util/crc32c.hpp"

namespace cairn::parity {

namespace {

using redundancy::Fs;
using redundancy::Get;
using redundancy::Put;

constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'X', 'O', 'R'};
constexpr size_t kFixed = 40, kPerMember = 24, kCrc = 4;

// <rank dir>/.xor: where a member keeps its parity files (under <name>/).
std::string ParityDir(const Config& c) { return c.scratch_dir + "/.xor"; }
std::string ParityFile(int64_t v) { return format::EntryFileName(format::EntryKind::kCheckpoint, v); }

struct Member {
  int64_t rank = -1;
  int64_t bytes = -1;  // of its bundle
  uint32_t crc = 0;    // of its bundle
};
struct Header {
  int64_t version = -1;
  uint32_t position = 0;
  uint64_t chunk = 0;
  std::vector<Member> members;
  size_t Size() const { return kFixed + kPerMember * members.size(); }
};

std::vector<uint8_t> EncodeHeader(const Header& h) {
  std::vector<uint8_t> out(h.Size(), 0);
  std::copy(std::begin(kMagic), std::end(kMagic), out.begin());
  format::le::Put32(&out[8], 1);
  format::le::Put32(&out[12], static_cast<uint32_t>(h.members.size()));
  format::le::Put32(&out[16], h.position);
  format::le::Put64(&out[24], static_cast<uint64_t>(h.version));
  format::le::Put64(&out[32], h.chunk);
  for (size_t i = 0; i < h.members.size(); ++i) {
    uint8_t* p = &out[kFixed + kPerMember * i];
    format::le::Put64(p, static_cast<uint64_t>(h.members[i].rank));
    format::le::Put64(p + 8, static_cast<uint64_t>(h.members[i].bytes));
    format::le::Put32(p + 16, h.members[i].crc);
  }
  return out;
}

// The header of a parity file, checked against the file's size and (when
// `members` is given) this member's set; kCorrupt naming what is wrong.
Result<Header> ReadHeader(os::File& file, const std::string& path, const std::vector<int>& members) {
  auto bad = [&](const std::string& why) { return Status::Corrupt(path + ": not a usable XOR parity file: " + why); };
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  uint8_t fixed[kFixed];
  if (size < kFixed + kCrc) return bad("too short");
  CAIRN_RETURN_IF_ERROR(file.ReadAt(fixed, kFixed, 0));
  if (!std::equal(std::begin(kMagic), std::end(kMagic), fixed)) return bad("no CAIRNXOR magic");
  if (format::le::Get32(fixed + 8) != 1) return bad("unknown layout version");
  const uint32_t m = format::le::Get32(fixed + 12);
  Header h;
  h.position = format::le::Get32(fixed + 16);
  h.version = static_cast<int64_t>(format::le::Get64(fixed + 24));
  h.chunk = format::le::Get64(fixed + 32);
  if (m < 2 || h.position >= m || m != members.size()) return bad("not this rank's set");
  if (h.chunk == 0 || h.chunk > size || size != kFixed + kPerMember * m + h.chunk + kCrc)
    return bad("its size does not match its header");
  std::vector<uint8_t> table(kPerMember * m);
  CAIRN_RETURN_IF_ERROR(file.ReadAt(table.data(), table.size(), kFixed));
  for (uint32_t i = 0; i < m; ++i) {
    const uint8_t* p = &table[kPerMember * i];
    h.members.push_back({static_cast<int64_t>(format::le::Get64(p)),
                         static_cast<int64_t>(format::le::Get64(p + 8)), format::le::Get32(p + 16)});
    if (h.members.back().rank != members[i]) return bad("its set's members are not this rank's set");
  }
  return h;
}

// Chunk of member p that member j's parity holds (j != p).
size_t ChunkOf(size_t j, size_t p, size_t m) { return (j + m - p - 1) % m; }

// The exchange both the encoding and a rebuild make: every member of the
// set but `excluded` sends chunk ChunkOf(j, p) of its bundle to each other
// member j but `excluded`, and XORs what it receives into *acc (c bytes).
Status XorScatter(Group& group, const Sets& sets, size_t excluded, const std::vector<uint8_t>& bundle,
                  uint64_t c, std::vector<uint8_t>* acc) {
  const std::vector<int>& members = sets.members();
  const size_t m = members.size(), p = static_cast<size_t>(sets.position);
  std::vector<Group::Outgoing> sends;
  std::vector<int> from;
  for (size_t j = 0; j < m; ++j) {
    if (j == p || j == excluded) continue;
    const uint64_t off = ChunkOf(j, p, m) * c;
    const uint64_t bytes = off < bundle.size() ? std::min<uint64_t>(c, bundle.size() - off) : 0;
    sends.push_back({.to = members[j], .data = bytes > 0 ? bundle.data() + off : bundle.data(), .bytes = bytes});
    from.push_back(members[j]);
  }
  std::vector<std::vector<uint8_t>> got;
  CAIRN_RETURN_IF_ERROR(group.Exchange(sends, from, &got));
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].size() > c) return Status::Corrupt("a parity chunk from rank " + std::to_string(from[i]) + " is too long");
    for (size_t b = 0; b < got[i].size(); ++b) (*acc)[b] ^= got[i][b];
  }
  return Status::Ok();
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

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

Result<Sets> SetsFromNodes(const std::vector<int>& node_of, int rank, int64_t group_size) {
  std::map<int, std::vector<int>> on_node;  // node -> its ranks, in rank order
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r) on_node[node_of[r]].push_back(r);
  const int64_t nodes = static_cast<int64_t>(on_node.size());
  const int64_t g = group_size > 0 ? group_size : std::min<int64_t>(4, nodes);
  const std::string why = "CAIRN_L3_GROUP is " + std::to_string(g) + (group_size > 0 ? "" : " (the default)") +
                          " and the job's " + std::to_string(node_of.size()) + " ranks are on " +
                          std::to_string(nodes) + " node(s) (CAIRN_MPI_RANKS_PER_NODE simulates nodes)";
  if (g < 2) return Status::Config("XOR sets (L3) need at least 2 members on distinct nodes: " + why);
  if (g > nodes) return Status::Config("an XOR set (L3) needs its members on distinct nodes, so CAIRN_L3_GROUP must not exceed the number of nodes: " + why);
  Sets sets;
  for (size_t i = 0;; ++i) {
    std::vector<int> column;  // the i-th rank of every node that has one
    for (const auto& [n, ranks] : on_node) if (i < ranks.size()) column.push_back(ranks[i]);
    if (column.empty()) break;
    if (column.size() < 2) {
      return Status::Config("rank " + std::to_string(column[0]) +
                            " would be alone in its XOR set (L3): it is the only rank " + std::to_string(i) +
                            " of its node; " + why);
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

Result<Sets> MakeSets(Group& group, int64_t group_size) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<int> node_of, redundancy::NodesOf(group));
  return SetsFromNodes(node_of, group.rank(), group_size);
}

Result<uint64_t> Encode(Group& group, const Sets& sets, const Config& config, const std::string& name,
                        int64_t version) {
  const std::vector<int>& members = sets.members();
  const size_t m = members.size(), p = static_cast<size_t>(sets.position);
  // 1. Every member learns every bundle's size and CRC (-1: unreadable).
  auto bundle = redundancy::Bundle(config, config.scratch_dir, name, version);
  std::vector<uint8_t> info;
  Put(&info, bundle.ok() ? static_cast<int64_t>(bundle->size()) : -1);
  Put(&info, bundle.ok() ? crc32c::Value(bundle->data(), bundle->size()) : 0);
  std::vector<std::vector<uint8_t>> infos;
  CAIRN_RETURN_IF_ERROR(ShareInSet(group, sets, info, &infos));
  Header h{.version = version, .position = static_cast<uint32_t>(p)};
  int64_t longest = 0;
  for (size_t q = 0; q < m; ++q) {
    int64_t bytes = -1, crc = 0;
    size_t at = 0;
    Get(infos[q], &at, &bytes);
    Get(infos[q], &at, &crc);
    if (bytes < 0) {
      // The whole set skips this parity: each member sees the same infos.
      if (!bundle.ok()) return bundle.status().WithContext("the XOR parity (L3) of version " + std::to_string(version));
      return Status::NotFound("the XOR parity (L3) of version " + std::to_string(version) + " of '" + name +
                              "': rank " + std::to_string(members[q]) + " of this rank's set cannot read its file");
    }
    h.members.push_back({members[q], bytes, static_cast<uint32_t>(crc)});
    longest = std::max(longest, bytes);
  }
  // 2. The parity chunk: XOR of one chunk of every other member.
  h.chunk = std::max<uint64_t>(1, (static_cast<uint64_t>(longest) + m - 2) / (m - 1));
  std::vector<uint8_t> file = EncodeHeader(h);
  const size_t at = file.size();
  file.resize(at + h.chunk + kCrc, 0);
  std::vector<uint8_t> acc(h.chunk, 0);
  CAIRN_RETURN_IF_ERROR(XorScatter(group, sets, m, *bundle, h.chunk, &acc));
  std::copy(acc.begin(), acc.end(), file.begin() + static_cast<long>(at));
  format::le::Put32(&file[at + h.chunk], crc32c::Value(file.data(), at + h.chunk));
  // 3. Stored durably; older parity beyond keep_versions goes.
  const std::string dir = ParityDir(config) + "/" + name;
  CAIRN_RETURN_IF_ERROR(redundancy::WriteFile(config, dir, ParityFile(version), file.data(), file.size()));
  redundancy::Retain(config, ParityDir(config), name, /*chains=*/false);
  return static_cast<uint64_t>(file.size());
}

namespace {

// Recover's steps for the parity level (docs/mpi.md "XOR parity (L3)").
class ParityLevel final : public redundancy::Level {
 public:
  ParityLevel(Group& group, const Sets& sets, const Config& config)
      : group_(group), sets_(sets), config_(config) {}

  Result<std::vector<int64_t>> Offers(const std::string& name, int64_t bound, int64_t distrust) override {
    // 1. Every member of the set learns what the others have: their local
    // versions and the versions of their parity files.
    std::vector<int64_t> local = redundancy::Intact(config_, config_.scratch_dir, name);
    std::erase(local, distrust);
    std::vector<int64_t> parity;
    for (int64_t v : redundancy::Versions(config_, ParityDir(config_), name)) {
      if (ReadParityHeader(name, v).ok()) parity.push_back(v);
    }
    std::vector<uint8_t> msg;
    for (const auto* list : {&local, &parity}) {
      Put(&msg, static_cast<int64_t>(list->size()));
      for (int64_t v : *list) Put(&msg, v);
    }
    std::vector<std::vector<uint8_t>> got;
    CAIRN_RETURN_IF_ERROR(ShareInSet(group_, sets_, msg, &got));
    const size_t m = got.size(), p = static_cast<size_t>(sets_.position);
    std::vector<std::set<int64_t>> has(m), holds(m);
    for (size_t q = 0; q < m; ++q) {
      size_t at = 0;
      for (auto* out : {&has[q], &holds[q]}) {
        int64_t n = 0, v = 0;
        Get(got[q], &at, &n);
        for (int64_t i = 0; i < n && Get(got[q], &at, &v); ++i) out->insert(v);
      }
    }
    // 2. Versions the set can rebuild for this member: it alone lacks them.
    std::set<int64_t> offers;
    int64_t top = -1;  // the set's newest parity
    for (size_t q = 0; q < m; ++q) {
      for (int64_t v : holds[q]) {
        if (v > bound) continue;
        top = std::max(top, v);
        bool others = !has[p].contains(v);
        for (size_t o = 0; o < m && others; ++o) others = o == p || (has[o].contains(v) && holds[o].contains(v));
        if (others) offers.insert(v);
      }
    }
    // 3. Sets that lost two members of their newest parity's version cannot
    // rebuild: every rank learns which (one reduction) and says so.
    size_t lost = 0;
    for (size_t q = 0; q < m; ++q) lost += top >= 0 && !has[q].contains(top) ? 1 : 0;
    std::vector<int64_t> flags(static_cast<size_t>(group_.size()), 0);
    if (lost >= 2 && !has[p].contains(top)) flags[static_cast<size_t>(group_.rank())] = top + 1;
    CAIRN_RETURN_IF_ERROR(group_.AllReduce(Group::Op::kMax, flags.data(), flags.size()));
    for (const std::vector<int>& set : sets_.all) {
      std::vector<int> gone;
      int64_t version = -1;
      for (int r : set) {
        if (flags[static_cast<size_t>(r)] == 0) continue;
        gone.push_back(r);
        version = flags[static_cast<size_t>(r)] - 1;
      }
      if (gone.size() < 2) continue;
      notes_.push_back("the XOR set of ranks " + RankList(set) + " lost ranks " + RankList(gone) + " (version " +
                       std::to_string(version) + " of '" + name +
                       "'): parity rebuilds one lost member per set, not two (L3); the job falls back to the "
                       "persistent level (L4), or to an older version every rank has");
    }
    return std::vector<int64_t>(offers.rbegin(), offers.rend());
  }

  Result<std::string> Fetch(const std::string& name, int64_t v, bool need) override {
    const std::vector<int>& members = sets_.members();
    const size_t m = members.size(), p = static_cast<size_t>(sets_.position);
    // 1. Who in the set lacks v; parity serves a set with exactly one.
    std::vector<uint8_t> flag;
    Put(&flag, need ? 1 : 0);
    std::vector<std::vector<uint8_t>> got;
    CAIRN_RETURN_IF_ERROR(ShareInSet(group_, sets_, flag, &got));
    std::vector<size_t> lost;
    for (size_t q = 0; q < m; ++q) {
      int64_t f = 0;
      size_t at = 0;
      if (Get(got[q], &at, &f) && f != 0) lost.push_back(q);
    }
    if (lost.size() != 1) return std::string();
    const size_t gone = lost[0];
    // 2. The survivors check their parity and their own bundle against it;
    // all go on only if every survivor can (0 ok, 1 absent, 2 damaged).
    Header h;
    std::vector<uint8_t> acc, bundle;
    Status why;
    if (p != gone) why = Prepare(name, v, &h, &acc, &bundle);
    std::vector<uint8_t> state;
    Put(&state, why.ok() ? 0 : why.code() == Code::kNotFound ? 1 : 2);
    CAIRN_RETURN_IF_ERROR(ShareInSet(group_, sets_, state, &got));
    int64_t worst = 0;
    for (size_t q = 0; q < m; ++q) {
      int64_t s = 0;
      size_t at = 0;
      Get(got[q], &at, &s);
      worst = std::max(worst, s);
    }
    if (worst != 0) {
      if (worst == 2 && p == gone)
        notes_.push_back("version " + std::to_string(v) + " of '" + name + "' cannot be rebuilt from the XOR parity of ranks " +
                         RankList(members) + ": a survivor's parity or file is damaged (its rank says which)");
      if (!why.ok() && why.code() != Code::kNotFound) notes_.push_back(why.ToString());
      return std::string();
    }
    // 3. Survivors XOR the others' chunks into their parity: each then holds
    // one chunk of the lost member, which it sends there.
    std::vector<Group::Outgoing> sends;
    std::vector<int> from;
    std::vector<uint8_t> piece;
    if (p != gone) {
      CAIRN_RETURN_IF_ERROR(XorScatter(group_, sets_, gone, bundle, h.chunk, &acc));
      Put(&piece, h.members[gone].bytes);
      Put(&piece, h.members[gone].crc);
      Put(&piece, static_cast<int64_t>(h.chunk));
      piece.insert(piece.end(), acc.begin(), acc.end());
      sends.push_back({.to = members[gone], .data = piece.data(), .bytes = piece.size()});
    } else {
      for (size_t j = 0; j < m; ++j) if (j != gone) from.push_back(members[j]);
    }
    CAIRN_RETURN_IF_ERROR(group_.Exchange(sends, from, &got));
    if (p != gone) return std::string();
    // 4. The lost member assembles its bundle, checks it and commits it.
    // A rebuild that does not check out is not written: the member then
    // lacks v, and the collective calls fall back as for any loss.
    auto rebuilt = Assemble(got, from);
    if (!rebuilt.ok()) {
      notes_.push_back(rebuilt.status().ToString());
      return std::string();
    }
    CAIRN_RETURN_IF_ERROR(redundancy::Unbundle(config_, config_.scratch_dir + "/" + name, *rebuilt,
                                               "the XOR parity of ranks " + RankList(members)));
    return "version " + std::to_string(v) + " of '" + name + "' rebuilt from the XOR parity of its set (ranks " +
           RankList(members) + ") (L3)";
  }

  std::vector<std::string> Notes() const override { return notes_; }

 private:
  Result<Header> ReadParityHeader(const std::string& name, int64_t v) {
    const std::string path = format::EntryPath(ParityDir(config_), name, format::EntryKind::kCheckpoint, v);
    CAIRN_ASSIGN_OR_RETURN(auto file, Fs(config_)->Open(path, os::OpenOptions{}));
    CAIRN_ASSIGN_OR_RETURN(Header h, ReadHeader(*file, path, sets_.members()));
    if (h.version != v || h.position != static_cast<uint32_t>(sets_.position))
      return Status::Corrupt(path + ": not this rank's parity of version " + std::to_string(v));
    return h;
  }

  // A survivor's parity chunk (CRC checked) and its own bundle (size and
  // CRC as the parity recorded them). kNotFound when it has no parity of v.
  Status Prepare(const std::string& name, int64_t v, Header* h, std::vector<uint8_t>* acc,
                 std::vector<uint8_t>* bundle) {
    const std::string path = format::EntryPath(ParityDir(config_), name, format::EntryKind::kCheckpoint, v);
    auto header = ReadParityHeader(name, v);
    if (!header.ok()) return header.status().code() == Code::kNotFound ? Status::NotFound(path) : header.status();
    *h = std::move(*header);
    // Read in place: the chunk straight into *acc, its CRC extended over it.
    CAIRN_ASSIGN_OR_RETURN(auto file, Fs(config_)->Open(path, os::OpenOptions{}));
    CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
    if (size != h->Size() + h->chunk + kCrc) return Status::Corrupt(path + ": changed while it was read");
    std::vector<uint8_t> head(h->Size());
    uint8_t tail[kCrc];
    acc->resize(h->chunk);
    CAIRN_RETURN_IF_ERROR(file->ReadAt(head.data(), head.size(), 0));
    CAIRN_RETURN_IF_ERROR(file->ReadAt(acc->data(), acc->size(), head.size()));
    CAIRN_RETURN_IF_ERROR(file->ReadAt(tail, kCrc, head.size() + acc->size()));
    if (crc32c::Extend(crc32c::Value(head.data(), head.size()), acc->data(), acc->size()) != format::le::Get32(tail))
      return Status::Corrupt(path + ": the XOR parity file's checksum does not match (damaged)");
    auto mine = redundancy::Bundle(config_, config_.scratch_dir, name, v);
    const Member& me = h->members[static_cast<size_t>(sets_.position)];
    if (!mine.ok() || static_cast<int64_t>(mine->size()) != me.bytes ||
        crc32c::Value(mine->data(), mine->size()) != me.crc) {
      return Status::Corrupt("rank " + std::to_string(group_.rank()) + "'s version " + std::to_string(v) + " of '" +
                             name + "' is not what its XOR parity protects (damaged or compacted since)");
    }
    *bundle = std::move(*mine);
    return Status::Ok();
  }

  // The lost member's bundle from the survivors' chunks (got[i] from
  // member from[i]), checked against the size and CRC the parity recorded.
  Result<std::vector<uint8_t>> Assemble(const std::vector<std::vector<uint8_t>>& got, const std::vector<int>& from) {
    const std::vector<int>& members = sets_.members();
    const size_t m = members.size(), p = static_cast<size_t>(sets_.position);
    std::vector<uint8_t> out;
    int64_t crc = -1;
    for (size_t i = 0; i < got.size(); ++i) {
      int64_t bytes = 0, c = 0, want = 0;
      size_t at = 0;
      if (!Get(got[i], &at, &bytes) || !Get(got[i], &at, &want) || !Get(got[i], &at, &c) || bytes < 0 || c <= 0 ||
          got[i].size() - at != static_cast<uint64_t>(c))
        return Status::Corrupt("a rebuilt chunk from rank " + std::to_string(from[i]) + " is malformed");
      out.resize(static_cast<size_t>(bytes));
      crc = want;
      const size_t j = static_cast<size_t>(std::find(members.begin(), members.end(), from[i]) - members.begin());
      const uint64_t off = ChunkOf(j, p, m) * static_cast<uint64_t>(c);
      if (off < out.size()) {
        const size_t n = std::min<uint64_t>(static_cast<uint64_t>(c), out.size() - off);
        std::copy_n(got[i].begin() + static_cast<long>(at), n, out.begin() + static_cast<long>(off));
      }
    }
    if (crc32c::Value(out.data(), out.size()) != static_cast<uint32_t>(crc))
      return Status::Corrupt("the version rebuilt from XOR parity does not have the checksum its parity recorded");
    return out;
  }

  Group& group_;
  const Sets& sets_;
  const Config& config_;
  std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<redundancy::Level> MakeLevel(Group& group, const Sets& sets, const Config& config) {
  return std::make_unique<ParityLevel>(group, sets, config);
}

}  // namespace cairn::parity
