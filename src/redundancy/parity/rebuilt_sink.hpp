// Where a lost member's rebuilt bundle goes while it streams in (the XOR
// and the Reed-Solomon rebuilds; docs/format.md 3.9 "Recovery"). Internal
// to libcairn.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cairn/config.hpp"
#include "cairn/status.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/bundle_stream.hpp"

namespace cairn::parity::impl {

// The rebuild places its windows at their bundle offsets, several chunks at
// a time, so a bundle's bytes arrive out of order.
class Sink {
 public:
  // From the bundle's first bytes: a full version (one file) goes straight
  // into its file; a chain goes into a spool file, unlinked at once (where
  // its later files begin is known only once their heads arrive), and is
  // parsed into its files at Commit: memory stays a window either way.
  Status Begin(const Config& c, const std::string& dir, int64_t v, const uint8_t* first, uint64_t n,
               uint64_t total);
  // Bundle bytes [at, at + n).
  Status Place(const uint8_t* data, uint64_t at, uint64_t n);
  // The whole bundle came: its files committed (bases first).
  Status Commit(const Config& c, const std::string& dir, const std::string& from);

 private:
  static constexpr uint64_t kHead = 3 * sizeof(int64_t);
  std::unique_ptr<redundancy::PendingFile> file_;  // destroyed uncommitted: removed
  std::unique_ptr<os::File> spool_;                // a chain's bundle, already unlinked
  uint64_t total_ = 0;
};

}  // namespace cairn::parity::impl
