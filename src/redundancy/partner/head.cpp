// The head of a partner copy (head.hpp; docs/format.md 3.8).
#include "redundancy/partner/head.hpp"

#include <cstring>

#include "format/naming.hpp"

namespace cairn::partner {

namespace {

constexpr int64_t kMagic = 0x3164683243524143;  // "CARC2hd1" little-endian
constexpr int64_t kNothing = -1;
constexpr int64_t kBye = -2;
constexpr size_t kFixed = 5 * sizeof(int64_t);
constexpr size_t kPerFile = 2 * sizeof(int64_t);

int64_t Word(const uint8_t* at) {
  int64_t v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

}  // namespace

std::vector<uint8_t> EncodeHead(const Head& h) {
  std::vector<uint8_t> out;
  auto put = [&](int64_t v) {
    const size_t at = out.size();
    out.resize(at + sizeof v);
    std::memcpy(out.data() + at, &v, sizeof v);
  };
  const int64_t count = h.kind == Head::Kind::kBye       ? kBye
                        : h.kind == Head::Kind::kNothing ? kNothing
                                                         : static_cast<int64_t>(h.files.size());
  put(kMagic);
  put(h.version);
  put(count);
  put(static_cast<int64_t>(h.name.size()));
  put(static_cast<int64_t>(h.total));
  for (const Head::File& f : h.files) {
    put(f.number);
    put(static_cast<int64_t>(f.bytes));
  }
  out.insert(out.end(), h.name.begin(), h.name.end());
  return out;
}

Result<Head> ParseHead(const uint8_t* msg, size_t bytes, const std::string& from) {
  auto bad = [&](const std::string& why) {
    return Status::Corrupt(from + " is malformed: " + why);
  };
  if (bytes < kFixed) return bad(std::to_string(bytes) + " bytes");
  if (Word(msg) != kMagic) return bad("no partner-copy magic");
  Head h;
  h.version = Word(msg + 8);
  const int64_t count = Word(msg + 16), name_bytes = Word(msg + 24), total = Word(msg + 32);
  if (count == kBye) {
    if (bytes != kFixed || name_bytes != 0 || total != 0)
      return bad("a farewell with a name or data");
    h.kind = Head::Kind::kBye;
    return h;
  }
  if (count < kNothing) return bad("a file count of " + std::to_string(count));
  const size_t files = count > 0 ? static_cast<size_t>(count) : 0;
  // Bounded by the message before anything is multiplied or allocated.
  if (files > (bytes - kFixed) / kPerFile)
    return bad(std::to_string(count) + " files in " + std::to_string(bytes) + " bytes");
  if (name_bytes < 1 || static_cast<uint64_t>(name_bytes) != bytes - kFixed - kPerFile * files) {
    return bad("its name's length does not match its size");
  }
  h.name.assign(reinterpret_cast<const char*>(msg + kFixed + kPerFile * files),
                static_cast<size_t>(name_bytes));
  if (Status s = format::ValidateName(h.name); !s.ok()) return bad(s.message());
  if (h.version < 0) return bad("version " + std::to_string(h.version));
  if (count == kNothing) {
    if (total != 0) return bad("no files but " + std::to_string(total) + " bytes");
    h.kind = Head::Kind::kNothing;
    return h;
  }
  if (total < 0) return bad("a total of " + std::to_string(total) + " bytes");
  h.total = static_cast<uint64_t>(total);
  uint64_t sum = 0;
  for (size_t i = 0; i < files; ++i) {
    const int64_t number = Word(msg + kFixed + kPerFile * i),
                  size = Word(msg + kFixed + kPerFile * i + 8);
    if (number < 0 || size < 0)
      return bad("file " + std::to_string(i) + ": number " + std::to_string(number) + ", " +
                 std::to_string(size) + " bytes");
    if (static_cast<uint64_t>(size) > h.total - sum)
      return bad("its files' sizes exceed its total");
    sum += static_cast<uint64_t>(size);
    h.files.push_back({.number = number, .bytes = static_cast<uint64_t>(size)});
  }
  if (sum != h.total) return bad("its files' sizes do not add up to its total");
  return h;
}

}  // namespace cairn::partner
