// Where a lost member's rebuilt bundle goes while it streams in (the XOR
// and the Reed-Solomon rebuilds; docs/format.md 3.9 "Recovery"). Internal
// to libcairn.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"
#include "format/naming.hpp"
#include "redundancy/bundle_stream.hpp"
#include "redundancy/redundancy.hpp"

namespace cairn::parity::impl {

class Sink {
 public:
  // From the bundle's first bytes: a full version (one file) goes straight
  // into its file; a chain is kept in memory (its later files' places are
  // known only once their heads arrive).
  Status Begin(const Config& c, const std::string& dir, int64_t v, const uint8_t* first, uint64_t n,
               uint64_t total) {
    int64_t head[3] = {0, -1, -1};  // count, number, bytes
    if (n >= kHead) std::memcpy(head, first, kHead);
    if (head[0] == 1 && head[1] == v && head[2] >= 0 &&
        static_cast<uint64_t>(head[2]) + kHead == total) {
      CAIRN_ASSIGN_OR_RETURN(file_,
                             redundancy::PendingFile::Create(
                                 c, dir, format::EntryFileName(format::EntryKind::kCheckpoint, v)));
    } else {
      memory_.resize(total);
    }
    return Status::Ok();
  }
  // Bundle bytes [at, at + n).
  Status Place(const uint8_t* data, uint64_t at, uint64_t n) {
    if (file_ == nullptr) {
      std::memcpy(memory_.data() + at, data, n);
      return Status::Ok();
    }
    if (at + n <= kHead) return Status::Ok();
    const uint64_t from = std::max(at, kHead);
    return file_->WriteAt(data + (from - at), at + n - from, from - kHead);
  }
  Status Commit(const Config& c, const std::string& dir, const std::string& from) {
    return file_ != nullptr ? file_->Commit() : redundancy::Unbundle(c, dir, memory_, from);
  }

 private:
  static constexpr uint64_t kHead = 3 * sizeof(int64_t);
  std::unique_ptr<redundancy::PendingFile> file_;  // destroyed uncommitted: removed
  std::vector<uint8_t> memory_;
};

}  // namespace cairn::parity::impl
