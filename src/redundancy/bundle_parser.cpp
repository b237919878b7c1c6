// The bundle parsed as it arrives (bundle_parser.hpp).
#include "redundancy/bundle_parser.hpp"

#include <algorithm>
#include <cstring>

namespace cairn::redundancy {

Status BundleParser::Corrupt(const std::string& what) {
  error_ = Status::Corrupt("a bundle from " + from_ + " " + what);
  return error_;
}

bool BundleParser::Gather(const uint8_t*& data, size_t& n, size_t want) {
  const size_t take = std::min(n, want - word_fill_);
  std::memcpy(word_ + word_fill_, data, take);
  word_fill_ += take;
  data += take;
  n -= take;
  if (word_fill_ < want) return false;
  word_fill_ = 0;
  return true;
}

Status BundleParser::OnCount() {
  std::memcpy(&count_, word_, sizeof count_);
  if (count_ < 1) return Corrupt("holds no file (count " + std::to_string(count_) + ")");
  // Each file needs its 16-byte head: checked before anything uses count_.
  if (static_cast<uint64_t>(count_) > (total_ - sizeof count_) / 16) {
    return Corrupt("says it holds " + std::to_string(count_) + " files, more than its " +
                   std::to_string(total_) + " bytes can");
  }
  state_ = State::kHead;
  return Status::Ok();
}

Status BundleParser::OnHead(Events& events) {
  int64_t number = 0, bytes = 0;
  std::memcpy(&number, word_, sizeof number);
  std::memcpy(&bytes, word_ + sizeof number, sizeof bytes);
  const std::string which = "file " + std::to_string(files_ + 1) + " of " + std::to_string(count_);
  if (number < 0) return Corrupt("names version " + std::to_string(number) + " in its " + which);
  if (files_ > 0 && number >= last_number_) {
    return Corrupt("is not newest first: its " + which + " is version " + std::to_string(number) +
                   ", after version " + std::to_string(last_number_));
  }
  if (bytes < 0 || static_cast<uint64_t>(bytes) > total_ - consumed_) {
    return Corrupt("is truncated: its " + which + " has " + std::to_string(bytes) + " bytes, " +
                   std::to_string(total_ - consumed_) + " are left");
  }
  ++files_;
  last_number_ = number;
  file_bytes_ = static_cast<uint64_t>(bytes);
  file_at_ = 0;
  state_ = State::kContent;
  if (Status s = events.File(number, file_bytes_); !s.ok()) {
    error_ = s;
    return s;
  }
  return Status::Ok();
}

Status BundleParser::Append(const uint8_t* data, size_t n, Events& events) {
  if (!error_.ok()) return error_;
  if (n > total_ - consumed_) {
    return Corrupt("is longer than the " + std::to_string(total_) + " bytes announced");
  }
  while (n > 0) {
    switch (state_) {
      case State::kCount:
      case State::kHead: {
        const bool count = state_ == State::kCount;
        const size_t want = count ? 8 : 16;
        const size_t before = n;
        const bool whole = Gather(data, n, want);
        consumed_ += before - n;
        if (!whole) return Status::Ok();
        CAIRN_RETURN_IF_ERROR(count ? OnCount() : OnHead(events));
        break;
      }
      case State::kContent: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n, file_bytes_ - file_at_));
        if (take > 0) {
          if (Status s = events.Content(data, take, file_at_); !s.ok()) {
            error_ = s;
            return s;
          }
        }
        data += take;
        n -= take;
        consumed_ += take;
        file_at_ += take;
        break;
      }
      case State::kDone:
        return Corrupt("has bytes after its last file");
    }
    // A file ends with its last byte, or with its head when it has none.
    if (state_ == State::kContent && file_at_ == file_bytes_)
      state_ = files_ == count_ ? State::kDone : State::kHead;
  }
  return Status::Ok();
}

Status BundleParser::Finish() const {
  if (!error_.ok()) return error_;
  if (state_ != State::kDone || consumed_ != total_) {
    return Status::Corrupt("a bundle from " + from_ +
                           " is truncated: " + std::to_string(consumed_) + " of " +
                           std::to_string(total_) + " bytes, " + std::to_string(files_) + " of " +
                           std::to_string(count_) + " files begun");
  }
  return Status::Ok();
}

}  // namespace cairn::redundancy
