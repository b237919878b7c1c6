// Writes of any offset and length into a file opened for direct I/O
// (aligned_writer.hpp).
#include "os/fs/aligned_writer.hpp"

#include <algorithm>
#include <cstring>

namespace cairn::os {

Status AlignedWriter::WriteAt(const uint8_t* data, size_t n, uint64_t offset) {
  if (!file_->direct()) return file_->WriteAt(data, n, offset);
  if (finished_) return Status::Internal("a write to " + file_->path() + " after its Finish");
  if (n == 0) return Status::Ok();  // as pwrite: extends nothing
  const uint64_t end = offset + n;
  end_ = std::max(end_, end);
  uint64_t at = offset;
  while (at < end) {
    const uint64_t b = at / kBlock, in = at % kBlock;
    if (in == 0 && end - at >= kBlock) {
      const uint64_t count = (end - at) / kBlock;
      CAIRN_RETURN_IF_ERROR(WriteBlocks(data + (at - offset), b, count));
      at += count * kBlock;
      continue;
    }
    const uint64_t to = std::min<uint64_t>(kBlock, in + (end - at));
    CAIRN_RETURN_IF_ERROR(WritePart(data + (at - offset), b, in, to));
    at += to - in;
  }
  return Status::Ok();
}

Status AlignedWriter::WriteBlocks(const uint8_t* data, uint64_t first, uint64_t count) {
  if (bounce_ == nullptr) {
    bounce_ = AllocDirectBuffer(kBounce);
    if (bounce_ == nullptr)
      return Status::NoMemory("a direct I/O bounce buffer for " + file_->path());
  }
  const uint64_t per = kBounce / kBlock;
  for (uint64_t done = 0; done < count; done += per) {
    const uint64_t blocks = std::min(per, count - done), bytes = blocks * kBlock;
    std::memcpy(bounce_.get(), data + done * kBlock, bytes);
    CAIRN_RETURN_IF_ERROR(file_->WriteAt(bounce_.get(), bytes, (first + done) * kBlock));
    on_file_ = std::max(on_file_, (first + done + blocks) * kBlock);
    // These blocks are whole now: what was held of them is superseded.
    partial_.erase(partial_.lower_bound(first + done), partial_.lower_bound(first + done + blocks));
  }
  return Status::Ok();
}

Status AlignedWriter::WritePart(const uint8_t* data, uint64_t b, size_t from, size_t to) {
  auto it = partial_.find(b);
  if (it == partial_.end()) {
    Partial p{AllocDirectBuffer(kBlock), {}};
    if (p.bytes == nullptr) return Status::NoMemory("a direct I/O block for " + file_->path());
    if (b * kBlock < on_file_) {
      // The block reached the file before: keep what it has there.
      CAIRN_RETURN_IF_ERROR(file_->ReadAt(p.bytes.get(), kBlock, b * kBlock));
      p.filled.set();
    }
    it = partial_.emplace(b, std::move(p)).first;
  }
  Partial& p = it->second;
  std::memcpy(p.bytes.get() + from, data, to - from);
  for (size_t i = from; i < to; ++i) p.filled.set(i);
  if (!p.filled.all()) return Status::Ok();
  Status s = Flush(b, p);
  partial_.erase(it);
  return s;
}

Status AlignedWriter::Flush(uint64_t b, const Partial& p) {
  CAIRN_RETURN_IF_ERROR(file_->WriteAt(p.bytes.get(), kBlock, b * kBlock));
  on_file_ = std::max(on_file_, (b + 1) * kBlock);
  return Status::Ok();
}

Status AlignedWriter::Finish() {
  if (!file_->direct()) return Status::Ok();
  while (!partial_.empty()) {
    // Bytes never written inside the file stay zero, as in a buffered
    // file's hole; those past end_ are cut below.
    CAIRN_RETURN_IF_ERROR(Flush(partial_.begin()->first, partial_.begin()->second));
    partial_.erase(partial_.begin());
  }
  finished_ = true;
  return on_file_ > end_ ? file_->Truncate(end_) : Status::Ok();
}

}  // namespace cairn::os
