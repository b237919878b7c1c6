// What the redundancy levels of an MPI job share (docs/mpi.md): L2 partner
// copies (partner.hpp) and L3 parity (xor_parity.hpp) both move a rank's
// committed version as a *bundle* (the files of its chain, docs/format.md
// 3.9), store files with the commit protocol, and bring lost versions back
// through one agreement, Recover, in which each level offers what it can
// rebuild and then fetches what the agreed version's members lack. MPI-free:
// messages go through Group::Exchange, at collective calls only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"

namespace cairn::os {
class FileSystem;
}

namespace cairn::redundancy {

os::FileSystem* Fs(const Config& c);

// Messages are flat byte strings of int64 values and file contents (the
// ranks of one job run the same binary on machines of one byte order).
void Put(std::vector<uint8_t>* out, int64_t v);
bool Get(const std::vector<uint8_t>& in, size_t* at, int64_t* v);

// dir/file with temp + fsync + rename + directory fsync (docs/format.md 3.3).
Status WriteFile(const Config& c, const std::string& dir, const std::string& file,
                 const uint8_t* data, size_t bytes);

// The bundle of `version` in dir/name (docs/format.md 3.9): every file of its
// chain, newest first, as [count] then per file [number][bytes][contents],
// whole in memory (tests compare with it; the levels stream bundles:
// BundleReader, ExchangeBundles).
Result<std::vector<uint8_t>> Bundle(const Config& c, const std::string& dir,
                                    const std::string& name, int64_t version);

// The checkpoint version numbers named in dir/name (v<20 digits>.cairn),
// newest first, whatever the files hold.
std::vector<int64_t> Versions(const Config& c, const std::string& dir, const std::string& name);
// The checkpoint versions of dir/name whose chain opens (structure checked,
// no data read), newest first.
std::vector<int64_t> Intact(const Config& c, const std::string& dir, const std::string& name);
// Keeps the newest keep_versions files of dir/name (all when 0) and, with
// `chains`, every version their chains read (a layered copy is useless
// without its bases); deletes the older ones.
void Retain(const Config& c, const std::string& dir, const std::string& name, bool chains);

// Every member's node (one reduction of a vector of group.size() integers).
Result<std::vector<int>> NodesOf(Group& group);

// One redundancy level's part in Recover. An object lives for one Recover
// (it may keep what Offers learned for Fetch). Both calls are collective.
class Level {
 public:
  virtual ~Level() = default;
  // Versions <= bound (newest first) this level could bring into this
  // member's local directory; `distrust` is a version whose local copy the
  // member must not count on (-1: none).
  virtual Result<std::vector<int64_t>> Offers(const std::string& name, int64_t bound,
                                              int64_t distrust) = 0;
  // Brings version v into the local directory of this member when `need`
  // and this level can; returns a line saying from where ("" = nothing).
  virtual Result<std::string> Fetch(const std::string& name, int64_t v, bool need) = 0;
  // Once every member has v again (after the fetches): brings back this
  // level's own redundancy of v that a lost node took (L2: the copies a
  // lost holder kept), so that v survives the next loss; what could not be
  // brought back becomes a note. Collective; the default does nothing.
  virtual Status Refill(const std::string& name, int64_t v) {
    (void)name;
    (void)v;
    return Status::Ok();
  }
  // After Refill: the versions older than v, among this member's `intact`
  // ones (newest first), whose redundancy at this level a lost node took and
  // that this member can send again in the background, newest first (L2:
  // when the partner lost v's copy, the older versions its retention would
  // keep). Not collective; the default: none.
  virtual std::vector<int64_t> Older(int64_t v, const std::vector<int64_t>& intact) const {
    (void)v;
    (void)intact;
    return {};
  }
  // Lines to log once Recover has agreed (e.g. a set that cannot rebuild).
  virtual std::vector<std::string> Notes() const { return {}; }
};

struct Recovered {
  int64_t version = -1;  // the agreed version (-1: none)
  int level = -1;        // index in `levels` of the level that served this member (-1: none)
  std::string served;    // its line
  std::vector<std::string> notes;
};

// Before a collective latest / restore: the newest version v <= bound that
// every member has (`intact`: its own local or persistent versions, newest
// first) or that one of `levels` offers it; each member that lacks v locally
// (or whose local copy is `distrust`) fetches it from the first level that
// serves it; then every level refills its redundancy of v. Collective.
Result<Recovered> Recover(Group& group, const Config& config, const std::vector<Level*>& levels,
                          const std::string& name, const std::vector<int64_t>& intact,
                          int64_t bound, int64_t distrust);

}  // namespace cairn::redundancy
