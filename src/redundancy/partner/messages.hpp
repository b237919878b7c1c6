// The partner copies' messages after the head (docs/format.md 3.8; the head
// is head.hpp): a chunk and its trailer, the holder's answer, an abort
// notice. Each is parsed defensively: it comes from another process. A
// malformed message is kCorrupt naming its sender and what is wrong; a
// well-formed chunk whose index or CRC does not match is damage the
// transfer reports, not a malformed message.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cairn/status.hpp"

namespace cairn::partner {

// A chunk is its payload, then [int64 index][uint32 CRC32C of the payload
// extended by the index's 8 bytes][uint32 0].
inline constexpr size_t kTrailer = 16;

// Writes chunk `index`'s trailer after the n payload bytes at buf (which
// has room for kTrailer more).
void PutTrailer(uint8_t* buf, size_t n, int64_t index);

// The index of the message that withdraws the version being sent (a
// trailer alone): its source could not finish it.
inline constexpr int64_t kWithdrawn = -1;

struct Chunk {
  size_t payload = 0;   // bytes before the trailer
  int64_t index = 0;    // as the trailer says (checked by the holder)
  bool intact = false;  // the trailer's CRC matches its payload and index, its pad is 0
};
// A chunk message of `bytes` bytes; kCorrupt naming `what` when it is too
// short to hold a trailer. Chunks come in any order: which index it may
// have is the holder's to check.
Result<Chunk> ParseChunk(const uint8_t* msg, size_t bytes, const std::string& what);

// The holder's answer to a version: [int64 version][int64 code], code 0 =
// stored, else the error's CAIRN_ERR_* value.
using Answer = std::array<int64_t, 2>;
Answer EncodeAnswer(int64_t version, Code code);
// The code the answer to `version` carries (kOk: stored); kCorrupt naming
// `from` when it has another size, answers another version or carries no
// known code.
Result<Code> ParseAnswer(const uint8_t* msg, size_t bytes, int64_t version,
                         const std::string& from);

// An abort notice: [int64 magic 0x3162613243524143][int64 code], code a
// CAIRN_ERR_* value, never 0.
using AbortNotice = std::array<int64_t, 2>;
AbortNotice EncodeAbort(Code code);
// The code a notice carries; kCorrupt naming `from` when it has another
// size or magic, or carries no error code.
Result<Code> ParseAbort(const uint8_t* msg, size_t bytes, const std::string& from);

}  // namespace cairn::partner
