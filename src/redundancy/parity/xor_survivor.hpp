// L3 XOR parity: a survivor's side of a rebuild (xor_rebuild.cpp's parity
// level drives it; docs/mpi.md "XOR parity (L3)"; docs/format.md 3.9 is
// normative). A survivor opens its parity file and its bundle of the
// version, streams its part of the lost member's chunks, and, when the lost
// member refuses what arrived, checks its own files whole so that the
// damaged one is named by its own rank. Internal to libcairn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redundancy/bundle_stream.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "util/clock.hpp"

namespace cairn {
struct MpiStats;  // cairn/cairn.hpp
}

namespace cairn::parity::impl {

// What a survivor appends to each window it sends the lost member: its
// verdict so far (0: its parity and bundle check out).
inline constexpr size_t kVerdict = sizeof(int64_t);

// Adds the seconds since *t to *phase and restarts *t there: the phases of
// a rebuild (MpiStats' l3_*_s) timed back to back.
void Lap(SteadyTime* t, double* phase);

// This member's parity file of version v of `name`.
std::string ParityPath(const Config& c, const std::string& name, int64_t v);
// Its header (ReadHeader), which must be this member's parity of v.
Result<Header> ReadVersionHeader(os::File& file, const std::string& path, int64_t v,
                                 const Sets& sets);

class Survivor {
 public:
  // `times`: the rebuild's phases are added to its l3_*_s.
  Survivor(Group& group, const Sets& sets, const Config& config, MpiStats* times)
      : group_(group), sets_(sets), config_(config), times_(times) {}

  // The parity of v (header checked) and the bundle (of the size the parity
  // recorded); their data are checked while they stream. kNotFound when
  // this member has no parity of v; kCorrupt when what it has does not
  // protect its files.
  Status Open(const std::string& name, int64_t v);
  // This survivor's part of streaming the lost member `gone`'s bundle to it.
  // A read that fails is kept in failure() and sent as the verdict; only
  // the transport's errors end it.
  Status Send(size_t gone);
  // Bytes [off, off + n) of this survivor's symbol of stripe s (stripes.hpp):
  // its data chunk's or its parity row's, in place where its file maps,
  // else read into `into` (zeros and a failure() on a read error). The
  // Reed-Solomon rebuild sends these.
  const uint8_t* SymbolWindow(size_t s, uint64_t off, uint64_t n, uint8_t* into);
  // After a refused rebuild: its parity file and its bundle against their
  // recorded CRCs (one more read of each). Ok when both check out.
  Status Diagnose();

  const Header& header() const { return header_; }
  redundancy::BundleReader* bundle() { return bundle_.get(); }
  // The first thing that did not check out while streaming.
  Status& failure() { return failure_; }

 private:
  Status NotProtected(const std::string& name, int64_t v) const;
  // Parity bytes [at, at + n): in place from the mapping, else read into
  // `into` (zeros and a failure on a read error).
  template <typename Fail>
  const uint8_t* ParityWindow(uint64_t at, uint64_t n, uint8_t* into, const Fail& fail);
  Status Check(uint32_t parity_crc, uint32_t own_crc);

  Group& group_;
  const Sets& sets_;
  const Config& config_;
  MpiStats* const times_;
  Header header_;
  std::string name_, path_;
  std::unique_ptr<os::File> parity_;
  std::unique_ptr<os::FileView> parity_view_;  // null: it is read with ReadAt
  std::unique_ptr<redundancy::BundleReader> bundle_;
  Status failure_;
};

// What every member of the set learns of the survivors before a rebuild
// streams (the XOR and the Reed-Solomon rebuilds alike).
struct Agreed {
  // 0: every survivor can serve; 1: one has no parity of the version; 2:
  // one's parity or bundle is damaged, or they disagree on what they record.
  int64_t worst = 0;
  uint64_t chunk = 0;
  std::vector<Member> records;  // what the parity records of each lost member
};
// Each survivor's state (`why`: its Survivor::Open; a lost member's is
// unused), chunk size and records of the members at positions `lost`, to
// every member of the set; all agree only if every survivor opened its
// files and they record the same chunk size and the same sizes and CRCs of
// the lost members, within what the chunk allows. Collective over the set.
Result<Agreed> AgreeOnSurvivors(Group& group, const Sets& sets, const std::vector<size_t>& lost,
                                const Survivor& s, const Status& why);
// After an agreement whose worst is not 0: why the set does not rebuild v
// of `name`, to *notes (a lost member: that a survivor is damaged; a
// survivor: its own error when it is not a missing file).
void NoteNoRebuild(const Sets& sets, const std::string& name, int64_t v, const Agreed& a,
                   bool is_lost, const Status& why, std::vector<std::string>* notes);

}  // namespace cairn::parity::impl
