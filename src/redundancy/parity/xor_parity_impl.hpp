// What xor_parity.cpp (the sets), xor_encode.cpp (the streamed encoding)
// and xor_rebuild.cpp (the parity level's streamed rebuild) share: reading
// a parity file's header (its layout and parser: header.hpp; docs/format.md
// 3.9 is normative), the windows they stream and the exchanges within a
// set. Internal to libcairn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/parity/header.hpp"
#include "redundancy/parity/xor_parity.hpp"

namespace cairn::redundancy {
class BundleReader;
}

namespace cairn::parity::impl {

// <rank dir>/.xor (mpi.l3_code = xor) or .rs: where a member keeps its
// parity files (under <name>/).
std::string ParityDir(const Config& c);
// A version's parity file name.
std::string ParityFile(int64_t v);

// The header of a parity file (ParseHeader), checked against the file's
// size and this member's set and code; kCorrupt naming what is wrong.
Result<Header> ReadHeader(os::File& file, const std::string& path, const Sets& sets);

// dst ^= src.
void XorInto(uint8_t* dst, const uint8_t* src, size_t n);
// dst = the XOR of srcs[0 .. count) (n bytes each; srcs may include dst):
// one pass over dst however many sources there are.
void XorOf(uint8_t* dst, const uint8_t* const* srcs, size_t count, size_t n);
// Chunk of member p that member j's parity holds (j != p).
size_t ChunkOf(size_t j, size_t p, size_t m);
// Bytes of each chunk one round of an encoding or a rebuild streams.
uint64_t WindowOf(uint64_t chunk);
// How many rounds the member that writes (an encoding's parity holder, a
// rebuild's lost member) holds behind its exchanges (redundancy::
// WriteBehind): one arriving, the others waiting for or in their write.
// Two (the lockstep of receive and write) left the set waiting for every
// slow write; a third absorbs most of it (docs/mpi.md "Measuring a
// rebuild").
inline constexpr size_t kRoundsBehind = 3;
// An encoding's parity row goes to its file in writes of at least this many
// bytes (of several rounds' windows when they are smaller): a 1 MiB direct
// write after each exchange left the writes waiting on the device's latency.
inline constexpr uint64_t kRowWriteBytes = uint64_t{4} << 20;
// The CRC of a bundle of `total` bytes from the CRCs of its chunks of c
// bytes (the last one cut at `total`), computed as they streamed.
uint32_t BundleCrc(const std::vector<uint32_t>& chunks, uint64_t total, uint64_t c);
// The same small message to every other member of the set, and theirs;
// (*got)[q] is member q's (this member's own at its position).
Status ShareInSet(Group& group, const Sets& sets, const std::vector<uint8_t>& mine,
                  std::vector<std::vector<uint8_t>>* got);
// Every member of the set learns every member's int64 values (each passes
// the same count; a value missing from a message reads -1); (*got)[q] is
// member q's.
Result<std::vector<std::vector<int64_t>>> ShareValues(Group& group, const Sets& sets,
                                                      const std::vector<int64_t>& mine);
// After the members of the set at positions `targets` got version v back
// from a rebuild: their own parity of v, lost with their nodes, is encoded
// again from every member's bundle (each sends them its chunks of it,
// window by window) and stored, so that the set can rebuild other lost
// members of v at once. Collective over the set. Every member that sends
// passes its open bundle (an XOR target, which sends nothing, nullptr); a
// survivor (not a target) passes its parity header of v; a target passes
// `proceed` (whether it has v back: false on any target makes every
// member return at once). A target keeps its file only if every member
// streamed without error; returns its size there, 0 elsewhere.
Result<uint64_t> Reencode(Group& group, const Sets& sets, const Config& config,
                          const std::string& name, int64_t version,
                          const std::vector<size_t>& targets, const Header* survivor,
                          redundancy::BundleReader* bundle, bool proceed);
// "1, 2, 3".
std::string RankList(const std::vector<int>& ranks);
// "XOR", "Reed-Solomon": what the messages call a code.
const char* CodeName(L3Code code);

}  // namespace cairn::parity::impl
