// A bundle (docs/format.md 3.9, "The bundle") parsed as it arrives, in
// pieces of any size: what a rank receives when another sends it a version
// (a partner copy stored or fetched back, a rebuilt chain). The parser holds
// at most one head's 16 bytes; the contents pass straight to the caller, so
// a receiver writes a version of any size through a window's worth of memory.
// No I/O: the fuzz target drives it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cairn/status.hpp"

namespace cairn::redundancy {

class BundleParser {
 public:
  // What the parser hands on, in bundle order.
  class Events {
   public:
    virtual ~Events() = default;
    // A file of the chain begins: its version number and size.
    virtual Status File(int64_t number, uint64_t bytes) = 0;
    // Bytes [offset, offset + n) of the file File announced last (n > 0).
    virtual Status Content(const uint8_t* data, size_t n, uint64_t offset) = 0;
  };

  // `from` names the sender in errors ("rank 3"); `total` is the size it
  // announced for the whole bundle.
  BundleParser(std::string from, uint64_t total) : from_(std::move(from)), total_(total) {}

  // The next n bytes. Malformed (docs/format.md 3.9: no file, a count or a
  // file that does not fit in `total`, a negative number, files not newest
  // first, bytes past the last file or past `total`): kCorrupt naming the
  // sender, and every later call returns the same. An error of `events`
  // is returned as it is, and also ends the parse.
  Status Append(const uint8_t* data, size_t n, Events& events);

  // After the last piece: OK only if exactly `total` bytes came and they
  // ended with the last file's last byte; else kCorrupt (truncated), or
  // the error that ended the parse.
  Status Finish() const;

 private:
  enum class State { kCount, kHead, kContent, kDone };
  Status Corrupt(const std::string& what);
  // Fills word_ from data; true once it holds `want` bytes.
  bool Gather(const uint8_t*& data, size_t& n, size_t want);
  Status OnCount();
  Status OnHead(Events& events);

  const std::string from_;
  const uint64_t total_;
  State state_ = State::kCount;
  Status error_;
  uint64_t consumed_ = 0;  // bytes taken so far
  int64_t count_ = 0;      // files the bundle says it holds
  int64_t files_ = 0;      // heads seen
  int64_t last_number_ = -1;
  uint64_t file_bytes_ = 0, file_at_ = 0;  // the current file: size, bytes passed on
  uint8_t word_[16] = {};
  size_t word_fill_ = 0;
};

}  // namespace cairn::redundancy
