// What the partner copies' three parts share (partner_transfer.hpp): the
// wire constants of docs/format.md 3.8, the state of a transfer out (Out)
// and in (In), a received version on its way to the store thread (Store) and
// a peer's abort notices (Peer). partner_transfer.cpp drives them,
// partner_send.cpp sends, partner_receive.cpp receives and stores. Internal
// to libcairn.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "os/fs/fs.hpp"
#include "os/mem/memory.hpp"
#include "redundancy/partner/messages.hpp"
#include "redundancy/partner/partner_transfer.hpp"
#include "redundancy/redundancy.hpp"
#include "util/mutex.hpp"

namespace cairn::partner {
namespace wire {

constexpr int64_t kNothing = -1;                     // head: the source has no file to send
constexpr int64_t kBye = -2;                         // head: the source sends nothing more
constexpr size_t kMinReceive = 64 << 10;  // a receive holds any head

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
inline bool Settled(const std::unique_ptr<Group::Request>& r) {
  if (!r) return true;
  auto done = r->Test();
  return done.ok() && *done;
}

// A version's file for the copy: with direct I/O (config.direct_io) when
// its size and the chunks are whole blocks of kDirectIoAlignment, as Cairn's
// files are
// (docs/format.md), so that neither side puts the copy through the page
// cache (fresh page-cache memory cost more than the disk on the development
// VM: docs/results/2026-12-07-partner-direct-io.md); else, or where the file
// system refuses O_DIRECT, buffered.
inline Result<std::unique_ptr<os::File>> OpenForCopy(const Config& config,
                                                     const TransferLimits& limits,
                                                     const std::string& path,
                                                     os::OpenOptions options, uint64_t bytes) {
  options.direct = config.direct_io && bytes % os::kDirectIoAlignment == 0 &&
                   limits.chunk_bytes % os::kDirectIoAlignment == 0;
  return os::OpenPreferringDirect(redundancy::Fs(config), path, options);
}

// A committed version's file for its sender: opened for the copy, and its
// size, which says whether it is read with direct I/O (a committed file
// never changes).
struct SourceFile {
  std::unique_ptr<os::File> file;
  uint64_t bytes = 0;
};
inline Result<SourceFile> OpenSource(const Config& config, const TransferLimits& limits,
                                     const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(os::FileInfo info, redundancy::Fs(config)->Stat(path));
  CAIRN_ASSIGN_OR_RETURN(auto file,
                         OpenForCopy(config, limits, path, os::OpenOptions{}, info.size));
  return SourceFile{std::move(file), info.size};
}

// Withdraws a receive (or none); false while it may still be pending.
inline bool Withdrawn(const std::unique_ptr<Group::Request>& r) { return !r || r->Cancel().ok(); }

}  // namespace wire

struct Transfers::Out {
  uint64_t seq = 0;
  std::string name;
  int64_t version = -1;
  bool committed = false;  // on disk from before this client: no local commit to wait for
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
  os::DirectBuffer bounce;  // a chunk read with O_DIRECT lands here first
  // Started before its local commit (StartEarly): the chunks that the host
  // cache could not fill whole (its header, its tables) wait here, in
  // order, for the commit; then the file is opened (`local_done`) and
  // they are read. `awaiting`: nothing else to send until then.
  bool early = false, local_done = false, awaiting = false;
  std::deque<uint64_t> deferred;
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
    std::shared_ptr<os::File> file;  // and the store thread's writes to it
  };
  std::string dir;
  std::vector<File> files;
  // The store thread's only: a piece written with O_DIRECT goes from here.
  os::DirectBuffer bounce;
  uint64_t total = 0;
  std::vector<bool> arrived;  // per chunk index: chunks come in any order
  uint64_t received = 0;      // chunk messages handled (Keep at arrived.size())
  Status damage;  // the first thing wrong with the transfer being received
  // The first write that failed, set by the store thread, read by the
  // transfer's store (both on that thread: its queue keeps their order).
  std::shared_ptr<Status> write_error;
  int writing = 0;  // received chunks with the store thread, not written yet
  std::vector<std::vector<uint8_t>> spares;  // their buffers, back from it
  // Finished transfers, until Complete takes their outcome.
  std::map<std::pair<std::string, int64_t>, Status> stored;
  std::deque<std::pair<std::unique_ptr<int64_t[]>, std::unique_ptr<Group::Request>>> acks;
  Status aborted;   // the source's abort notice: nothing more comes from it
  int storing = 0;  // whole versions with the store thread, not acknowledged yet
};

// A job of the store thread, from Handle or Keep to it (RunJob) and back
// (Stored): a received chunk's writes, or a whole received version's store.
struct Transfers::Store {
  enum class Kind { kChunk, kVersion } kind = Kind::kVersion;
  In* in;                               // the MPI thread's: Stored, and a chunk's writes its bounce
  std::shared_ptr<Status> write_error;  // the transfer's (In::write_error)
  // A chunk: its message, and where each piece of it goes.
  struct Piece {
    std::shared_ptr<os::File> file;
    size_t from, bytes;  // in `chunk`
    uint64_t at;         // in the file
  };
  std::vector<uint8_t> chunk;
  std::vector<Piece> pieces;
  // A version: its files, made durable and renamed.
  std::string name, dir;
  int64_t version = -1;
  std::vector<In::File> files;
  Status status;  // what was wrong with the transfer, then with the store
};

// The partner or a source: the abort notice it may send, the one sent to it.
struct Transfers::Peer {
  int rank = -1;
  AbortNotice notice{};  // what it sent us (messages.hpp)
  std::unique_ptr<Group::Request> req;
  bool heard = false;
  AbortNotice sent{};
  std::unique_ptr<Group::Request> send;
};

}  // namespace cairn::partner
