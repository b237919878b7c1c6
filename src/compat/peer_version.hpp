// A peer library's checkpoint id over a Cairn version (docs/format.md,
// "Versions of the drop-in APIs"; docs/veloc.md, docs/fti.md).
//
// FTI's checkpoint ids and VELOC's versions may repeat (the newest checkpoint
// with an id replaces the earlier one) and need not increase; Cairn's versions
// are immutable and increase. libcairn_veloc and libcairn_fti therefore write
// each checkpoint as the Cairn version (sequence << 32) | id: the sequence
// counts the checkpoints of that name, so that the newest checkpoint taken is
// the newest Cairn version whatever its id, and the id is read back from the
// version number alone (no data read at restart). A version below 2^32, as
// these libraries wrote before, is sequence 0 with the version as its id.
#ifndef CAIRN_COMPAT_PEER_VERSION_HPP_
#define CAIRN_COMPAT_PEER_VERSION_HPP_

#include <cstdint>
#include <map>
#include <string>

#include "cairn/cairn.hpp"

namespace cairn::compat {

// Precondition: 0 <= id <= INT_MAX, sequence >= 0.
constexpr int64_t PeerVersion(int64_t sequence, int id) {
  return static_cast<int64_t>((static_cast<uint64_t>(sequence) << 32) | static_cast<uint32_t>(id));
}
constexpr int PeerId(int64_t version) { return static_cast<int>(version & 0x7fffffff); }
constexpr int64_t PeerSequence(int64_t version) { return version >> 32; }

// The next Cairn version of each name. The first checkpoint of a name in
// this process continues after the newest version found by Client::Latest
// (collective on a group's client, as the peers' checkpoint calls are: every
// rank calls it at the same checkpoint and gets the same answer). A failed
// checkpoint still uses up its sequence number, on every rank alike.
class PeerVersions {
 public:
  // The Cairn version for the next checkpoint of `name` with the peer's `id`.
  Result<int64_t> Next(Client& client, const std::string& name, int id) {
    if (id < 0) return Status::InvalidArgument("checkpoint id " + std::to_string(id) + " is negative");
    auto it = last_.find(name);
    if (it == last_.end()) {
      Result<int64_t> newest = client.Latest(name);
      if (!newest.ok() && newest.status().code() != Code::kNotFound) return newest.status();
      it = last_.emplace(name, newest.ok() ? PeerSequence(*newest) : 0).first;
    }
    return PeerVersion(++it->second, id);
  }
  // `newest` is what Client::Latest(name) returned (a restart looked): Next
  // need not ask again. Only the newest will do: after an older one, a new
  // checkpoint could take the number of one already on disk.
  void Seed(const std::string& name, int64_t newest) { last_.try_emplace(name, PeerSequence(newest)); }

 private:
  std::map<std::string, int64_t> last_;  // the newest sequence number used or found, by name
};

}  // namespace cairn::compat

#endif  // CAIRN_COMPAT_PEER_VERSION_HPP_
