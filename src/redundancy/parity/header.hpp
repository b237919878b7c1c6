// The header of a parity file, XOR or Reed-Solomon (docs/format.md 3.9 is
// normative): what the encoding writes before a member's parity rows, and its parser, which
// takes any bytes (a damaged file, one of another set or job) and either
// returns a header that the format allows or kCorrupt naming what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"

namespace cairn::parity::impl {

inline constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'X', 'O', 'R'};
inline constexpr char kRsMagic[8] = {'C', 'A', 'I', 'R', 'N', '_', 'R', 'S'};
inline constexpr size_t kFixed = 40, kPerMember = 24, kCrc = 4;

struct Member {
  int64_t rank = -1;
  int64_t bytes = -1;  // of its bundle
  uint32_t crc = 0;    // of its bundle
};
struct Header {
  L3Code code = L3Code::kXor;
  uint32_t parity = 1;  // e, the parity rows (1 for XOR)
  int64_t version = -1;
  uint32_t position = 0;
  uint64_t chunk = 0;
  std::vector<Member> members;
  // The fixed part and the member table; the parity rows follow.
  size_t Size() const { return kFixed + kPerMember * members.size(); }
  uint64_t ParityBytes() const { return uint64_t{parity} * chunk; }
  uint64_t FileSize() const { return Size() + ParityBytes() + kCrc; }
};

// ceil(bytes / (m - e)), at least 1: the chunk size of a set of m members
// and e parity rows whose largest bundle is `bytes` (e < m).
uint64_t ChunkFor(uint64_t bytes, size_t m, size_t e);

// The fixed part and the member table, as docs/format.md 3.9 lays them out.
std::vector<uint8_t> EncodeHeader(const Header& h);

// The member count a header's fixed part (its first kFixed bytes) claims,
// for a reader that reads the table next; 0 when `size` < kFixed.
uint32_t ClaimedMembers(const uint8_t* data, size_t size);

// Parses the first `size` bytes of a parity file of `file_size` bytes (at
// least the fixed part and the member table) and checks every field the
// format constrains: the magic (the code), the layout version, the zero
// fields, 2 <= m, j < m, 1 <= e < m (e = 1 for XOR), a version and ranks
// >= 0, bundle sizes >= 0 whose chunk size c is the one the format derives
// from them, and a file of exactly 44 + 24 m + e c bytes. `members` (optional): the reader's set,
// which the header's ranks must be, in order. kCorrupt naming `path` and what is wrong; never reads
// past `size`. The parity chunk and the CRC are not read here.
Result<Header> ParseHeader(const uint8_t* data, size_t size, uint64_t file_size,
                           const std::string& path, const std::vector<int>* members = nullptr);

}  // namespace cairn::parity::impl
