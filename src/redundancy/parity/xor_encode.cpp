// L3 XOR parity: the streamed encoding of a set's version (xor_parity.hpp;
// docs/mpi.md "XOR parity (L3)"; docs/format.md 3.9 is normative).
#include <algorithm>
#include <cstring>
#include <optional>

#include "format/le.hpp"
#include "redundancy/bundle_stream.hpp"
#include "redundancy/parity/rs_code.hpp"
#include "redundancy/parity/xor_parity.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "redundancy/write_behind.hpp"
#include "util/crc32c.hpp"

namespace cairn::parity {

namespace {

using namespace impl;

// Bytes of each chunk one round of an encoding streams: c/8 as a
// rebuild's (WindowOf), but up to 4 MiB. An encoding's rounds go in
// lockstep across the set while the ranks compute, so each round costs
// every member's threads a wake-up; 1 MiB windows (128 rounds for 256 MiB
// per rank with RS) made an RS encoding take 1.2-1.4x as long as 4 MiB
// ones (8 MiB: no better), docs/results/2026-12-07-parity-write-behind.md.
// The rebuild keeps WindowOf's 1 MiB, measured best there.
uint64_t EncodeWindowOf(uint64_t chunk) {
  return std::clamp<uint64_t>((chunk + 7) / 8, uint64_t{16} << 10, uint64_t{4} << 20);
}
// Bytes of its own chunks past the current window a member asks to be
// read in (os::FileView::WillNeed) while the window is exchanged.
constexpr uint64_t kReadAheadBytes = uint64_t{4} << 20;

// One member's part in encoding one version, after the sizes are known
// (the stripes of stripes.hpp): its bundle streams out window after window
// (EncodeWindowOf(c) bytes of each chunk per round), each chunk's window
// to the members that hold a parity row of its stripe (one message per
// member, the pieces in row order; in place when it is one piece, as always
// with XOR); the other members' windows stream in, and each of this
// member's e parity rows is computed from its stripe's k data windows (XOR,
// or the Reed-Solomon row) and goes to its temp file in pieces of
// kRowWriteBytes, on a thread of its own (redundancy::WriteBehind) up to
// kRoundsBehind rounds behind the exchanges, while the next windows, read
// ahead, go out: a round's read, exchange and write no longer take turns.
// Nothing larger than a window is held: for XOR about 4m - 3 windows
// (m - 1 own ones, 3 rounds of m - 1 received ones, the parity row's),
// 52 MiB for m = 4 at 4 MiB windows (a whole-bundle encoding held the
// bundle, its parity chunk and the file, 1.5 bundles). The CRCs the header
// records are taken as the bytes stream. With `targets` (Reencode) only
// their parity is made: every member sends them its chunks of it, and only
// they receive.
class Encoder {
 public:
  // `bundle` may be null on a member that sends nothing (the target of an
  // XOR Reencode); `rs` is the code of an RS set (null: XOR); `targets`
  // (positions; empty: every member) the members whose parity is made.
  Encoder(Group& group, const Sets& sets, Header& h, redundancy::BundleReader* bundle,
          const ReedSolomon* rs, std::vector<size_t> targets = {})
      : group_(group),
        sets_(sets),
        st_(sets.stripes()),
        h_(h),
        bundle_(bundle),
        rs_(rs),
        targets_(std::move(targets)) {}

  // Every round; a failure here (a read, a write, a malformed message) is
  // kept in failure() and does not stop the rounds: the other members wait
  // for this one's messages. Only the transport's errors end it. `pause`
  // (may be null) before each window.
  Status Stream(const Config& config, const std::string& dir, const std::string& file,
                Pauser* pause = nullptr) {
    const std::vector<int>& members = sets_.members();
    const size_t p = static_cast<size_t>(sets_.position), k = st_.k();
    const uint64_t c = h_.chunk, window = EncodeWindowOf(c);
    const bool everyone = targets_.empty(), receives = everyone || Targets(p);
    // Who sends what to whom, the same every round: to[x] = (position, its
    // chunks it takes), sources_ the members this one receives from.
    std::vector<std::pair<size_t, std::vector<size_t>>> to;
    std::vector<bool> read(k);  // its chunks that go to them
    sources_.clear();
    from_.clear();
    for (size_t j = 0; j < st_.m; ++j) {
      if (j == p) continue;
      if (std::vector<size_t> chunks = PiecesFor(p, j);
          (everyone || Targets(j)) && !chunks.empty()) {
        for (size_t i : chunks) read[i] = true;
        to.emplace_back(j, std::move(chunks));
      }
      if (Source q = SourceOf(j); receives && !q.slots.empty()) {
        from_.push_back(members[j]);
        sources_.push_back(std::move(q));
      }
    }
    if (receives) {
      if (auto out = redundancy::PendingFile::Create(config, dir, file); out.ok()) {
        out_ = std::move(*out);
      } else {
        Fail(out.status());
      }
    }
    rows_.assign(receives ? st_.e : 0, std::vector<uint8_t>(std::min(RowBatch(window), c)));
    zeros_.assign(receives ? std::min(window, c) : 0, 0);
    data_.assign(st_.e, std::vector<const uint8_t*>(k));
    std::vector<const uint8_t*> piece(k);
    std::vector<std::vector<uint8_t>> packed(st_.m);
    std::vector<Group::Outgoing> sends;
    chunk_crcs_.assign(k, 0);
    parity_crcs_.assign(st_.e, 0);
    // A member that receives computes and writes round r's rows on
    // WriteBehind's thread while its exchanges go on (Rows); one that does
    // not receives nothing into `none`.
    std::optional<redundancy::WriteBehind> behind;
    if (receives)
      behind.emplace(kRoundsBehind, [this](const redundancy::WriteBehind::Round& got, uint64_t r) {
        Rows(got, r);
      });
    redundancy::WriteBehind::Round none;
    for (uint64_t off = 0, r = 0; off < c; off += window, ++r) {
      if (pause != nullptr) pause->Pause();
      const uint64_t n = std::min(window, c - off);
      sends.clear();
      for (size_t i = 0; i < k; ++i) {
        if (!read[i]) continue;
        piece[i] = OwnWindow(i * c + off, n, i);
        if (everyone) ExtendCrc(i, off, piece[i], n);
        // The next windows are read in while this one is exchanged.
        if (off + n < c)
          bundle_->WillNeed(i * c + off + n,
                            std::min(std::max(kReadAheadBytes, window), c - off - n));
      }
      for (const auto& [j, chunks] : to) {
        if (chunks.size() == 1) {
          sends.push_back({.to = members[j], .data = piece[chunks[0]], .bytes = n});
          continue;
        }
        packed[j].clear();
        for (size_t i : chunks) packed[j].insert(packed[j].end(), piece[i], piece[i] + n);
        sends.push_back({.to = members[j], .data = packed[j].data(), .bytes = packed[j].size()});
      }
      redundancy::WriteBehind::Round* got = behind ? behind->Next() : &none;
      CAIRN_RETURN_IF_ERROR(group_.Exchange(sends, from_, got));  // ~WriteBehind finishes
      if (behind) behind->Push(r);
    }
    if (behind) behind->Finish();
    Fail(rows_failure_);
    return Status::Ok();
  }

  // This member's bundle's CRC (over what it sent; a full encoding only).
  uint32_t BundleCrc() const { return impl::BundleCrc(chunk_crcs_, bundle_->size(), h_.chunk); }

  // Once every member's CRC is in h_: the header, the file's CRC (of the
  // header and the rows), durably; older parity files of `name` beyond
  // keep_versions go. Returns the file's size. Only after an error-free
  // Stream, on a member that received.
  Result<uint64_t> Keep(const Config& config, const std::string& name, const std::string& what) {
    const std::vector<uint8_t> head = EncodeHeader(h_);
    uint32_t crc = crc32c::Value(head.data(), head.size());
    for (uint32_t row : parity_crcs_) crc = crc32c::Combine(crc, row, h_.chunk);
    uint8_t tail[kCrc];
    format::le::Put32(tail, crc);
    Status s = out_->WriteAt(head.data(), head.size(), 0);
    if (s.ok()) s = out_->WriteAt(tail, kCrc, h_.Size() + h_.ParityBytes());
    if (s.ok()) s = out_->Commit();
    CAIRN_RETURN_IF_ERROR(s.WithContext(what));
    redundancy::Retain(config, ParityDir(config), name, /*chains=*/false);
    return h_.FileSize();
  }

  const Status& failure() const { return failure_; }

 private:
  void Fail(const Status& s) {
    if (failure_.ok() && !s.ok()) failure_ = s;
  }
  // Bytes of a row written at once: whole windows, kRowWriteBytes at least.
  static uint64_t RowBatch(uint64_t window) {
    return std::max<uint64_t>(1, kRowWriteBytes / window) * window;
  }
  bool Targets(size_t j) const {
    return std::find(targets_.begin(), targets_.end(), j) != targets_.end();
  }
  // The chunks of member `from` that member `to`'s parity rows take, in
  // row order: its chunk in the stripe of each row `to` holds, where
  // `from` holds data.
  std::vector<size_t> PiecesFor(size_t from, size_t to) const {
    std::vector<size_t> chunks;
    for (size_t t = 0; t < st_.e; ++t) {
      const size_t s = st_.StripeOfRow(to, t);
      if (!st_.HoldsParity(from, s)) chunks.push_back(st_.Chunk(from, s));
    }
    return chunks;
  }
  // A member this one receives from: the (row t, chunk i) of each window
  // in its message, in order (its chunk i is chunk i of row t's stripe).
  struct Source {
    std::vector<std::pair<size_t, size_t>> slots;
  };
  Source SourceOf(size_t q) const {
    const size_t p = static_cast<size_t>(sets_.position);
    Source src;
    for (size_t t = 0; t < st_.e; ++t) {
      const size_t s = st_.StripeOfRow(p, t);
      if (!st_.HoldsParity(q, s)) src.slots.emplace_back(t, st_.Chunk(q, s));
    }
    return src;
  }
  // Round r's parity rows (WriteBehind's thread): each computed from its
  // stripe's k data windows (XOR, or the Reed-Solomon row) into its
  // RowBatch, its CRC extended; the batch goes to the temp file once full
  // or at the row's end.
  void Rows(const redundancy::WriteBehind::Round& got, uint64_t r) {
    const uint64_t c = h_.chunk, window = EncodeWindowOf(c), off = r * window,
                   n = std::min(window, c - off), batch = RowBatch(window);
    Place(got, n);
    const uint64_t start = off / batch * batch, fill = off - start;
    const bool last = off + n == c || fill + n == batch;
    for (size_t t = 0; t < st_.e; ++t) {
      uint8_t* acc = rows_[t].data() + fill;
      if (rs_ != nullptr) {
        rs_->EncodeRow(t, data_[t].data(), acc, n);
      } else {
        XorOf(acc, data_[t].data(), st_.k(), n);
      }
      parity_crcs_[t] = crc32c::Extend(parity_crcs_[t], acc, n);
      if (last && out_ != nullptr && rows_failure_.ok())
        rows_failure_ = out_->WriteAt(rows_[t].data(), fill + n, h_.Size() + t * c + start);
    }
  }
  // The received messages' windows as each row's data symbols: data_[t][i]
  // is chunk i of row t's stripe (zeros and a failure for a malformed
  // message).
  void Place(const redundancy::WriteBehind::Round& got, uint64_t n) {
    for (size_t x = 0; x < got.size(); ++x) {
      const std::vector<std::pair<size_t, size_t>>& slots = sources_[x].slots;
      const bool whole = got[x].size() == slots.size() * n;
      if (!whole && rows_failure_.ok())
        rows_failure_ = Status::Corrupt("a parity piece from rank " + std::to_string(from_[x]) +
                                        " has the wrong size");
      for (size_t w = 0; w < slots.size(); ++w)
        data_[slots[w].first][slots[w].second] = whole ? got[x].data() + w * n : zeros_.data();
    }
  }
  // Bytes [at, at + n) of this member's bundle, the current window of its
  // chunk k: copied from the host cache into a buffer of the chunk's own
  // when the cache holds all of them, else in place where its file maps,
  // else read into that buffer (zeros past the end; zeros and a failure on
  // a read error).
  const uint8_t* OwnWindow(uint64_t at, uint64_t n, size_t k) {
    copies_.resize(st_.k());
    std::vector<uint8_t>& copy = copies_[k];
    copy.resize(n);
    if (bundle_->FromCache(at, copy.data(), n)) return copy.data();
    if (const uint8_t* in_place = bundle_->View(at, n); in_place != nullptr) return in_place;
    if (Status s = bundle_->Read(at, copy.data(), n); !s.ok()) {
      Fail(s);
      std::fill_n(copy.data(), n, 0);
    }
    return copy.data();
  }
  // Chunk k's CRC extended over its window at `off` (up to the bundle's end).
  void ExtendCrc(size_t k, uint64_t off, const uint8_t* piece, uint64_t n) {
    const uint64_t at = k * h_.chunk + off, total = bundle_->size();
    if (at < total) chunk_crcs_[k] = crc32c::Extend(chunk_crcs_[k], piece, std::min(n, total - at));
  }

  Group& group_;
  const Sets& sets_;
  const Stripes st_;
  Header& h_;
  redundancy::BundleReader* const bundle_;
  const ReedSolomon* const rs_;
  const std::vector<size_t> targets_;
  std::vector<std::vector<uint8_t>> copies_;      // chunk k's window, when it does not map
  std::vector<Source> sources_;                   // Stream's, in the order of from_
  std::vector<int> from_;                         // the sources' ranks
  std::vector<uint8_t> zeros_;                    // in place of a malformed message's windows
  std::unique_ptr<redundancy::PendingFile> out_;  // destroyed uncommitted: the temp file goes
  std::vector<uint32_t> chunk_crcs_;
  Status failure_;
  // Rows' (WriteBehind's thread's) while Stream runs: the rows of a round,
  // its symbols, their CRCs, the first failure (Stream takes it at the end).
  std::vector<std::vector<uint8_t>> rows_;  // row t's windows of a RowBatch
  std::vector<std::vector<const uint8_t*>> data_;
  std::vector<uint32_t> parity_crcs_;
  Status rows_failure_;
};

// What a member says of its bundle instead of its size.
constexpr int64_t kUnreadable = -1, kSuperseded = -2;

// Version v of `name` is not in this member's local directory and a newer
// one is: retention removed v (it keeps the newest versions) before its
// encoding's turn.
bool Superseded(const Config& config, const std::string& name, int64_t v) {
  const std::vector<int64_t> local =
      redundancy::Versions(config, config.scratch_dir, name);  // newest first
  return !local.empty() && local.front() > v &&
         std::find(local.begin(), local.end(), v) == local.end();
}

// The first member whose outcome (outcomes[q][0], a Code) is not OK, as
// that code with a message naming it (`why`); OK when every one's is.
Status FirstFailed(const std::vector<std::vector<int64_t>>& outcomes, const std::vector<int>& members,
                   const std::string& what, const std::string& why) {
  for (size_t q = 0; q < outcomes.size(); ++q) {
    if (outcomes[q][0] != static_cast<int64_t>(Code::kOk))
      return Status(static_cast<Code>(outcomes[q][0]), what + ": rank " + std::to_string(members[q]) + why);
  }
  return Status::Ok();
}

}  // namespace

Result<uint64_t> Encode(Group& group, const Sets& sets, const Config& config,
                        const std::string& name, int64_t version, Pauser* pause,
                        redundancy::Checkpoints* cache) {
  const std::vector<int>& members = sets.members();
  const size_t m = members.size();
  const std::string what = std::string("the ") + CodeName(sets.code) + " parity (L3) of version " +
                           std::to_string(version) + " of '" + name + "'";
  // 1. Every member learns every bundle's size (kUnreadable: its files do
  // not open; kSuperseded: retention removed them).
  auto bundle = redundancy::BundleReader::Open(config, config.scratch_dir, name, version, cache);
  const int64_t mine = bundle.ok()                         ? static_cast<int64_t>((*bundle)->size())
                       : Superseded(config, name, version) ? kSuperseded
                                                           : kUnreadable;
  CAIRN_ASSIGN_OR_RETURN(auto sizes, ShareValues(group, sets, {mine}));
  bool superseded = false;
  for (size_t q = 0; q < m; ++q) superseded = superseded || sizes[q][0] == kSuperseded;
  Header h{.code = sets.code,
           .parity = static_cast<uint32_t>(sets.parity),
           .version = version,
           .position = static_cast<uint32_t>(sets.position)};
  int64_t longest = 0;
  for (size_t q = 0; q < m; ++q) {
    const int64_t bytes = sizes[q][0];
    if (bytes == kSuperseded) continue;
    if (bytes < 0) {
      // The whole set skips this parity: each member sees the same sizes.
      if (!bundle.ok()) return bundle.status().WithContext(what);
      return Status::NotFound(what + ": rank " + std::to_string(members[q]) +
                              " of this rank's set cannot read its file");
    }
    h.members.push_back({members[q], bytes, 0});
    longest = std::max(longest, bytes);
  }
  if (superseded) return uint64_t{0};  // the whole set skips it: each member sees the same sizes
  h.chunk = ChunkFor(static_cast<uint64_t>(longest), m, sets.parity);
  // 2. Streamed (Encoder).
  const std::string dir = ParityDir(config) + "/" + name;
  std::optional<ReedSolomon> rs;
  if (sets.code == L3Code::kRs) {
    CAIRN_ASSIGN_OR_RETURN(rs, ReedSolomon::Create(m - sets.parity, sets.parity));
  }
  Encoder encoder(group, sets, h, bundle->get(), rs ? &*rs : nullptr);
  CAIRN_RETURN_IF_ERROR(encoder.Stream(config, dir, ParityFile(version), pause));
  // 3. Every member learns whether every other one's stream succeeded, and
  // its bundle's CRC: a parity protects only if the whole set has it, so
  // none commits unless all can (each one's temp file goes).
  const Status& failure = encoder.failure();
  CAIRN_ASSIGN_OR_RETURN(auto outcomes, ShareValues(group, sets, {static_cast<int64_t>(failure.code()),
                                                                  static_cast<int64_t>(encoder.BundleCrc())}));
  if (!failure.ok()) return failure.WithContext(what);
  CAIRN_RETURN_IF_ERROR(FirstFailed(
      outcomes, members, what,
      " of this rank's set could not read its file or write its parity (its error says which)"));
  for (size_t q = 0; q < m; ++q) h.members[q].crc = static_cast<uint32_t>(outcomes[q][1]);
  // 4. Stored durably.
  return encoder.Keep(config, name, what);
}

namespace impl {

Result<uint64_t> Reencode(Group& group, const Sets& sets, const Config& config,
                          const std::string& name, int64_t version,
                          const std::vector<size_t>& targets, const Header* survivor,
                          redundancy::BundleReader* bundle, bool proceed) {
  const std::vector<int>& members = sets.members();
  const size_t m = members.size(), p = static_cast<size_t>(sets.position);
  const bool target = std::find(targets.begin(), targets.end(), p) != targets.end();
  std::vector<int> ranks;
  for (size_t t : targets) ranks.push_back(members[t]);
  const std::string what = "encoding again the " + std::string(CodeName(sets.code)) +
                           " parity (L3) of rank(s) " + RankList(ranks) + " of version " +
                           std::to_string(version) + " of '" + name + "'";
  // 1. The targets say whether they have the version back; the survivors
  // say what their parity records of the set: the chunk size, every
  // member's bundle size and CRC (the same on each: the rebuild checked
  // them).
  std::vector<int64_t> mine(2 + 2 * m, 0);
  mine[0] = target ? (proceed ? 1 : 0) : 1;
  if (!target) {
    mine[1] = static_cast<int64_t>(survivor->chunk);
    for (size_t q = 0; q < m; ++q) {
      mine[2 + 2 * q] = survivor->members[q].bytes;
      mine[3 + 2 * q] = survivor->members[q].crc;
    }
  }
  CAIRN_ASSIGN_OR_RETURN(auto said, ShareValues(group, sets, mine));
  for (size_t t : targets)
    if (said[t][0] == 0) return uint64_t{0};
  Header h;
  if (target) {
    size_t from = 0;  // the first survivor
    while (std::find(targets.begin(), targets.end(), from) != targets.end()) ++from;
    const std::vector<int64_t>& record = said[from];
    h = Header{.code = sets.code,
               .parity = static_cast<uint32_t>(sets.parity),
               .version = version,
               .position = static_cast<uint32_t>(p),
               .chunk = static_cast<uint64_t>(record[1])};
    for (size_t q = 0; q < m; ++q)
      h.members.push_back({members[q], record[2 + 2 * q], static_cast<uint32_t>(record[3 + 2 * q])});
  } else {
    h = *survivor;
  }
  std::optional<ReedSolomon> rs;
  if (sets.code == L3Code::kRs) {
    CAIRN_ASSIGN_OR_RETURN(rs, ReedSolomon::Create(m - sets.parity, sets.parity));
  }
  // 2. Streamed to the targets alone (Encoder).
  Encoder encoder(group, sets, h, bundle, rs ? &*rs : nullptr, targets);
  CAIRN_RETURN_IF_ERROR(encoder.Stream(config, ParityDir(config) + "/" + name, ParityFile(version)));
  // 3. A target keeps its parity only if every member streamed without
  // error.
  const Status& failure = encoder.failure();
  CAIRN_ASSIGN_OR_RETURN(auto outcomes, ShareValues(group, sets, {static_cast<int64_t>(failure.code())}));
  if (!failure.ok()) return failure.WithContext(what);
  if (!target) return uint64_t{0};
  CAIRN_RETURN_IF_ERROR(FirstFailed(outcomes, members, what, " could not read its file (its error says why)"));
  return encoder.Keep(config, name, what);
}

}  // namespace impl

}  // namespace cairn::parity
