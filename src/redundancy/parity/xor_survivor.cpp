// L3 XOR parity: a survivor's side of a rebuild (xor_survivor.hpp;
// docs/mpi.md "XOR parity (L3)"; docs/format.md 3.9 is normative).
#include "redundancy/parity/xor_survivor.hpp"

#include <algorithm>
#include <cstring>

#include "cairn/cairn.hpp"
#include "format/le.hpp"
#include "format/naming.hpp"
#include "util/crc32c.hpp"

namespace cairn::parity::impl {

using redundancy::Fs;

void Lap(SteadyTime* t, double* phase) {
  const SteadyTime now = std::chrono::steady_clock::now();
  *phase += SecondsBetween(*t, now);
  *t = now;
}

std::string ParityPath(const Config& c, const std::string& name, int64_t v) {
  return format::EntryPath(ParityDir(c), name, format::EntryKind::kCheckpoint, v);
}

Result<Header> ReadVersionHeader(os::File& file, const std::string& path, int64_t v,
                                 const Sets& sets) {
  CAIRN_ASSIGN_OR_RETURN(Header h, ReadHeader(file, path, sets));
  if (h.version != v || h.position != static_cast<uint32_t>(sets.position))
    return Status::Corrupt(path + ": not this rank's parity of version " + std::to_string(v));
  return h;
}

// A survivor's parity (header checked) and bundle (of the size the parity
// recorded); their data are checked while they stream. kNotFound when it
// has no parity of v.
Status Survivor::Open(const std::string& name, int64_t v) {
  name_ = name;
  path_ = ParityPath(config_, name, v);
  auto file = Fs(config_)->Open(path_, os::OpenOptions{});
  if (!file.ok())
    return file.status().code() == Code::kNotFound ? Status::NotFound(path_) : file.status();
  CAIRN_ASSIGN_OR_RETURN(header_, ReadVersionHeader(**file, path_, v, sets_));
  parity_ = std::move(*file);
  if (auto view = parity_->Map(); view.ok()) parity_view_ = std::move(view).value();
  auto bundle = redundancy::BundleReader::Open(config_, config_.scratch_dir, name, v);
  if (!bundle.ok() || static_cast<int64_t>((*bundle)->size()) !=
                          header_.members[static_cast<size_t>(sets_.position)].bytes)
    return NotProtected(name, v);
  bundle_ = std::move(*bundle);
  return Status::Ok();
}

Status Survivor::NotProtected(const std::string& name, int64_t v) const {
  return Status::Corrupt("rank " + std::to_string(group_.rank()) + "'s version " +
                         std::to_string(v) + " of '" + name + "' is not what its " +
                         CodeName(sets_.code) + " parity protects (damaged or compacted since)");
}

// A survivor's part of a rebuild, window after window (WindowOf(c) bytes
// of each chunk; docs/mpi.md): it reads the chunks of its bundle that the
// other survivors' parity XORed in (not the one the lost member's parity
// holds: the rebuild does not use it) and its parity window, sends each
// other survivor its chunk and XORs what it receives with its parity
// window, which is then the lost member's chunk ChunkOf(p, gone) there:
// that goes to the lost member in the next round, with this survivor's
// verdict so far (0: every read succeeded). Two windows alternate, one
// being sent while the next is built. Its files are read in place where
// they can be mapped (os::FileView: no copy; MPI sends from the page
// cache), else copied out. No CRC is taken here: the lost
// member checks the whole rebuilt bundle against the CRC the parity
// recorded, which any damage to what the rebuild used changes (Diagnose
// names the damaged file when it does). Its own failures do not stop the
// rounds: the others wait for them.
Status Survivor::Send(size_t gone) {
  const std::vector<int>& members = sets_.members();
  const size_t m = members.size(), p = static_cast<size_t>(sets_.position);
  const uint64_t c = header_.chunk, window = WindowOf(c), w = std::min(window, c),
                 rounds = (c + window - 1) / window;
  const uint64_t head = header_.Size();
  const size_t unused = ChunkOf(gone, p, m);
  auto fail = [&](const Status& st) {
    if (failure_.ok() && !st.ok()) failure_ = st;
  };
  std::vector<uint8_t> own((m - 1) * w),
      acc[2] = {std::vector<uint8_t>(w + kVerdict), std::vector<uint8_t>(w + kVerdict)};
  std::vector<const uint8_t*> piece(m - 1),
      sources;  // this round's chunk windows; what XORs into next
  std::vector<std::vector<uint8_t>> got;
  uint64_t sent = 0;  // bytes of the previous window
  SteadyTime t = std::chrono::steady_clock::now();
  for (uint64_t r = 0; r <= rounds; ++r) {
    std::vector<Group::Outgoing> sends;
    std::vector<int> from;
    const uint64_t off = r * window, n = r < rounds ? std::min(window, c - off) : 0;
    uint8_t* next = acc[r % 2].data();
    sources.clear();
    if (r < rounds) {
      for (size_t k = 0; k + 1 < m; ++k) {
        if (k == unused) continue;
        piece[k] = bundle_->View(k * c + off, n);
        if (piece[k] != nullptr) continue;
        uint8_t* copy = own.data() + k * w;
        piece[k] = copy;
        if (Status st = bundle_->Read(k * c + off, copy, n); !st.ok()) {
          fail(st);
          std::fill_n(copy, n, 0);
        }
      }
      sources.push_back(ParityWindow(head + off, n, next, fail));
      Lap(&t, &times_->l3_read_s);
      for (size_t j = 0; j < m; ++j) {
        if (j == p || j == gone) continue;
        sends.push_back({.to = members[j], .data = piece[ChunkOf(j, p, m)], .bytes = n});
        from.push_back(members[j]);
      }
    }
    if (r > 0) {
      uint8_t* prev = acc[(r + 1) % 2].data();
      const int64_t verdict = failure_.ok() ? 0 : 2;
      std::memcpy(prev + sent, &verdict, kVerdict);
      sends.push_back({.to = members[gone], .data = prev, .bytes = sent + kVerdict});
    }
    CAIRN_RETURN_IF_ERROR(group_.Exchange(sends, from, &got));
    Lap(&t, &times_->l3_exchange_s);
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].size() == n) {
        sources.push_back(got[i].data());
      } else {
        fail(Status::Corrupt("a parity piece from rank " + std::to_string(from[i]) +
                             " has the wrong size"));
      }
    }
    if (r < rounds) XorOf(next, sources.data(), sources.size(), n);
    Lap(&t, &times_->l3_xor_s);
    sent = n;
  }
  return Status::Ok();
}

const uint8_t* Survivor::SymbolWindow(size_t s, uint64_t off, uint64_t n, uint8_t* into) {
  const Stripes st = sets_.stripes();
  const size_t p = static_cast<size_t>(sets_.position);
  auto fail = [&](const Status& why) {
    if (failure_.ok() && !why.ok()) failure_ = why;
  };
  if (st.HoldsParity(p, s))
    return ParityWindow(header_.Size() + st.Row(p, s) * header_.chunk + off, n, into, fail);
  const uint64_t at = st.Chunk(p, s) * header_.chunk + off;
  if (const uint8_t* in_place = bundle_->View(at, n); in_place != nullptr) return in_place;
  if (Status why = bundle_->Read(at, into, n); !why.ok()) {
    fail(why);
    std::fill_n(into, n, 0);
  }
  return into;
}

// A survivor's parity bytes [at, at + n): in place from its mapping, else
// read into `into` (zeros and a failure on a read error).
template <typename Fail>
const uint8_t* Survivor::ParityWindow(uint64_t at, uint64_t n, uint8_t* into, const Fail& fail) {
  if (parity_view_ != nullptr) {
    if (auto bytes = parity_view_->Bytes(at, n); bytes.ok()) return *bytes;
  }
  if (Status st = parity_->ReadAt(into, n, at); !st.ok()) {
    fail(st);
    std::fill_n(into, n, 0);
  }
  return into;
}

// A refused rebuild: this survivor checks its parity file and its whole
// bundle against their recorded CRCs (one more read of each), so that the
// damaged one is named by its own rank. Ok when both check out.
Status Survivor::Diagnose() {
  SteadyTime t = std::chrono::steady_clock::now();
  const uint64_t window = WindowOf(header_.chunk);
  std::vector<uint8_t> buf(window);
  // The CRC of bytes [0, bytes) that read(offset, dst, n) gives, window by window.
  auto crc_of = [&](uint64_t bytes, const auto& read) -> Result<uint32_t> {
    uint32_t crc = 0;
    for (uint64_t off = 0; off < bytes; off += window) {
      const uint64_t n = std::min(window, bytes - off);
      CAIRN_RETURN_IF_ERROR(read(off, buf.data(), n));
      crc = crc32c::Extend(crc, buf.data(), n);
    }
    return crc;
  };
  // The parity file's CRC covers its header and its chunk.
  CAIRN_ASSIGN_OR_RETURN(
      const uint32_t parity_crc,
      crc_of(header_.Size() + header_.ParityBytes(),
             [&](uint64_t off, uint8_t* dst, uint64_t n) { return parity_->ReadAt(dst, n, off); }));
  const Member& me = header_.members[static_cast<size_t>(sets_.position)];
  CAIRN_ASSIGN_OR_RETURN(
      const uint32_t own_crc,
      crc_of(static_cast<uint64_t>(me.bytes),
             [&](uint64_t off, uint8_t* dst, uint64_t n) { return bundle_->Read(off, dst, n); }));
  Lap(&t, &times_->l3_crc_s);
  return Check(parity_crc, own_crc);
}

// The parity file's CRC and this member's bundle's against what was
// recorded.
Status Survivor::Check(uint32_t parity_crc, uint32_t own_crc) {
  uint8_t tail[kCrc];
  CAIRN_RETURN_IF_ERROR(parity_->ReadAt(tail, kCrc, header_.Size() + header_.ParityBytes()));
  if (parity_crc != format::le::Get32(tail))
    return Status::Corrupt(path_ + ": the parity file's checksum does not match (damaged)");
  const Member& me = header_.members[static_cast<size_t>(sets_.position)];
  if (own_crc != me.crc) return NotProtected(name_, header_.version);
  return Status::Ok();
}

Result<Agreed> AgreeOnSurvivors(Group& group, const Sets& sets, const std::vector<size_t>& lost,
                                const Survivor& s, const Status& why) {
  const size_t m = sets.members().size(), k = sets.stripes().k();
  auto is_lost = [&](size_t q) { return std::find(lost.begin(), lost.end(), q) != lost.end(); };
  std::vector<int64_t> mine = {why.ok()                        ? 0
                               : why.code() == Code::kNotFound ? 1
                                                               : 2,
                               static_cast<int64_t>(s.header().chunk)};
  for (size_t g : lost) {
    const bool has = why.ok() && g < s.header().members.size();
    mine.push_back(has ? s.header().members[g].bytes : -1);
    mine.push_back(has ? s.header().members[g].crc : -1);
  }
  CAIRN_ASSIGN_OR_RETURN(auto said, ShareValues(group, sets, mine));
  Agreed a{.records = std::vector<Member>(lost.size())};
  bool first = true;
  for (size_t q = 0; q < m; ++q) {
    if (is_lost(q)) continue;
    int64_t st = said[q][0];  // -1 from a malformed message
    const int64_t c = said[q][1];
    if (st == 0 && first) {
      a.chunk = static_cast<uint64_t>(c);
      for (size_t l = 0; l < lost.size(); ++l)
        a.records[l] = {.rank = sets.members()[lost[l]],
                        .bytes = said[q][2 + 2 * l],
                        .crc = static_cast<uint32_t>(said[q][3 + 2 * l])};
      first = false;
    }
    bool sane = c > 0 && static_cast<uint64_t>(c) == a.chunk;
    for (size_t l = 0; l < lost.size() && sane; ++l) {
      const int64_t bytes = said[q][2 + 2 * l];
      sane = bytes > 0 && bytes <= static_cast<int64_t>(k) * c && bytes == a.records[l].bytes &&
             static_cast<uint32_t>(said[q][3 + 2 * l]) == a.records[l].crc;
    }
    if (st == 0 && !sane) st = 2;
    a.worst = std::max(a.worst, st < 0 ? 2 : st);
  }
  return a;
}

void NoteNoRebuild(const Sets& sets, const std::string& name, int64_t v, const Agreed& a,
                   bool is_lost, const Status& why, std::vector<std::string>* notes) {
  if (a.worst == 2 && is_lost)
    notes->push_back("version " + std::to_string(v) + " of '" + name +
                     "' cannot be rebuilt from the " + CodeName(sets.code) + " parity of ranks " +
                     RankList(sets.members()) +
                     ": a survivor's parity or file is damaged (its rank says which)");
  if (!why.ok() && why.code() != Code::kNotFound) notes->push_back(why.ToString());
}

}  // namespace cairn::parity::impl
