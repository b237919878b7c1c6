// The head of a partner copy (docs/format.md 3.8): the first message of each
// version a source sends its holder. Parsed defensively: it comes from
// another process, and what it names becomes a directory and temp files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/status.hpp"

namespace cairn::partner {

struct Head {
  enum class Kind {
    kFiles,    // the version's files follow, `total` bytes in chunks
    kNothing,  // the source has no file to send (its own error says why)
    kBye,      // the source sends nothing more
  };
  Kind kind = Kind::kFiles;
  int64_t version = -1;
  std::string name;  // empty for kBye
  uint64_t total = 0;
  struct File {
    int64_t number = -1;
    uint64_t bytes = 0;
  };
  std::vector<File> files;  // kFiles only
};

// [magic][version][count][name bytes][total], [number][bytes] per file, the
// name; count is the number of files, -1 for kNothing, -2 for kBye.
std::vector<uint8_t> EncodeHead(const Head& h);

// kCorrupt naming `from` (e.g. "a partner copy's head from rank 3") and
// what is wrong: a short or oversized message, an unknown magic or count,
// a name that is not a valid Cairn name, a file with a negative number or
// size, sizes that do not add up to the total, a farewell or a "nothing"
// carrying what it should not. Never reads past `bytes`. What it accepts,
// EncodeHead writes back byte for byte.
Result<Head> ParseHead(const uint8_t* msg, size_t bytes, const std::string& from);

}  // namespace cairn::partner
