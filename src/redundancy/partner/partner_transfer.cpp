// L2 partner copies in the background (partner_transfer.hpp; the messages
// are docs/format.md 3.8's).
#include "redundancy/partner/partner_transfer.hpp"

#include <unistd.h>  // getpid: temp file names (docs/format.md, 3.3)

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/partner/head.hpp"
#include "redundancy/redundancy.hpp"
#include "util/clock.hpp"
#include "util/crc32c.hpp"

namespace cairn {
Group::Request::~Request() = default;
Result<std::unique_ptr<Group::Request>> Group::StartSend(int, int, const uint8_t*, size_t) {
  return Status::Unsupported("this group has no nonblocking point-to-point messages");
}
Result<std::unique_ptr<Group::Request>> Group::StartReceive(int, int, uint8_t*, size_t) {
  return Status::Unsupported("this group has no nonblocking point-to-point messages");
}
}  // namespace cairn

namespace cairn::partner {

namespace {

constexpr int64_t kNothing = -1;                // head: the source has no file to send
constexpr int64_t kBye = -2;                    // head: the source sends nothing more
constexpr int64_t kAbortMagic = 0x3162613243524143;  // "CARC2ab1": abort notice
constexpr size_t kTrailer = 16;                 // chunk: [int64 index][uint32 crc32c][uint32 0]
constexpr size_t kMinReceive = 64 << 10;        // a receive holds any head

uint32_t ChunkCrc(const uint8_t* payload, size_t n, int64_t index) {
  return crc32c::Extend(crc32c::Value(payload, n), &index, sizeof index);
}

// What MPI may still read or write after its owner is gone: a send to a
// member that stopped receiving (it never completes), a receive whose
// withdrawal failed. Freeing its buffer would let MPI touch freed memory
// (the heap corruption once met in MPI_Finalize), so it is kept until the
// process exits. Error paths only; reachable from here, so LeakSanitizer
// does not count it.
class Kept {
 public:
  static void UntilExit(std::shared_ptr<void> p) {
    static Kept* kept = new Kept;
    MutexLock lock(&kept->mu_);
    kept->items_.push_back(std::move(p));
  }

 private:
  Mutex mu_;
  std::vector<std::shared_ptr<void>> items_ CAIRN_GUARDED_BY(mu_);
};

// Complete (or none)? A failed test counts as pending: MPI may still use it.
bool Settled(const std::unique_ptr<Group::Request>& r) {
  if (!r) return true;
  auto done = r->Test();
  return done.ok() && *done;
}

// Withdraws a receive (or none); false while it may still be pending.
bool Withdrawn(const std::unique_ptr<Group::Request>& r) { return !r || r->Cancel().ok(); }

}  // namespace

struct Transfers::Out {
  uint64_t seq = 0;
  std::string name;
  int64_t version = -1;
  enum class State { kWaiting, kSending, kAcking } state = State::kWaiting;
  struct File {
    int64_t number;
    std::unique_ptr<os::File> file;
    uint64_t bytes;
  };
  std::vector<File> files;
  uint64_t total = 0, chunks = 0, next_chunk = 0;
  std::vector<uint8_t> head;
  std::unique_ptr<Group::Request> head_req;
  struct Flight {
    std::vector<uint8_t> buf;
    std::unique_ptr<Group::Request> req;
  };
  std::deque<Flight> flights;
  std::vector<uint8_t> spare;
  int64_t ack[2] = {-1, -1};
  std::unique_ptr<Group::Request> ack_req;
  Status failed;  // this member could not send it (no ack expected)
};

struct Transfers::In {
  int source = -1;
  std::deque<Out::Flight> posted;  // receives, in the order started
  bool bye = false;
  bool receiving = false;  // between a head and the transfer's last chunk
  std::string name;
  int64_t version = -1;
  struct File {
    int64_t number;
    uint64_t bytes;
    std::string tmp;
    std::unique_ptr<os::File> file;
  };
  std::string dir;
  std::vector<File> files;
  uint64_t total = 0, got = 0;
  int64_t next_index = 0;
  Status damage;  // the first thing wrong with the transfer being received
  // Finished transfers, until Complete takes their outcome.
  std::map<std::pair<std::string, int64_t>, Status> stored;
  std::deque<std::pair<std::unique_ptr<int64_t[]>, std::unique_ptr<Group::Request>>> acks;
  Status aborted;  // the source's abort notice: nothing more comes from it
  int storing = 0;  // whole versions with the store thread, not acknowledged yet
};

// A whole received version, from Keep to the store thread (RunStore) and
// back (Stored).
struct Transfers::Store {
  In* in;  // the MPI thread's: only Stored touches it
  std::string name, dir;
  int64_t version;
  std::vector<In::File> files;
  Status status;  // what was wrong with the transfer, then with the store
};

// The partner or a source: the abort notice it may send, the one sent to it.
struct Transfers::Peer {
  int rank = -1;
  int64_t notice[2] = {0, 0};  // [kAbortMagic][code]
  std::unique_ptr<Group::Request> req;
  bool heard = false;
  int64_t sent[2] = {0, 0};
  std::unique_ptr<Group::Request> send;
};

Transfers::Transfers(Group* group, Map map, Config config, Local local, TransferLimits limits)
    : group_(group),
      map_(std::move(map)),
      config_(std::move(config)),
      local_(std::move(local)),
      limits_(limits),
      storer_(&store_mu_, &store_done_,
              {.run = [this](std::unique_ptr<Store>& job) {
                store_mu_.AssertHeld();  // the Worker runs jobs under its mutex, store_mu_
                RunStore(*job);
                stored_.push_back(std::move(job));
              }}) {
  storer_.Start(nullptr);
  MutexLock lock(&mu_);
  std::vector<int> peers;
  if (map_.partner >= 0) peers.push_back(map_.partner);
  for (int s : map_.sources) {
    auto in = std::make_unique<In>();
    in->source = s;
    ins_.push_back(std::move(in));
    peers.push_back(s);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  for (int r : peers) {
    peers_.push_back(std::make_unique<Peer>());
    peers_.back()->rank = r;
  }
}

Transfers::~Transfers() {
  // After Finish everything is quiet unless an error stopped the transfers;
  // without Finish (an error) receives may be posted and sends in flight.
  // Nothing MPI may still touch is freed: a receive is withdrawn (cancel +
  // wait), a send that has not completed is kept with its buffer.
  MutexLock lock(&mu_);
  for (auto& o : outs_) abandoned_.push_back(std::move(o));
  outs_.clear();
  for (auto& o : abandoned_) {
    if (!Quiet(*o)) {
      o->files.clear();  // its chunks are read: the files can close
      Kept::UntilExit(std::shared_ptr<Out>(std::move(o)));
    }
  }
  for (auto& in : ins_) {
    for (auto& p : in->posted) {
      if (!Withdrawn(p.req)) Kept::UntilExit(std::make_shared<Out::Flight>(std::move(p)));
    }
    for (auto& a : in->acks) {
      if (!Settled(a.second)) Kept::UntilExit(std::make_shared<decltype(In::acks)::value_type>(std::move(a)));
    }
  }
  for (auto& p : peers_) {
    if (!(p->heard || Withdrawn(p->req)) || !Settled(p->send)) Kept::UntilExit(std::shared_ptr<Peer>(std::move(p)));
  }
}

bool Transfers::Quiet(Out& o) {
  bool quiet = Settled(o.head_req);
  for (auto& f : o.flights) quiet = Settled(f.req) && quiet;
  return Withdrawn(o.ack_req) && quiet;
}

void Transfers::Dispose(std::unique_ptr<Out> o) {
  if (!Quiet(*o)) abandoned_.push_back(std::move(o));
}

// Frees what completed since: abandoned transfers, abort notices sent.
void Transfers::Reap() {
  std::erase_if(abandoned_, [&](auto& o) CAIRN_REQUIRES(mu_) { return Quiet(*o); });
  for (auto& p : peers_) {
    if (p->send && Settled(p->send)) p->send.reset();
  }
}

void Transfers::Queue(const std::string& name, int64_t version) {
  MutexLock lock(&queue_mu_);
  const uint64_t seq = next_seq_++;
  seq_of_[{name, version}] = seq;
  queued_.push_back({seq, name, version});
}

bool Transfers::Queued(const std::string& name, int64_t version) {
  MutexLock lock(&queue_mu_);
  return seq_of_.contains({name, version});
}

uint64_t Transfers::copies() const {
  MutexLock lock(&mu_);
  return copies_;
}

redundancy::Newest Transfers::Acknowledged(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = acknowledged_.find(name);
  return it == acknowledged_.end() ? redundancy::Newest{} : it->second;
}

void Transfers::Fail(const Status& s) {
  if (!broken_.ok()) return;
  broken_ = s.WithContext("the partner copies (L2) in the background");
  SendAborts();
}

// --- Abort notices -----------------------------------------------------------

// Best effort: a peer the notice cannot reach has lost its transport too.
void Transfers::SendAborts() {
  if (aborts_sent_) return;
  aborts_sent_ = true;
  for (auto& p : peers_) {
    p->sent[0] = kAbortMagic;
    p->sent[1] = static_cast<int64_t>(broken_.code());
    auto r = group_->StartSend(p->rank, kAbortTag, reinterpret_cast<const uint8_t*>(p->sent), sizeof p->sent);
    if (r.ok()) p->send = std::move(*r);
  }
}

// Posts the notices' receives once, then takes the notices that came.
void Transfers::Listen() {
  if (!listening_) {
    listening_ = true;
    for (auto& p : peers_) {
      auto r = group_->StartReceive(p->rank, kAbortTag, reinterpret_cast<uint8_t*>(p->notice), sizeof p->notice);
      if (!r.ok()) return Fail(r.status());
      p->req = std::move(*r);
    }
  }
  for (auto& p : peers_) {
    if (p->heard || !p->req) continue;
    auto got = p->req->Test();
    if (!got.ok()) return Fail(got.status());
    if (!*got) continue;
    p->heard = true;
    const bool valid = p->req->bytes() == sizeof p->notice && p->notice[0] == kAbortMagic && p->notice[1] != 0;
    Aborted(p->rank, Status(valid ? static_cast<Code>(p->notice[1]) : Code::kInternal,
                            "rank " + std::to_string(p->rank) +
                                " stopped its partner copies (L2) after an error (its own error says which)"));
  }
}

// Nothing more comes from `rank`: what this member waits for from it fails
// with `s` (a partial copy is dropped), and nothing more goes to it.
void Transfers::Aborted(int rank, const Status& s) {
  if (rank == map_.partner && partner_aborted_.ok()) partner_aborted_ = s;
  os::FileSystem* fs = redundancy::Fs(config_);
  for (auto& in : ins_) {
    if (in->source != rank || !in->aborted.ok()) continue;
    in->aborted = s;
    in->bye = true;
    for (auto& p : in->posted) {
      if (!Withdrawn(p.req)) Kept::UntilExit(std::make_shared<Out::Flight>(std::move(p)));
    }
    in->posted.clear();
    if (in->receiving) {
      for (auto& f : in->files) {
        f.file.reset();
        (void)fs->Remove(f.tmp);
      }
      in->files.clear();
      in->receiving = false;
      in->stored[{in->name, in->version}] = s;
    }
  }
}

redundancy::Pace Transfers::Progress() {
  if (!mu_.TryLock()) return redundancy::Pace::kWaiting;  // a Complete or Finish drives them now
  if (!finished_) Step();
  const redundancy::Pace pace = PaceLocked();
  mu_.Unlock();
  return pace;
}

redundancy::Pace Transfers::PaceLocked() {
  using redundancy::Pace;
  if (finished_ || !broken_.ok()) return abandoned_.empty() ? Pace::kIdle : Pace::kWaiting;
  Pace pace = abandoned_.empty() ? Pace::kIdle : Pace::kWaiting;
  for (const auto& o : outs_) {
    if (o->state != Out::State::kWaiting) return Pace::kBusy;
    pace = Pace::kWaiting;
  }
  for (const auto& in : ins_) {
    if (in->receiving || !in->acks.empty()) return Pace::kBusy;
    if (in->storing > 0) pace = Pace::kWaiting;
  }
  MutexLock lock(&queue_mu_);
  return queued_.empty() ? pace : Pace::kWaiting;
}

void Transfers::Step() {
  Reap();
  if (broken_.ok()) Listen();
  if (!broken_.ok()) return;
  {
    MutexLock lock(&queue_mu_);
    for (Entry& q : queued_) {
      auto out = std::make_unique<Out>();
      out->seq = q.seq;
      out->name = std::move(q.name);
      out->version = q.version;
      outs_.push_back(std::move(out));
    }
    queued_.clear();
  }
  Stored();
  StepOut();
  for (auto& in : ins_) {
    if (broken_.ok()) StepIn(*in);
  }
}

// --- Sending -----------------------------------------------------------------

void Transfers::StepOut() {
  if (!partner_aborted_.ok()) {  // no ack will come: the transfers end here
    for (auto& o : outs_) {
      if (o->version != kBye) {
        out_results_[o->seq] = partner_aborted_.WithContext("the partner copy of version " +
                                                            std::to_string(o->version) + " of '" + o->name + "'");
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
      if (o.version != kBye && !local_.committed(o.name, o.version)) {
        if (finishing_) {
          o.failed = Status::NotFound("version " + std::to_string(o.version) + " of '" + o.name +
                                      "' was never committed locally");
        } else if (blocking_ && local_.wait) {
          o.failed = local_.wait(o.name, o.version);
        } else {
          return;  // a later Progress
        }
      }
      if (Status s = StartOut(o); !s.ok()) return Fail(s);
    }
    if (o.state == Out::State::kSending) {
      if (Status s = SendChunks(o); !s.ok()) return Fail(s);
      if (o.next_chunk < o.chunks || !o.flights.empty()) return;
      auto head = o.head_req->Test();
      if (!head.ok()) return Fail(head.status());
      if (!*head) return;
      o.state = Out::State::kAcking;
    }
    if (o.ack_req) {
      auto acked = o.ack_req->Test();
      if (!acked.ok()) return Fail(acked.status());
      if (!*acked) return;
      if (o.ack[0] != o.version || o.ack[1] != 0) {
        const auto code = o.ack[1] == 0 ? Code::kInternal : static_cast<Code>(o.ack[1]);
        out_results_[o.seq] = Status(code, "the partner copy of version " + std::to_string(o.version) +
                                               " of '" + o.name + "': rank " +
                                               std::to_string(map_.partner) +
                                               " could not store it (its error says why)");
      } else {
        ++copies_;
        acknowledged_[o.name].Raise(o.version, RealtimeNs());
      }
    } else if (!o.failed.ok()) {
      out_results_[o.seq] = o.failed.WithContext("the partner copy of version " +
                                                 std::to_string(o.version) + " of '" + o.name + "'");
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
    auto chain = format::Chain::Open(redundancy::Fs(config_), config_.scratch_dir, o.name, o.version);
    Status s = chain.status();
    for (size_t i = 0; s.ok() && i < chain->links().size(); ++i) {
      const std::string& path = chain->links()[i]->path();
      auto parsed = format::ParseEntryFileName(path.substr(path.rfind('/') + 1));
      if (!parsed) {
        s = Status::Internal(path + ": not a version file name");
        break;
      }
      // Opened now: retention may delete the file before its last chunk goes.
      auto file = redundancy::Fs(config_)->Open(path, os::OpenOptions{});
      if (!file.ok()) {
        s = file.status();
        break;
      }
      auto bytes = (*file)->Size();
      if (!bytes.ok()) {
        s = bytes.status();
        break;
      }
      o.total += *bytes;
      o.files.push_back({parsed->number, std::move(*file), *bytes});
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
    CAIRN_ASSIGN_OR_RETURN(o.ack_req, group_->StartReceive(map_.partner, kAckTag,
                                                           reinterpret_cast<uint8_t*>(o.ack), sizeof o.ack));
  }
  CAIRN_ASSIGN_OR_RETURN(o.head_req, group_->StartSend(map_.partner, kDataTag, o.head.data(), o.head.size()));
  o.state = Out::State::kSending;
  return Status::Ok();
}

// Reaps the sends that completed and starts chunks up to the window: each
// is read from the files when it is sent, so at most `window` chunks of
// this member's version are in memory.
Status Transfers::SendChunks(Out& o) {
  while (!o.flights.empty()) {
    CAIRN_ASSIGN_OR_RETURN(bool done, o.flights.front().req->Test());
    if (!done) break;
    o.spare = std::move(o.flights.front().buf);
    o.flights.pop_front();
  }
  while (o.next_chunk < o.chunks && o.flights.size() < static_cast<size_t>(limits_.window)) {
    const uint64_t begin = o.next_chunk * limits_.chunk_bytes;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(limits_.chunk_bytes, o.total - begin));
    Out::Flight f;
    f.buf = std::move(o.spare);  // a sent chunk's buffer: not zeroed again
    f.buf.resize(n + kTrailer);
    uint64_t file_start = 0;
    for (const auto& file : o.files) {
      const uint64_t lo = std::max(begin, file_start), hi = std::min(begin + n, file_start + file.bytes);
      if (lo < hi) {
        CAIRN_RETURN_IF_ERROR(file.file->ReadAt(f.buf.data() + (lo - begin), hi - lo, lo - file_start));
      }
      file_start += file.bytes;
    }
    const int64_t index = static_cast<int64_t>(o.next_chunk);
    const uint32_t crc = ChunkCrc(f.buf.data(), n, index);
    std::memcpy(f.buf.data() + n, &index, sizeof index);
    std::memcpy(f.buf.data() + n + sizeof index, &crc, sizeof crc);
    std::memset(f.buf.data() + n + sizeof index + sizeof crc, 0, kTrailer - sizeof index - sizeof crc);
    CAIRN_ASSIGN_OR_RETURN(f.req, group_->StartSend(map_.partner, kDataTag, f.buf.data(), f.buf.size()));
    o.flights.push_back(std::move(f));
    ++o.next_chunk;
  }
  return Status::Ok();
}

// --- Receiving ---------------------------------------------------------------

// `buf`: a handled message's buffer, reused (not zeroed again).
Status Transfers::Post(In& in, std::vector<uint8_t> buf) {
  Out::Flight p;
  p.buf = std::move(buf);
  p.buf.resize(std::max(limits_.chunk_bytes + kTrailer, kMinReceive));
  CAIRN_ASSIGN_OR_RETURN(p.req, group_->StartReceive(in.source, kDataTag, p.buf.data(), p.buf.size()));
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
    auto done = in.posted.front().req->Test();
    if (!done.ok()) return Fail(done.status());
    if (!*done) return;
    Out::Flight msg = std::move(in.posted.front());
    in.posted.pop_front();
    if (Status s = Handle(in, msg.buf.data(), msg.req->bytes()); !s.ok()) return Fail(s);
    if (!in.bye) {
      if (Status s = Post(in, std::move(msg.buf)); !s.ok()) return Fail(s);
    }
  }
}

Status Transfers::Handle(In& in, const uint8_t* msg, size_t bytes) {
  if (!in.receiving) return Begin(in, msg, bytes);
  const std::string what = "chunk " + std::to_string(in.next_index) + " of version " +
                           std::to_string(in.version) + " of '" + in.name + "' from rank " +
                           std::to_string(in.source);
  if (bytes < kTrailer) return Status::Corrupt(what + ": " + std::to_string(bytes) + " bytes, no trailer");
  const size_t n = bytes - kTrailer;
  int64_t index = 0;
  uint32_t crc = 0;
  std::memcpy(&index, msg + n, sizeof index);
  std::memcpy(&crc, msg + n + sizeof index, sizeof crc);
  if (in.damage.ok() && (index != in.next_index || crc != ChunkCrc(msg, n, in.next_index))) {
    in.damage = Status::Corrupt(what + " arrived damaged (its CRC32C or index does not match)");
  }
  uint64_t file_start = 0;
  for (auto& f : in.files) {
    if (!in.damage.ok()) break;
    const uint64_t lo = std::max(in.got, file_start), hi = std::min(in.got + n, file_start + f.bytes);
    if (lo < hi) {
      Status w = f.file->WriteAt(msg + (lo - in.got), hi - lo, lo - file_start);
      if (!w.ok()) in.damage = w.WithContext(what);
    }
    file_start += f.bytes;
  }
  in.got += n;
  ++in.next_index;
  return in.got >= in.total ? Keep(in) : Status::Ok();
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
  in.got = 0;
  in.next_index = 0;
  in.total = head.total;
  in.files.clear();
  in.dir = CopyDir(config_, in.source) + "/" + in.name;
  os::FileSystem* fs = redundancy::Fs(config_);
  in.damage = fs->CreateDirs(in.dir, 0700);
  for (const Head::File& h : head.files) {
    In::File f{.number = h.number, .bytes = h.bytes};
    f.tmp = in.dir + "/." + format::EntryFileName(format::EntryKind::kCheckpoint, f.number) + "." +
            std::to_string(::getpid()) + ".tmp";
    if (in.damage.ok()) {
      auto file = fs->Open(f.tmp, os::OpenOptions{.write = true, .mode = config_.file_mode});
      if (file.ok()) f.file = std::move(*file);
      else in.damage = file.status();
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
void Transfers::RunStore(Store& job) {
  MutexUnlock unlocked(&store_mu_);  // only the job's own state below: Keep may queue the next
  os::FileSystem* fs = redundancy::Fs(config_);
  Status& s = job.status;
  for (auto& f : job.files) {
    if (s.ok() && config_.fsync) s = f.file->Sync();
    if (s.ok()) s = f.file->Close();
  }
  for (auto it = job.files.rbegin(); s.ok() && it != job.files.rend(); ++it) {
    s = fs->Rename(it->tmp, job.dir + "/" + format::EntryFileName(format::EntryKind::kCheckpoint, it->number));
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
    --in.storing;
    if (job->status.ok()) redundancy::Retain(config_, CopyDir(config_, in.source), job->name, /*chains=*/true);
    in.stored[{job->name, job->version}] = job->status;
    if (Status a = Ack(in, job->version, job->status.code()); failed.ok()) failed = a;
  }
  if (!failed.ok()) Fail(failed);
}

Status Transfers::Ack(In& in, int64_t version, Code code) {
  auto ack = std::make_unique<int64_t[]>(2);
  ack[0] = version;
  ack[1] = static_cast<int64_t>(code);
  CAIRN_ASSIGN_OR_RETURN(auto req, group_->StartSend(in.source, kAckTag, reinterpret_cast<uint8_t*>(ack.get()),
                                                     2 * sizeof(int64_t)));
  in.acks.emplace_back(std::move(ack), std::move(req));
  return Status::Ok();
}

// --- Blocking ----------------------------------------------------------------

Status Transfers::Drive(const std::function<bool()>& done) {
  while (broken_.ok()) {
    Step();
    if (done()) break;
    std::this_thread::yield();  // the partner's process may share this core
  }
  return broken_;
}

Status Transfers::Complete(const std::string& name, int64_t version) {
  MutexLock lock(&mu_);
  if (finished_) return Status::State("the partner copies (L2) are finished: the client is closing");
  uint64_t seq = 0;
  {
    MutexLock q(&queue_mu_);
    if (auto it = seq_of_.find({name, version}); it != seq_of_.end()) seq = it->second;
  }
  const std::pair<std::string, int64_t> key{name, version};
  blocking_ = true;
  Status s = Drive([&]() CAIRN_REQUIRES(mu_) {
    if (done_seq_ < seq) return false;
    return std::all_of(ins_.begin(), ins_.end(),
                       [&](const auto& in) { return in->stored.contains(key) || !in->aborted.ok(); });
  });
  blocking_ = false;
  CAIRN_RETURN_IF_ERROR(s);
  for (auto it = out_results_.begin(); it != out_results_.end() && it->first <= seq;) {
    if (s.ok()) s = it->second;
    it = out_results_.erase(it);
  }
  for (auto& in : ins_) {
    auto it = in->stored.find(key);
    if (s.ok()) s = it != in->stored.end() ? it->second : in->aborted;
    if (it != in->stored.end()) in->stored.erase(it);
  }
  MutexLock q(&queue_mu_);
  std::erase_if(seq_of_, [&](const auto& e) { return e.second <= seq; });
  return s;
}

Status Transfers::Finish() {
  MutexLock lock(&mu_);
  if (finished_) return Status::Ok();
  finishing_ = true;
  uint64_t bye = 0;
  {
    MutexLock q(&queue_mu_);
    bye = next_seq_++;
    queued_.push_back({bye, "", kBye});
  }
  Status s = Drive([&]() CAIRN_REQUIRES(mu_) {
    if (done_seq_ < bye) return false;
    return std::all_of(ins_.begin(), ins_.end(),
                       [](const auto& in) {
                         return in->bye && in->storing == 0 && (in->acks.empty() || !in->aborted.ok());
                       });
  });
  // A member that stopped after an error sent its abort notice instead of
  // its end message (Fail); make sure it did.
  if (!broken_.ok()) SendAborts();
  // The receives still posted are withdrawn (cancel + wait: their buffers
  // may go only then); one whose withdrawal failed stays for the destructor.
  for (auto& p : peers_) {
    if (p->req && !p->heard) {
      Status c = p->req->Cancel();
      if (!c.ok()) {
        if (s.ok()) s = c;
        continue;
      }
    }
    p->req.reset();
  }
  for (auto& in : ins_) {
    std::deque<Out::Flight> pending;
    for (auto& p : in->posted) {
      Status c = p.req->Cancel();
      if (c.ok()) continue;
      if (s.ok()) s = c;
      pending.push_back(std::move(p));
    }
    in->posted = std::move(pending);
    // What no wait asked for: its errors are reported here.
    for (auto& [key, st] : in->stored) {
      if (s.ok()) s = st;
    }
    if (s.ok()) s = in->aborted;
  }
  for (auto& [seq, st] : out_results_) {
    if (s.ok()) s = st;
  }
  Reap();  // what is still in flight now is kept by the destructor
  finished_ = true;
  return s;
}

}  // namespace cairn::partner
