// L2 partner copies, the receiving side (partner_transfer.hpp; the messages
// are docs/format.md 3.8's): receives posted ahead, each message checked
// before it is used (a head, a chunk and its trailer), a whole version handed
// to the store thread, then acknowledged.
#include <unistd.h>  // getpid: temp file names (docs/format.md, 3.3)

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

// `buf`: a handled message's buffer, reused (not zeroed again), else one
// back from the store thread, else a new one.
Status Transfers::Post(In& in, std::vector<uint8_t> buf) {
  Out::Flight p;
  if (buf.empty() && !in.spares.empty()) {
    buf = std::move(in.spares.back());
    in.spares.pop_back();
  }
  p.buf = std::move(buf);
  p.buf.resize(std::max(limits_.chunk_bytes + kTrailer, kMinReceive));
  CAIRN_ASSIGN_OR_RETURN(p.req,
                         group_->StartReceive(in.source, kDataTag, p.buf.data(), p.buf.size()));
  in.posted.push_back(std::move(p));
  return Status::Ok();
}

void Transfers::StepIn(In& in) {
  while (!in.acks.empty()) {  // an ack's buffer lives until its send completed
    auto sent = in.acks.front().second->Test();
    if (!sent.ok()) return Fail(sent.status());
    if (!*sent) break;
    in.acks.pop_front();
  }
  if (!in.aborted.ok()) return;  // nothing more comes from it
  while (!in.bye) {
    while (in.posted.size() < static_cast<size_t>(limits_.window)) {
      if (Status s = Post(in, {}); !s.ok()) return Fail(s);
    }
    // At most a window of chunks waits for its writes: the source stalls
    // at its window meanwhile.
    if (in.writing >= limits_.window) return;
    auto done = in.posted.front().req->Test();
    if (!done.ok()) return Fail(done.status());
    if (!*done) return;
    Out::Flight msg = std::move(in.posted.front());
    in.posted.pop_front();
    if (Status s = Handle(in, msg.buf, msg.req->bytes()); !s.ok()) return Fail(s);
    if (!in.bye) {
      if (Status s = Post(in, std::move(msg.buf)); !s.ok()) return Fail(s);
    }
  }
}

// A chunk goes to the store thread to be written (it takes `msg`), so that
// this thread moves the next chunks meanwhile. Chunks come in any order,
// each once (docs/format.md 3.8); one that cannot be placed is damage, and
// still counts, so that the version ends when its source has sent them all.
Status Transfers::Handle(In& in, std::vector<uint8_t>& msg, size_t bytes) {
  if (!in.receiving) return Begin(in, msg.data(), bytes);
  const std::string of = " of version " + std::to_string(in.version) + " of '" + in.name +
                         "' from rank " + std::to_string(in.source);
  CAIRN_ASSIGN_OR_RETURN(const Chunk chunk, ParseChunk(msg.data(), bytes, "a chunk" + of));
  if (chunk.intact && chunk.index == kWithdrawn && chunk.payload == 0) return Withdraw(in);
  ++in.received;
  const uint64_t c = limits_.chunk_bytes, index = static_cast<uint64_t>(chunk.index);
  const bool placed = chunk.index >= 0 && index < in.arrived.size() && !in.arrived[index] &&
                      chunk.payload == std::min<uint64_t>(c, in.total - index * c);
  if (in.damage.ok() && !(chunk.intact && placed)) {
    in.damage = Status::Corrupt("chunk " + std::to_string(chunk.index) + of +
                                " arrived damaged (its CRC32C, index or size does not match)");
  }
  auto job = std::make_unique<Store>(Store{.kind = Store::Kind::kChunk, .in = &in});
  job->write_error = in.write_error;
  if (placed) {
    in.arrived[index] = true;
    const uint64_t begin = index * c;
    uint64_t file_start = 0;
    for (auto& f : in.files) {
      const uint64_t lo = std::max(begin, file_start),
                     hi = std::min(begin + chunk.payload, file_start + f.bytes);
      if (lo < hi && in.damage.ok()) {
        job->pieces.push_back(
            {.file = f.file, .from = lo - begin, .bytes = hi - lo, .at = lo - file_start});
      }
      file_start += f.bytes;
    }
  }
  if (!job->pieces.empty()) {
    job->chunk = std::move(msg);
    ++in.writing;
    MutexLock lock(&store_mu_);
    storer_.Push(std::move(job));
  }
  return in.received >= in.arrived.size() ? Keep(in) : Status::Ok();
}

// The source withdrew the version (its local commit failed after it began
// sending): nothing is answered.
Status Transfers::Withdraw(In& in) {
  Drop(in, Status::State("rank " + std::to_string(in.source) + " withdrew its copy of version " +
                         std::to_string(in.version) + " of '" + in.name +
                         "': it could not commit it locally"));
  return Status::Ok();
}

// The version being received ends unstored, with `why`: its temp files go
// (a chunk still with the store thread writes to an unlinked file).
void Transfers::Drop(In& in, const Status& why) {
  os::FileSystem* fs = redundancy::Fs(config_);
  for (auto& f : in.files) {
    f.file.reset();
    (void)fs->Remove(f.tmp);
  }
  in.files.clear();
  in.receiving = false;
  in.stored[{in.name, in.version}] = why;
}

// A head: opens the temp files of the version's files (the transfer's
// outcome is kept in `damage`; only a malformed head stops the level).
Status Transfers::Begin(In& in, const uint8_t* msg, size_t bytes) {
  CAIRN_ASSIGN_OR_RETURN(
      Head head,
      ParseHead(msg, bytes, "a partner copy's head from rank " + std::to_string(in.source)));
  if (head.kind == Head::Kind::kBye) {
    in.bye = true;
    return Status::Ok();
  }
  in.name = std::move(head.name);
  in.version = head.version;
  if (head.kind == Head::Kind::kNothing) {  // the source reports its own error
    in.stored[{in.name, in.version}] = Status::Ok();
    return Status::Ok();
  }
  in.receiving = true;
  in.damage = Status::Ok();
  in.write_error = std::make_shared<Status>();
  in.total = head.total;
  in.received = 0;
  in.arrived.assign((head.total + limits_.chunk_bytes - 1) / limits_.chunk_bytes, false);
  in.files.clear();
  in.dir = CopyDir(config_, in.source) + "/" + in.name;
  os::FileSystem* fs = redundancy::Fs(config_);
  in.damage = fs->CreateDirs(in.dir, 0700);
  for (const Head::File& h : head.files) {
    In::File f{.number = h.number, .bytes = h.bytes};
    f.tmp = in.dir + "/." + format::EntryFileName(format::EntryKind::kCheckpoint, f.number) + "." +
            std::to_string(::getpid()) + ".tmp";
    if (in.damage.ok()) {
      auto file = OpenForCopy(config_, limits_, f.tmp,
                              os::OpenOptions{.write = true, .mode = config_.file_mode}, h.bytes);
      if (file.ok())
        f.file = std::move(*file);
      else
        in.damage = file.status();
    }
    in.files.push_back(std::move(f));
  }
  return in.total == 0 ? Keep(in) : Status::Ok();
}

// The whole version is here: the store thread makes it durable (RunStore),
// and Stored acknowledges it. The source's next version may arrive
// meanwhile (new temp files).
Status Transfers::Keep(In& in) {
  auto job = std::make_unique<Store>(Store{.in = &in,
                                           .write_error = in.write_error,
                                           .name = in.name,
                                           .dir = in.dir,
                                           .version = in.version,
                                           .files = std::move(in.files),
                                           .status = in.damage});
  in.files.clear();
  in.receiving = false;
  ++in.storing;
  MutexLock lock(&store_mu_);
  storer_.Push(std::move(job));
  return Status::Ok();
}

// The store thread: fsync, rename bases first (a directory never shows a
// version whose chain is broken, docs/format.md 4.8, so what a recovery
// lists meanwhile is whole), or remove the temp files. Why a thread: the
// fsync of a large version took the holder's application hundreds of ms
// inside an unrelated Cairn call (docs/mpi.md "Partner copies (L2)").
void Transfers::RunJob(std::unique_ptr<Store>& job) {
  store_mu_.AssertHeld();  // the Worker runs jobs under its mutex, store_mu_
  job->kind == Store::Kind::kChunk ? RunWrites(*job) : RunStore(*job);
  stored_.push_back(std::move(job));
}

// A chunk's pieces, after the first write of its transfer that failed: none.
void Transfers::RunWrites(Store& job) {
  MutexUnlock unlocked(&store_mu_);  // only the job's own state below
  Status& failed = *job.write_error;
  for (const Store::Piece& p : job.pieces) {
    if (!failed.ok()) return;
    const uint8_t* piece = job.chunk.data() + p.from;
    if (p.file->direct()) {  // offsets and lengths are whole blocks (OpenForCopy)
      os::DirectBuffer& bounce = job.in->bounce;
      if (!bounce) bounce = os::AllocDirectBuffer(limits_.chunk_bytes);
      if (!bounce) {
        failed = Status::NoMemory("a partner copy: no buffer for its direct write");
        return;
      }
      std::memcpy(bounce.get(), piece, p.bytes);
      piece = bounce.get();
    }
    failed = p.file->WriteAt(piece, p.bytes, p.at);
  }
}

void Transfers::RunStore(Store& job) {
  MutexUnlock unlocked(&store_mu_);  // only the job's own state below: Keep may queue the next
  os::FileSystem* fs = redundancy::Fs(config_);
  Status& s = job.status;
  if (s.ok()) s = *job.write_error;
  for (auto& f : job.files) {
    if (s.ok() && config_.fsync) s = f.file->Sync();
    if (s.ok()) s = f.file->Close();
  }
  for (auto it = job.files.rbegin(); s.ok() && it != job.files.rend(); ++it) {
    s = fs->Rename(
        it->tmp, job.dir + "/" + format::EntryFileName(format::EntryKind::kCheckpoint, it->number));
  }
  if (s.ok() && config_.fsync) s = fs->SyncDir(job.dir);
  if (!s.ok()) {
    for (auto& f : job.files) {
      f.file.reset();
      (void)fs->Remove(f.tmp);
    }
  }
  job.files.clear();
}

// The versions the store thread finished: the older copies of their source
// go (on this thread, so that a recovery never lists a version while it is
// deleted), the outcome is kept for Complete, and the source is answered.
void Transfers::Stored() {
  std::vector<std::unique_ptr<Store>> done;
  {
    MutexLock lock(&store_mu_);
    done.swap(stored_);
  }
  Status failed;
  for (auto& job : done) {
    In& in = *job->in;
    if (job->kind == Store::Kind::kChunk) {
      --in.writing;
      in.spares.push_back(std::move(job->chunk));
      continue;
    }
    --in.storing;
    if (job->status.ok())
      redundancy::Retain(config_, CopyDir(config_, in.source), job->name, /*chains=*/true);
    in.stored[{job->name, job->version}] = job->status;
    if (Status a = Ack(in, job->version, job->status.code()); failed.ok()) failed = a;
  }
  if (!failed.ok()) Fail(failed);
}

Status Transfers::Ack(In& in, int64_t version, Code code) {
  auto ack = std::make_unique<int64_t[]>(2);
  const Answer answer = EncodeAnswer(version, code);
  ack[0] = answer[0];
  ack[1] = answer[1];
  CAIRN_ASSIGN_OR_RETURN(
      auto req, group_->StartSend(in.source, kAckTag, reinterpret_cast<uint8_t*>(ack.get()),
                                  2 * sizeof(int64_t)));
  in.acks.emplace_back(std::move(ack), std::move(req));
  return Status::Ok();
}

}  // namespace cairn::partner
