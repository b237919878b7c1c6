// The Reed-Solomon rebuild (rs_rebuild.hpp; docs/format.md 3.9).
#include "redundancy/parity/rs_rebuild.hpp"

#include <algorithm>
#include <cstring>

#include "cairn/cairn.hpp"
#include "redundancy/parity/rebuilt_sink.hpp"
#include "redundancy/parity/rs_code.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "redundancy/parity/xor_survivor.hpp"
#include "redundancy/write_behind.hpp"
#include "util/crc32c.hpp"

namespace cairn::parity::impl {

namespace {

// Which symbols of which stripes go where: the same on every member.
struct Plan {
  Stripes st;
  std::vector<size_t> lost;
  // chosen[s]: the first k symbol ids of stripe s whose holders survive.
  std::vector<std::vector<size_t>> chosen;

  bool Lost(size_t q) const { return std::find(lost.begin(), lost.end(), q) != lost.end(); }
  // Member q's symbol of stripe s, when it is one of the chosen ones.
  bool Sends(size_t q, size_t s) const {
    const auto& c = chosen[s];
    return std::find(c.begin(), c.end(), st.Symbol(q, s)) != c.end();
  }
  // Whether survivor q sends anything to lost member g (some chunk of g's
  // stripe takes q's symbol).
  bool SendsTo(size_t q, size_t g) const {
    for (size_t i = 0; i < st.k(); ++i)
      if (Sends(q, st.StripeOfChunk(g, i))) return true;
    return false;
  }
};

Plan MakePlan(const Stripes& st, const std::vector<size_t>& lost) {
  Plan plan{.st = st, .lost = lost, .chosen = std::vector<std::vector<size_t>>(st.m)};
  for (size_t s = 0; s < st.m; ++s) {
    for (size_t id = 0; id < st.m && plan.chosen[s].size() < st.k(); ++id)
      if (!plan.Lost(st.Holder(s, id))) plan.chosen[s].push_back(id);
  }
  return plan;
}

// A survivor's part: per round, to each lost member it serves, its chosen
// symbols' windows of that member's stripes, then its verdict so far.
Status Send(Group& group, const Sets& sets, const Plan& plan, Survivor& s, MpiStats* times) {
  const std::vector<int>& members = sets.members();
  const size_t p = static_cast<size_t>(sets.position), k = plan.st.k();
  const uint64_t c = s.header().chunk, window = WindowOf(c);
  std::vector<std::vector<uint8_t>> out(plan.lost.size());
  std::vector<uint8_t> copy(std::min(window, c));
  std::vector<std::vector<uint8_t>> got;
  SteadyTime t = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < c; off += window) {
    const uint64_t n = std::min(window, c - off);
    std::vector<Group::Outgoing> sends;
    for (size_t l = 0; l < plan.lost.size(); ++l) {
      const size_t g = plan.lost[l];
      if (!plan.SendsTo(p, g)) continue;
      out[l].clear();
      for (size_t i = 0; i < k; ++i) {
        const size_t stripe = plan.st.StripeOfChunk(g, i);
        if (!plan.Sends(p, stripe)) continue;
        const uint8_t* w = s.SymbolWindow(stripe, off, n, copy.data());
        out[l].insert(out[l].end(), w, w + n);
      }
      const int64_t verdict = s.failure().ok() ? 0 : 2;
      out[l].resize(out[l].size() + kVerdict);
      std::memcpy(out[l].data() + out[l].size() - kVerdict, &verdict, kVerdict);
      sends.push_back({.to = members[g], .data = out[l].data(), .bytes = out[l].size()});
    }
    Lap(&t, &times->l3_read_s);
    CAIRN_RETURN_IF_ERROR(group.Exchange(sends, {}, &got));
    Lap(&t, &times->l3_exchange_s);
  }
  return Status::Ok();
}

// A lost member's part: per round, the chosen symbols of each of its
// chunks' stripes arrive; on WriteBehind's thread, up to kRoundsBehind
// rounds behind the receiving, each chunk's window is decoded, its CRC
// extended and placed (Sink). It commits only if the whole bundle checked
// out.
class Receiver {
 public:
  Receiver(const Sets& sets, const Config& config, const Plan& plan, const std::string& name,
           int64_t v, uint64_t c, const Member& record, MpiStats* times)
      : sets_(sets),
        config_(config),
        plan_(plan),
        name_(name),
        v_(v),
        c_(c),
        window_(WindowOf(c)),
        total_(static_cast<uint64_t>(record.bytes)),
        record_(record),
        times_(times),
        g_(static_cast<size_t>(sets.position)),
        k_(plan.st.k()) {
    for (size_t q = 0; q < sets.members().size(); ++q) {
      if (plan.Lost(q) || !plan.SendsTo(q, g_)) continue;
      from_.push_back(sets.members()[q]);
      from_pos_.push_back(q);
    }
  }

  // Ok(true) when the bundle came back, checked and committed; Ok(false)
  // when it did not check out (why in *bad); an error of the transport or
  // of the local file system otherwise.
  Result<bool> Run(Group& group, const ReedSolomon& rs, Status* bad) {
    for (size_t i = 0; i < k_; ++i) {
      CAIRN_ASSIGN_OR_RETURN(auto d,
                             rs.MakeDecoder(plan_.chosen[plan_.st.StripeOfChunk(g_, i)], {i}));
      decoders_.push_back(std::move(d));
    }
    crc_.assign(k_, 0);
    in_.assign(k_, std::vector<const uint8_t*>(k_));
    decoded_.resize(std::min(window_, c_));
    zeros_.assign(std::min(window_, c_), 0);
    {
      redundancy::WriteBehind behind(kRoundsBehind, [&](const redundancy::WriteBehind::Round& got,
                                                        uint64_t r) { Consume(got, r); });
      SteadyTime t = std::chrono::steady_clock::now();
      for (uint64_t r = 1; (r - 1) * window_ < c_; ++r) {
        redundancy::WriteBehind::Round* got = behind.Next();
        Lap(&t, &times_->l3_write_wait_s);
        CAIRN_RETURN_IF_ERROR(group.Exchange({}, from_, got));
        Lap(&t, &times_->l3_exchange_s);
        behind.Push(r);
      }
      behind.Finish();
      Lap(&t, &times_->l3_write_wait_s);
    }
    if (bad_.ok() && (verdict_ != 0 || BundleCrc(crc_, total_, c_) != record_.crc))
      bad_ = Status::Corrupt("version " + std::to_string(v_) + " of '" + name_ +
                             "' cannot be rebuilt from the Reed-Solomon parity of ranks " +
                             RankList(sets_.members()) +
                             ": the rebuilt data does not have the checksum the parity recorded (a "
                             "survivor's parity or file is damaged; its rank says which)");
    *bad = bad_;
    if (!bad_.ok()) return false;
    CAIRN_RETURN_IF_ERROR(io_);
    SteadyTime t = std::chrono::steady_clock::now();
    CAIRN_RETURN_IF_ERROR(
        sink_.Commit(config_, config_.scratch_dir + "/" + name_,
                     "the Reed-Solomon parity of ranks " + RankList(sets_.members())));
    Lap(&t, &times_->l3_sync_s);
    return true;
  }

 private:
  // Round r (WriteBehind's thread): its messages' windows as each chunk's
  // stripe symbols, then each chunk's window decoded, checked and placed.
  void Consume(const redundancy::WriteBehind::Round& got, uint64_t r) {
    const uint64_t off = (r - 1) * window_, n = std::min(window_, c_ - off);
    for (size_t f = 0; f < got.size(); ++f) Unpack(got[f], f, n);
    SteadyTime t = std::chrono::steady_clock::now();
    for (size_t i = 0; i < k_; ++i) {
      uint8_t* out = decoded_.data();
      decoders_[i].Apply(in_[i].data(), &out, n);
      Lap(&t, &times_->l3_xor_s);
      const uint64_t at = i * c_ + off;
      if (at >= total_) continue;
      const uint64_t len = std::min(n, total_ - at);
      crc_[i] = crc32c::Extend(crc_[i], decoded_.data(), len);
      Lap(&t, &times_->l3_crc_s);
      if (!io_.ok() || !bad_.ok()) continue;
      if (off == 0 && i == 0)
        io_ = sink_.Begin(config_, config_.scratch_dir + "/" + name_, v_, decoded_.data(), len,
                          total_);
      if (io_.ok()) io_ = sink_.Place(decoded_.data(), at, len);
      Lap(&t, &times_->l3_write_s);
    }
  }
  // Sender f's message: its symbols of this member's stripes, n bytes each
  // (in chunk order), then its verdict. A malformed one counts as zeros and
  // a refusal.
  void Unpack(const std::vector<uint8_t>& msg, size_t f, uint64_t n) {
    const size_t q = from_pos_[f];
    size_t pieces = 0, at = 0;
    for (size_t i = 0; i < k_; ++i) pieces += plan_.Sends(q, plan_.st.StripeOfChunk(g_, i)) ? 1 : 0;
    const bool whole = msg.size() == pieces * n + kVerdict;
    if (!whole && bad_.ok())
      bad_ = Status::Corrupt("a rebuilt piece from rank " + std::to_string(from_[f]) +
                             " is malformed");
    for (size_t i = 0; i < k_; ++i) {
      const size_t stripe = plan_.st.StripeOfChunk(g_, i);
      if (!plan_.Sends(q, stripe)) continue;
      const auto& ids = plan_.chosen[stripe];
      const size_t slot =
          std::find(ids.begin(), ids.end(), plan_.st.Symbol(q, stripe)) - ids.begin();
      in_[i][slot] = whole ? msg.data() + at : zeros_.data();
      at += n;
    }
    int64_t said = 2;
    if (whole) std::memcpy(&said, msg.data() + at, kVerdict);
    verdict_ = std::max(verdict_, said);
  }

  const Sets& sets_;
  const Config& config_;
  const Plan& plan_;
  const std::string& name_;
  const int64_t v_;
  const uint64_t c_, window_, total_;
  const Member record_;
  MpiStats* const times_;
  const size_t g_, k_;
  std::vector<int> from_;         // the survivors that send to this member
  std::vector<size_t> from_pos_;  // their positions
  // WriteBehind's thread's until Finish.
  std::vector<ReedSolomon::Decoder> decoders_;  // chunk i's
  std::vector<uint32_t> crc_;
  std::vector<std::vector<const uint8_t*>> in_;  // chunk i's stripe's chosen symbols, this round
  std::vector<uint8_t> decoded_, zeros_;
  Sink sink_;
  Status io_, bad_;
  int64_t verdict_ = 0;
};

}  // namespace

Result<std::string> RebuildRs(Group& group, const Sets& sets, const Config& config, MpiStats* times,
                              const std::string& name, int64_t v, const std::vector<size_t>& lost,
                              std::vector<std::string>* notes) {
  const std::vector<int>& members = sets.members();
  const size_t p = static_cast<size_t>(sets.position);
  const Plan plan = MakePlan(sets.stripes(), lost);
  const bool is_lost = plan.Lost(p);
  // 1. The survivors open their parity and bundle and check what needs no
  // data read; every member learns each survivor's state and records. All
  // go on only if every survivor can and they agree.
  Survivor s(group, sets, config, times);
  Status why;
  if (!is_lost) why = s.Open(name, v);
  CAIRN_ASSIGN_OR_RETURN(const Agreed a, AgreeOnSurvivors(group, sets, lost, s, why));
  if (a.worst != 0) {
    NoteNoRebuild(sets, name, v, a, is_lost, why, notes);
    return std::string();
  }
  CAIRN_ASSIGN_OR_RETURN(const ReedSolomon rs, ReedSolomon::Create(plan.st.k(), plan.st.e));
  // 2. Streamed: the survivors send, each lost member decodes, checks and
  // commits.
  Status bad;
  bool back = false;
  if (is_lost) {
    const size_t l = static_cast<size_t>(std::find(lost.begin(), lost.end(), p) - lost.begin());
    Receiver receiver(sets, config, plan, name, v, a.chunk, a.records[l], times);
    CAIRN_ASSIGN_OR_RETURN(back, receiver.Run(group, rs, &bad));
  } else {
    CAIRN_RETURN_IF_ERROR(Send(group, sets, plan, s, times));
  }
  // 3. Every member learns whether every lost member got v back; when one
  // refused what arrived, the survivors check their own files, whole, to
  // say which is damaged.
  CAIRN_ASSIGN_OR_RETURN(auto said, ShareValues(group, sets, {is_lost && !back ? 1 : 0}));
  bool all_back = true;
  for (size_t g : lost) all_back = all_back && said[g][0] == 0;
  if (!bad.ok()) notes->push_back(bad.ToString());
  if (!is_lost) {
    if (!all_back && s.failure().ok()) s.failure() = s.Diagnose();
    if (!s.failure().ok()) notes->push_back(s.failure().ToString());
  }
  if (!all_back) return std::string();
  // 4. The lost members' parity rows, lost with their nodes, are encoded
  // again from every member's bundle (the lost ones' rebuilt ones).
  SteadyTime t = std::chrono::steady_clock::now();
  std::unique_ptr<redundancy::BundleReader> rebuilt;
  if (is_lost) {
    auto opened = redundancy::BundleReader::Open(config, config.scratch_dir, name, v);
    if (opened.ok()) rebuilt = std::move(*opened);
  }
  auto again = Reencode(group, sets, config, name, v, lost, is_lost ? nullptr : &s.header(),
                        is_lost ? rebuilt.get() : s.bundle(), rebuilt != nullptr);
  Lap(&t, &times->l3_encode_s);
  if (!again.ok() && is_lost)
    notes->push_back(again.status().ToString() + "; the set protects version " + std::to_string(v) +
                     " again from its next Reed-Solomon parity (L3)");
  if (!is_lost) return std::string();
  return "version " + std::to_string(v) + " of '" + name +
         "' rebuilt from the Reed-Solomon parity of its set (ranks " + RankList(members) +
         ") (L3)" + (again.ok() && *again > 0 ? ", and its own parity of it encoded again" : "");
}

}  // namespace cairn::parity::impl
