#include "redundancy/partner/messages.hpp"

#include <cstring>

#include "util/crc32c.hpp"

namespace cairn::partner {
namespace {

constexpr int64_t kAbortMagic = 0x3162613243524143;  // "CARC2ab1"

uint32_t ChunkCrc(const uint8_t* payload, size_t n, int64_t index) {
  return crc32c::Extend(crc32c::Value(payload, n), &index, sizeof index);
}

// A CAIRN_ERR_* value (include/cairn/cairn_errors.def).
bool KnownError(int64_t code) {
  switch (code) {
#define CAIRN_ERROR(c, cpp, value, name, text, py) case (value):
#include "cairn/cairn_errors.def"
#undef CAIRN_ERROR
    return true;
    default:
      return false;
  }
}

// The two int64 of a two-word message, or false when it is not one.
bool TwoWords(const uint8_t* msg, size_t bytes, int64_t* a, int64_t* b) {
  if (bytes != 2 * sizeof(int64_t)) return false;
  std::memcpy(a, msg, sizeof *a);
  std::memcpy(b, msg + sizeof *a, sizeof *b);
  return true;
}

}  // namespace

void PutTrailer(uint8_t* buf, size_t n, int64_t index) {
  const uint32_t crc = ChunkCrc(buf, n, index);
  std::memcpy(buf + n, &index, sizeof index);
  std::memcpy(buf + n + sizeof index, &crc, sizeof crc);
  std::memset(buf + n + sizeof index + sizeof crc, 0, kTrailer - sizeof index - sizeof crc);
}

Result<Chunk> ParseChunk(const uint8_t* msg, size_t bytes, const std::string& what) {
  if (bytes < kTrailer)
    return Status::Corrupt(what + ": " + std::to_string(bytes) + " bytes, no trailer");
  Chunk c{.payload = bytes - kTrailer};
  uint32_t crc = 0, pad = 0;
  std::memcpy(&c.index, msg + c.payload, sizeof c.index);
  std::memcpy(&crc, msg + c.payload + sizeof c.index, sizeof crc);
  std::memcpy(&pad, msg + c.payload + sizeof c.index + sizeof crc, sizeof pad);
  c.intact = pad == 0 && crc == ChunkCrc(msg, c.payload, c.index);
  return c;
}

Answer EncodeAnswer(int64_t version, Code code) { return {version, static_cast<int64_t>(code)}; }

Result<Code> ParseAnswer(const uint8_t* msg, size_t bytes, int64_t version,
                         const std::string& from) {
  int64_t v = 0, code = 0;
  if (!TwoWords(msg, bytes, &v, &code)) {
    return Status::Corrupt(from + ": an answer of " + std::to_string(bytes) + " bytes, not 16");
  }
  if (v != version) {
    return Status::Corrupt(from + ": an answer to version " + std::to_string(v) + ", expected " +
                           std::to_string(version));
  }
  if (code != 0 && !KnownError(code)) {
    return Status::Corrupt(from + ": an answer with unknown code " + std::to_string(code));
  }
  return static_cast<Code>(code);
}

AbortNotice EncodeAbort(Code code) { return {kAbortMagic, static_cast<int64_t>(code)}; }

Result<Code> ParseAbort(const uint8_t* msg, size_t bytes, const std::string& from) {
  int64_t magic = 0, code = 0;
  if (!TwoWords(msg, bytes, &magic, &code)) {
    return Status::Corrupt(from + ": an abort notice of " + std::to_string(bytes) +
                           " bytes, not 16");
  }
  if (magic != kAbortMagic) return Status::Corrupt(from + ": an abort notice with a bad magic");
  if (!KnownError(code)) {
    return Status::Corrupt(from + ": an abort notice with code " + std::to_string(code) +
                           ", not an error");
  }
  return static_cast<Code>(code);
}

}  // namespace cairn::partner
