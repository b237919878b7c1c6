// L3 XOR parity: the parity level of redundancy::Recover, the streamed
// rebuild of a lost member (xor_parity.hpp; docs/mpi.md "XOR parity (L3)";
// docs/format.md 3.9 is normative).
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "cairn/cairn.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/bundle_stream.hpp"
#include "redundancy/parity/rebuilt_sink.hpp"
#include "redundancy/parity/rs_rebuild.hpp"
#include "redundancy/parity/xor_parity.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "redundancy/parity/xor_survivor.hpp"
#include "redundancy/write_behind.hpp"
#include "util/clock.hpp"
#include "util/crc32c.hpp"

namespace cairn::parity {

namespace {

using namespace impl;
using redundancy::Fs;
using redundancy::Get;
using redundancy::Put;

// Recover's steps for the parity level (docs/mpi.md "XOR parity (L3)").
class ParityLevel final : public redundancy::Level {
 public:
  ParityLevel(Group& group, const Sets& sets, const Config& config, MpiStats* times)
      : group_(group), sets_(sets), config_(config), times_(times) {}

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
    // 2. Versions the set can rebuild for this member: it lacks them, at
    // most e members do (XOR: it alone), and every other one has them and
    // its parity.
    std::set<int64_t> offers;
    int64_t top = -1;  // the set's newest parity
    const size_t e = sets_.parity;
    for (size_t q = 0; q < m; ++q) {
      for (int64_t v : holds[q]) {
        if (v > bound) continue;
        top = std::max(top, v);
        size_t lacking = 0;
        bool others = !has[p].contains(v);
        for (size_t o = 0; o < m && others; ++o) {
          lacking += has[o].contains(v) ? 0 : 1;
          others = !has[o].contains(v) || holds[o].contains(v);
        }
        if (others && lacking <= e) offers.insert(v);
      }
    }
    // 3. Sets that lost more than e members of their newest parity's
    // version cannot rebuild: every rank learns which (one reduction) and
    // says so.
    size_t lost = 0;
    for (size_t q = 0; q < m; ++q) lost += top >= 0 && !has[q].contains(top) ? 1 : 0;
    std::vector<int64_t> flags(static_cast<size_t>(group_.size()), 0);
    if (lost > e && !has[p].contains(top)) flags[static_cast<size_t>(group_.rank())] = top + 1;
    CAIRN_RETURN_IF_ERROR(group_.AllReduce(Group::Op::kMax, flags.data(), flags.size()));
    for (const std::vector<int>& set : sets_.all) {
      std::vector<int> gone;
      int64_t version = -1;
      for (int r : set) {
        if (flags[static_cast<size_t>(r)] == 0) continue;
        gone.push_back(r);
        version = flags[static_cast<size_t>(r)] - 1;
      }
      if (gone.size() <= e) continue;
      notes_.push_back(std::string("the ") + CodeName(sets_.code) + " set of ranks " +
                       RankList(set) + " lost ranks " + RankList(gone) + " (version " +
                       std::to_string(version) + " of '" + name + "'): its parity rebuilds " +
                       std::to_string(e) + " lost member(s) per set, not " +
                       std::to_string(gone.size()) +
                       " (L3); the job falls back to the persistent level (L4), or to an older "
                       "version every rank "
                       "has");
    }
    return std::vector<int64_t>(offers.rbegin(), offers.rend());
  }

  Result<std::string> Fetch(const std::string& name, int64_t v, bool need) override {
    const std::vector<int>& members = sets_.members();
    const size_t m = members.size(), p = static_cast<size_t>(sets_.position);
    // 1. Who in the set lacks v; parity serves a set with 1 to e of them
    // (XOR: exactly one; RS: rs_rebuild.hpp).
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
    if (lost.empty() || lost.size() > sets_.parity) return std::string();
    if (sets_.code == L3Code::kRs)
      return RebuildRs(group_, sets_, config_, times_, name, v, lost, &notes_);
    const size_t gone = lost[0];
    // 2. The survivors open their parity and bundle and check what needs no
    // data read (headers, sizes); every member learns each survivor's state
    // (0 ok, 1 absent, 2 damaged) and what its parity records of the lost
    // member. All go on only if every survivor can and they agree.
    Survivor s(group_, sets_, config_, times_);
    Status why;
    if (p != gone) why = s.Open(name, v);
    CAIRN_ASSIGN_OR_RETURN(const Agreed a, AgreeOnSurvivors(group_, sets_, {gone}, s, why));
    if (a.worst != 0) {
      NoteNoRebuild(sets_, name, v, a, p == gone, why, &notes_);
      return std::string();
    }
    // 3. Streamed: the survivors send, the lost member checks and writes.
    // 4. The lost member tells the set whether what it received checked out
    // (ReceiveRebuilt); only when it did not do the survivors check their
    // own files, whole, to say which is damaged (Diagnose).
    // 5. The lost member's own parity of v, lost with its node, is encoded
    // again (Reencode): the set protects v against the next loss at once.
    if (p == gone) return RebuildLost(name, v, gone, a.chunk, a.records[0]);
    CAIRN_RETURN_IF_ERROR(s.Send(gone));
    CAIRN_ASSIGN_OR_RETURN(const bool refused, Outcome(gone, false));
    if (refused && s.failure().ok()) s.failure() = s.Diagnose();
    if (!s.failure().ok()) notes_.push_back(s.failure().ToString());
    SteadyTime t = std::chrono::steady_clock::now();
    auto again = Reencode(group_, sets_, config_, name, v, {gone}, &s.header(), s.bundle(), true);
    Lap(&t, &times_->l3_encode_s);
    if (!again.ok()) notes_.push_back(again.status().ToString());
    return std::string();
  }

  // Steps 3 to 5 on the lost member: receive and check the rebuilt version,
  // then its own parity of it again.
  Result<std::string> RebuildLost(const std::string& name, int64_t v, size_t gone, uint64_t chunk,
                                  const Member& record) {
    auto served = ReceiveRebuilt(name, v, gone, chunk, record);
    const bool back = served.ok() && !served->empty();
    SteadyTime t = std::chrono::steady_clock::now();
    auto again = Reencode(group_, sets_, config_, name, v, {gone}, nullptr, nullptr, back);
    Lap(&t, &times_->l3_encode_s);
    if (!again.ok())
      notes_.push_back(again.status().ToString() + "; the set protects version " +
                       std::to_string(v) + " again from its next XOR parity (L3)");
    if (back && again.ok()) *served += ", and its own parity of it encoded again";
    return served;
  }

  // A member that got v back from another level (its partner's copy) has
  // its data but not its own parity of v, which went with its node: the set
  // encodes it again, as after a rebuild (Reencode), so that v survives
  // the set's next loss at once. Only when every other member has v and
  // its parity, and at most e members lack theirs.
  Status Refill(const std::string& name, int64_t v) override {
    const size_t m = sets_.members().size();
    const bool parity = ReadParityHeader(name, v).ok();
    Survivor s(group_, sets_, config_, times_);
    std::unique_ptr<redundancy::BundleReader> own;
    bool ready = false;
    if (parity) {
      ready = s.Open(name, v).ok();
    } else if (auto bundle = redundancy::BundleReader::Open(config_, config_.scratch_dir, name, v);
               bundle.ok()) {
      own = std::move(*bundle);
      ready = true;
    }
    CAIRN_ASSIGN_OR_RETURN(auto said, ShareValues(group_, sets_, {ready ? 1 : 0, parity ? 1 : 0}));
    std::vector<size_t> targets;
    bool all_ready = true;
    for (size_t q = 0; q < m; ++q) {
      all_ready = all_ready && said[q].size() == 2 && said[q][0] == 1;
      if (said[q].size() == 2 && said[q][1] == 0) targets.push_back(q);
    }
    if (targets.empty() || targets.size() > sets_.parity || !all_ready) return Status::Ok();
    SteadyTime t = std::chrono::steady_clock::now();
    auto again = Reencode(group_, sets_, config_, name, v, targets, parity ? &s.header() : nullptr,
                          parity ? s.bundle() : own.get(), true);
    Lap(&t, &times_->l3_encode_s);
    if (parity) return Status::Ok();
    notes_.push_back(again.ok() ? "version " + std::to_string(v) + " of '" + name + "': its own " +
                                      CodeName(sets_.code) + " parity encoded again (L3)"
                                : again.status().ToString());
    return Status::Ok();
  }

  std::vector<std::string> Notes() const override { return notes_; }

 private:
  Result<Header> ReadParityHeader(const std::string& name, int64_t v) {
    const std::string path = ParityPath(config_, name, v);
    CAIRN_ASSIGN_OR_RETURN(auto file, Fs(config_)->Open(path, os::OpenOptions{}));
    return ReadVersionHeader(*file, path, v, sets_);
  }

  // After the streaming, every member of the set: the lost member says
  // whether the rebuild was refused (its data did not check out), the
  // survivors learn it.
  Result<bool> Outcome(size_t gone, bool refused) {
    CAIRN_ASSIGN_OR_RETURN(auto said, ShareValues(group_, sets_, {refused ? 1 : 0}));
    return said[gone][0] != 0;  // a malformed message (-1) refuses too
  }

  // The lost member's part: each round brings one window of each of its
  // chunks (chunk k from the survivor whose parity held it). It extends
  // each chunk's CRC as the pieces arrive and writes them where they
  // belong: straight into the version file when the bundle is one file (a
  // full version), else into memory (a chain: where its later files begin
  // is known only once their heads arrive), unbundled at the end; a thread
  // of its own does that a few rounds behind the receiving. It
  // commits only if the whole bundle has the recorded CRC and every
  // survivor's verdict is 0, and tells the set either way (Outcome);
  // otherwise the temp file goes and nothing is written.
  Result<std::string> ReceiveRebuilt(const std::string& name, int64_t v, size_t gone, uint64_t c,
                                     const Member& record) {
    const std::vector<int>& members = sets_.members();
    const size_t m = members.size();
    const uint64_t window = WindowOf(c), rounds = (c + window - 1) / window,
                   total = static_cast<uint64_t>(record.bytes);
    std::vector<int> from;  // from[k]: the survivor whose parity held chunk k
    for (size_t k = 0; k + 1 < m; ++k) from.push_back(members[(k + gone + 1) % m]);
    std::vector<uint32_t> crc(m - 1, 0);
    Sink sink;
    Status bad, io;
    int64_t verdict = 0;
    // Round r's windows (from survivor from[k] its chunk k's), checked and
    // written, on WriteBehind's thread while the next rounds arrive.
    auto consume = [&](const std::vector<std::vector<uint8_t>>& got, uint64_t r) {
      const uint64_t off = (r - 1) * window, n = std::min(window, c - off);
      SteadyTime t = std::chrono::steady_clock::now();
      for (size_t k = 0; k < got.size(); ++k) {
        if (got[k].size() != n + kVerdict) {
          if (bad.ok())
            bad = Status::Corrupt("a rebuilt piece from rank " + std::to_string(from[k]) +
                                  " is malformed");
          continue;
        }
        int64_t said = 0;
        std::memcpy(&said, got[k].data() + n, kVerdict);
        verdict = std::max(verdict, said);
        const uint64_t at = k * c + off;
        if (at >= total) continue;
        const uint64_t len = std::min(n, total - at);
        crc[k] = crc32c::Extend(crc[k], got[k].data(), len);
        Lap(&t, &times_->l3_crc_s);
        if (!io.ok() || !bad.ok()) continue;
        if (r == 1 && k == 0)
          io = sink.Begin(config_, config_.scratch_dir + "/" + name, v, got[0].data(), len, total);
        if (io.ok()) io = sink.Place(got[k].data(), at, len);
        Lap(&t, &times_->l3_write_s);
      }
    };
    // Rounds arrive up to kRoundsBehind ahead of their checks and writes
    // (WriteBehind). The state above is its thread's until Finish.
    redundancy::WriteBehind behind(kRoundsBehind, consume);
    SteadyTime t = std::chrono::steady_clock::now();
    for (uint64_t r = 1; r <= rounds; ++r) {
      redundancy::WriteBehind::Round* got = behind.Next();
      Lap(&t, &times_->l3_write_wait_s);
      CAIRN_RETURN_IF_ERROR(group_.Exchange({}, from, got));
      Lap(&t, &times_->l3_exchange_s);
      behind.Push(r);
    }
    behind.Finish();
    Lap(&t, &times_->l3_write_wait_s);
    // Every survivor's reads succeeded and the whole rebuilt bundle has the
    // CRC the parity recorded: that covers everything the rebuild used.
    if (bad.ok() && (verdict != 0 || BundleCrc(crc, total, c) != record.crc))
      bad = Status::Corrupt("version " + std::to_string(v) + " of '" + name +
                            "' cannot be rebuilt from the XOR parity of ranks " + RankList(members) +
                            ": the rebuilt data does not have the checksum the parity recorded (a survivor's "
                            "parity or file is damaged; its rank says which)");
    CAIRN_RETURN_IF_ERROR(Outcome(gone, !bad.ok()).status());
    if (!io.ok()) return io;
    if (!bad.ok()) {
      notes_.push_back(bad.ToString());
      return std::string();
    }
    t = std::chrono::steady_clock::now();
    CAIRN_RETURN_IF_ERROR(sink.Commit(config_, config_.scratch_dir + "/" + name,
                                      "the XOR parity of ranks " + RankList(members)));
    Lap(&t, &times_->l3_sync_s);
    return "version " + std::to_string(v) + " of '" + name +
           "' rebuilt from the XOR parity of its set (ranks " + RankList(members) + ") (L3)";
  }

  Group& group_;
  const Sets& sets_;
  const Config& config_;
  MpiStats* const times_;
  std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<redundancy::Level> MakeLevel(Group& group, const Sets& sets, const Config& config,
                                             MpiStats* times) {
  return std::make_unique<ParityLevel>(group, sets, config, times);
}

}  // namespace cairn::parity

