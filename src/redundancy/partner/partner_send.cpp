// L2 partner copies, the sending side (partner_transfer.hpp; the messages
// are docs/format.md 3.8's): a queued version's head, then its chunks, a
// window of them in flight, then the holder's acknowledgement.
#include <algorithm>
#include <cstring>

#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/partner/head.hpp"
#include "redundancy/partner/partner_transfer.hpp"
#include "redundancy/partner/transfer_state.hpp"
#include "redundancy/redundancy.hpp"
#include "util/clock.hpp"
#include "util/crc32c.hpp"

namespace cairn::partner {

using namespace wire;  // NOLINT(google-build-using-namespace): docs/format.md 3.8's constants

void Transfers::StepOut() {
  if (!partner_aborted_.ok()) {  // no ack will come: the transfers end here
    for (auto& o : outs_) {
      if (o->version != kBye) {
        out_results_[o->seq] = partner_aborted_.WithContext(
            "the partner copy of version " + std::to_string(o->version) + " of '" + o->name + "'");
      }
      done_seq_ = o->seq;
      Dispose(std::move(o));  // its sends may never complete: kept until quiet
    }
    outs_.clear();
    return;
  }
  while (!outs_.empty() && broken_.ok()) {
    Out& o = *outs_.front();
    if (o.state == Out::State::kWaiting) {
      if (o.version != kBye && !o.committed && local_->NewestLocal(o.name).version < o.version) {
        if (finishing_) {
          o.failed = Status::NotFound("version " + std::to_string(o.version) + " of '" + o.name +
                                      "' was never committed locally");
        } else if (blocking_) {
          o.failed = local_->WaitLocal(o.name, o.version);
        } else if (auto planned = local_->PlannedFileBytes(o.name, o.version); planned.ok()) {
          if (Status s = StartEarly(o, *planned); !s.ok()) return Fail(s);
        } else {
          return;  // a later Progress
        }
      }
      if (o.state == Out::State::kWaiting) {
        if (Status s = StartOut(o); !s.ok()) return Fail(s);
      }
    }
    if (o.state == Out::State::kSending) {
      if (Status s = SendChunks(o); !s.ok()) return Fail(s);
      if (o.next_chunk < o.chunks || !o.deferred.empty() || !o.flights.empty()) return;
      auto head = o.head_req->Test();
      if (!head.ok()) return Fail(head.status());
      if (!*head) return;
      o.state = Out::State::kAcking;
    }
    if (o.ack_req) {
      auto acked = o.ack_req->Test();
      if (!acked.ok()) return Fail(acked.status());
      if (!*acked) return;
      const std::string what =
          "the partner copy of version " + std::to_string(o.version) + " of '" + o.name + "'";
      auto code = ParseAnswer(reinterpret_cast<const uint8_t*>(o.ack), o.ack_req->bytes(),
                              o.version, what + ": rank " + std::to_string(map_.partner));
      if (!code.ok()) {
        out_results_[o.seq] = code.status();
      } else if (*code != Code::kOk) {
        out_results_[o.seq] = Status(*code, what + ": rank " + std::to_string(map_.partner) +
                                                " could not store it (its error says why)");
      } else {
        ++copies_;
        acknowledged_[o.name].Raise(o.version, RealtimeNs());
      }
    } else if (!o.failed.ok()) {
      out_results_[o.seq] = o.failed.WithContext(
          "the partner copy of version " + std::to_string(o.version) + " of '" + o.name + "'");
    }
    done_seq_ = o.seq;
    Dispose(std::move(outs_.front()));  // quiet: its head, chunks and ack completed
    outs_.pop_front();
  }
}

// The head (docs/format.md 3.8): [magic][version][files][name bytes][total]
// then [number][bytes] per file, then the name.
Status Transfers::StartOut(Out& o) {
  int64_t count = o.version == kBye ? kBye : kNothing;
  if (o.version != kBye && o.failed.ok()) {
    auto chain =
        format::Chain::Open(redundancy::Fs(config_), config_.scratch_dir, o.name, o.version);
    Status s = chain.status();
    for (size_t i = 0; s.ok() && i < chain->links().size(); ++i) {
      const std::string& path = chain->links()[i]->path();
      auto parsed = format::ParseEntryFileName(path.substr(path.rfind('/') + 1));
      if (!parsed) {
        s = Status::Internal(path + ": not a version file name");
        break;
      }
      // Opened now: retention may delete the file before its last chunk goes.
      auto source = OpenSource(config_, limits_, path);
      if (!source.ok()) {
        s = source.status();
        break;
      }
      o.total += source->bytes;
      o.files.push_back({parsed->number, std::move(source->file), source->bytes});
    }
    if (s.ok()) {
      count = static_cast<int64_t>(o.files.size());
    } else {
      // Gone: the local retention deleted it once newer versions were
      // committed (no wait asked for this one); nothing to send, no error.
      if (s.code() != Code::kNotFound) o.failed = s;
      o.files.clear();
      o.total = 0;
    }
  }
  return SendHead(o, count);
}

// Before its local commit: the version's one file, as planned; its chunks
// go as the host cache fills them (SendChunks).
Status Transfers::StartEarly(Out& o, uint64_t bytes) {
  o.early = true;
  o.total = bytes;
  o.files.push_back({o.version, nullptr, bytes});
  return SendHead(o, 1);
}

Status Transfers::SendHead(Out& o, int64_t count) {
  Head head{.kind = o.version == kBye   ? Head::Kind::kBye
                    : count == kNothing ? Head::Kind::kNothing
                                        : Head::Kind::kFiles,
            .version = o.version,
            .name = o.name,
            .total = o.total};
  for (const auto& f : o.files) head.files.push_back({.number = f.number, .bytes = f.bytes});
  o.head = EncodeHead(head);
  o.chunks = (o.total + limits_.chunk_bytes - 1) / limits_.chunk_bytes;
  if (count >= 0) {
    CAIRN_ASSIGN_OR_RETURN(
        o.ack_req, group_->StartReceive(map_.partner, kAckTag, reinterpret_cast<uint8_t*>(o.ack),
                                        sizeof o.ack));
  }
  CAIRN_ASSIGN_OR_RETURN(o.head_req,
                         group_->StartSend(map_.partner, kDataTag, o.head.data(), o.head.size()));
  o.state = Out::State::kSending;
  return Status::Ok();
}

// Reaps the sends that completed and starts chunks up to the window: each
// is read from the files when it is sent, so at most `window` chunks of
// this member's version are in memory. A version started early sends first
// the chunks that the host cache fills whole, then, once committed, the
// others (docs/format.md 3.8: chunks come in any order).
Status Transfers::SendChunks(Out& o) {
  while (!o.flights.empty()) {
    CAIRN_ASSIGN_OR_RETURN(bool done, o.flights.front().req->Test());
    if (!done) break;
    o.spare = std::move(o.flights.front().buf);
    o.flights.pop_front();
  }
  o.awaiting = false;
  while (o.flights.size() < static_cast<size_t>(limits_.window)) {
    uint64_t index = o.next_chunk;
    if (index < o.chunks) {
      ++o.next_chunk;
    } else if (o.deferred.empty()) {
      break;
    } else {
      CAIRN_ASSIGN_OR_RETURN(o.awaiting, AwaitingCommit(o));
      if (o.awaiting || o.deferred.empty()) break;  // later, or withdrawn
      index = o.deferred.front();
      o.deferred.pop_front();
    }
    const uint64_t begin = index * limits_.chunk_bytes;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(limits_.chunk_bytes, o.total - begin));
    Out::Flight f;
    f.buf = std::move(o.spare);  // a sent chunk's buffer: not zeroed again
    f.buf.resize(n + kTrailer);
    if (o.early && !o.local_done) {
      if (!local_->CopyCached(o.name, o.version, begin, n, f.buf.data()).empty()) {
        o.deferred.push_back(index);
        o.spare = std::move(f.buf);
        continue;
      }
    } else {
      CAIRN_RETURN_IF_ERROR(ReadChunk(o, begin, n, f.buf.data()));
    }
    PutTrailer(f.buf.data(), n, static_cast<int64_t>(index));
    CAIRN_ASSIGN_OR_RETURN(f.req,
                           group_->StartSend(map_.partner, kDataTag, f.buf.data(), f.buf.size()));
    o.flights.push_back(std::move(f));
  }
  return Status::Ok();
}

// A version started early: true while its local commit is still on its
// way. Once committed its file is opened, and must have the planned size;
// when the commit failed (or the file does not open as planned) the
// version is withdrawn: the holder drops what it received.
Result<bool> Transfers::AwaitingCommit(Out& o) {
  if (o.local_done) return false;
  auto committed = local_->CommittedLocally(o.name, o.version);
  if (committed.ok() && !*committed) {
    if (!blocking_ && !finishing_) return true;
    // A wait or the close drives the transfers: the commit is waited for.
    Status local = local_->WaitLocal(o.name, o.version);
    committed = local.ok() ? Result<bool>(true) : Result<bool>(local);
  }
  Status s = committed.status();
  if (s.ok()) {
    const std::string path =
        format::EntryPath(config_.scratch_dir, o.name, format::EntryKind::kCheckpoint, o.version);
    auto source = OpenSource(config_, limits_, path);
    s = source.status();
    if (s.ok() && source->bytes != o.total) {
      s = Status::Internal(path + ": " + std::to_string(source->bytes) + " bytes, " +
                           std::to_string(o.total) + " planned");
    }
    if (s.ok()) o.files[0].file = std::move(source->file);
  }
  if (s.ok()) {
    o.local_done = true;
    return false;
  }
  CAIRN_RETURN_IF_ERROR(WithdrawOut(o, s));
  return false;
}

// Tells the holder to drop the version (a trailer alone, index kWithdrawn)
// and expects no answer: the version's outcome is `why`.
Status Transfers::WithdrawOut(Out& o, const Status& why) {
  o.failed = why;
  o.deferred.clear();
  o.next_chunk = o.chunks;
  if (o.ack_req) {
    CAIRN_RETURN_IF_ERROR(o.ack_req->Cancel());
    o.ack_req.reset();
  }
  Out::Flight f;
  f.buf.resize(kTrailer);
  PutTrailer(f.buf.data(), 0, kWithdrawn);
  CAIRN_ASSIGN_OR_RETURN(f.req,
                         group_->StartSend(map_.partner, kDataTag, f.buf.data(), f.buf.size()));
  o.flights.push_back(std::move(f));
  return Status::Ok();
}

// Bytes [begin, begin + n) of the version's files, end to end: what the
// host cache still holds of them from there (no disk read: the file was just
// written, the copy would read it back from the disk that the local files
// and the copies share), the rest from the files.
Status Transfers::ReadChunk(Out& o, uint64_t begin, size_t n, uint8_t* dst) {
  uint64_t file_start = 0;
  for (const auto& file : o.files) {
    const uint64_t lo = std::max(begin, file_start),
                   hi = std::min(begin + n, file_start + file.bytes);
    file_start += file.bytes;
    if (lo >= hi) continue;
    const uint64_t at = lo - (file_start - file.bytes);  // in the file
    uint8_t* to = dst + (lo - begin);
    for (const Extent& gap : local_->CopyCached(o.name, file.number, at, hi - lo, to)) {
      uint8_t* gap_to = to + (gap.offset - at);
      if (!file.file->direct()) {
        CAIRN_RETURN_IF_ERROR(file.file->ReadAt(gap_to, gap.bytes, gap.offset));
        continue;
      }
      // Whole blocks (OpenForCopy: the file and the chunks are), through an
      // aligned buffer; a gap inside a block reads the block.
      const uint64_t a = gap.offset / os::kDirectIoAlignment * os::kDirectIoAlignment;
      const uint64_t b = format::AlignUp(gap.end(), os::kDirectIoAlignment);
      if (!o.bounce) o.bounce = os::AllocDirectBuffer(limits_.chunk_bytes);
      if (!o.bounce) return Status::NoMemory("the partner copy: no buffer for its direct read");
      CAIRN_RETURN_IF_ERROR(file.file->ReadAt(o.bounce.get(), b - a, a));
      std::memcpy(gap_to, o.bounce.get() + (gap.offset - a), gap.bytes);
    }
  }
  return Status::Ok();
}

}  // namespace cairn::partner
