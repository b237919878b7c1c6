// The parity file's header, XOR or Reed-Solomon (header.hpp; docs/format.md 3.9).
#include "redundancy/parity/header.hpp"

#include <algorithm>

#include "format/le.hpp"

namespace cairn::parity::impl {

std::vector<uint8_t> EncodeHeader(const Header& h) {
  std::vector<uint8_t> out(h.Size(), 0);
  const bool rs = h.code == L3Code::kRs;
  std::copy_n(rs ? kRsMagic : kMagic, sizeof kMagic, out.begin());
  format::le::Put32(&out[8], 1);
  format::le::Put32(&out[12], static_cast<uint32_t>(h.members.size()));
  format::le::Put32(&out[16], h.position);
  format::le::Put32(&out[20], rs ? h.parity : 0);
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

uint32_t ClaimedMembers(const uint8_t* data, size_t size) {
  return size < kFixed ? 0 : format::le::Get32(data + 12);
}

uint64_t ChunkFor(uint64_t bytes, size_t m, size_t e) {
  const uint64_t k = m - e;  // bytes + k - 1 cannot wrap: bytes is a file's size
  return std::max<uint64_t>(1, (bytes + k - 1) / k);
}

Result<Header> ParseHeader(const uint8_t* data, size_t size, uint64_t file_size,
                           const std::string& path, const std::vector<int>* members) {
  auto bad = [&](const std::string& why) {
    return Status::Corrupt(path + ": not a usable parity file: " + why);
  };
  if (size < kFixed || file_size < kFixed + kCrc) return bad("too short");
  Header h;
  if (std::equal(std::begin(kRsMagic), std::end(kRsMagic), data)) {
    h.code = L3Code::kRs;
  } else if (!std::equal(std::begin(kMagic), std::end(kMagic), data)) {
    return bad("no CAIRNXOR or CAIRN_RS magic");
  }
  if (format::le::Get32(data + 8) != 1) return bad("unknown layout version");
  h.parity = h.code == L3Code::kRs ? format::le::Get32(data + 20) : 1;
  if (h.code == L3Code::kXor && format::le::Get32(data + 20) != 0)
    return bad("a reserved field is not zero");
  const uint32_t m = format::le::Get32(data + 12);
  h.position = format::le::Get32(data + 16);
  h.version = static_cast<int64_t>(format::le::Get64(data + 24));
  h.chunk = format::le::Get64(data + 32);
  if (m < 2 || h.position >= m) return bad("member count or position out of range");
  if (h.parity < 1 || h.parity >= m) return bad("parity row count out of range");
  if (members != nullptr && m != members->size()) return bad("not this rank's set");
  if (h.version < 0) return bad("a negative version");
  // Sizes in an order that cannot wrap: the table fits the bytes given and
  // the file, and the chunk is what the file has left for it.
  const uint64_t table = uint64_t{kPerMember} * m;
  if (table > size - kFixed || table > file_size - kFixed - kCrc)
    return bad("too short for its member table");
  if (h.chunk == 0 || (file_size - kFixed - kCrc - table) / h.parity != h.chunk ||
      (file_size - kFixed - kCrc - table) % h.parity != 0) {
    return bad("its size does not match its header");
  }
  uint64_t largest = 0;
  for (uint32_t i = 0; i < m; ++i) {
    const uint8_t* p = data + kFixed + kPerMember * i;
    const Member member{static_cast<int64_t>(format::le::Get64(p)),
                        static_cast<int64_t>(format::le::Get64(p + 8)), format::le::Get32(p + 16)};
    if (format::le::Get32(p + 20) != 0) return bad("a reserved field is not zero");
    if (member.rank < 0 || member.bytes < 0)
      return bad("member " + std::to_string(i) + " has a negative field");
    if (members != nullptr && member.rank != (*members)[i])
      return bad("its set's members are not this rank's set");
    largest = std::max(largest, static_cast<uint64_t>(member.bytes));
    h.members.push_back(member);
  }
  if (h.chunk != ChunkFor(largest, m, h.parity))
    return bad("its chunk size is not the one its bundle sizes give");
  return h;
}

}  // namespace cairn::parity::impl
