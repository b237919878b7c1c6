// L2 partner copies in the background (docs/mpi.md "Partner copies (L2)";
// the messages: docs/format.md 3.8). A version queued on an L2 turn travels
// to the partner once it is committed locally, in chunks of bounded size
// (at most `window` chunks in flight per direction and partner), over the
// Group's nonblocking point-to-point channel. Nothing runs on its own: the
// transfers move at Progress(), which the client calls at its Cairn calls
// on the thread that opened it (the one that may call MPI), and at the
// collective wait (Complete) and close (Finish), which block until the
// partner and the sources have stored what is asked.
//
// The holder writes each incoming file to a temp file as its chunks
// arrive, checks every chunk's CRC32C, and only once the whole version is
// there fsyncs, renames (bases first) and acknowledges; a version counts at
// L2 only when that acknowledgement came back. A damaged chunk makes the
// holder drop the version and answer kCorrupt. The fsync and renames run
// on a store thread of this object's (no MPI), so that they do not block
// the application inside its Cairn calls; the retention of older copies
// and the acknowledgement follow at the first Progress after they ended.
//
// Back-pressure: while the member's application is inside a capture or a
// restore (Checkpoints::ApplicationBusy), Progress reads, sends, receives
// and writes no chunk, so the copies do not take the cores, the memory
// bandwidth and the disk from it; in flight stay at most the window's
// chunks, and a source whose holder yields stalls at its window. Complete
// and Finish, which the application waits in, never yield.
//
// A transport error stops this member's transfers (nothing moves any
// more), and the member at once sends an abort notice (its own tag) to
// its partner and its sources: they may be blocked in Complete or Finish
// waiting for its chunks, acknowledgements or end message, which will not
// come. A member that hears one fails what it waited for from that member
// with the notice's error instead. So every member always ends its
// transfers towards the others (an end message, or the abort notice after
// an error), and Finish never waits for a member that stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "engine/worker.hpp"
#include "redundancy/checkpoints.hpp"
#include "redundancy/newest.hpp"
#include "redundancy/partner/partner.hpp"
#include "redundancy/progress_thread.hpp"
#include "util/mutex.hpp"

namespace cairn::partner {

struct TransferLimits {
  size_t chunk_bytes = size_t{4} << 20;  // payload of one message
  int window = 4;                        // chunks in flight per direction and pair
};

class Transfers {
 public:
  // `group` (with point_to_point()) and `local` (the member's checkpoints:
  // whether a version is committed, and the wait for it) outlive this
  // object; `config` is the member's own (RankConfig).
  Transfers(Group* group, Map map, Config config, redundancy::Checkpoints* local,
            TransferLimits limits = {});
  ~Transfers();
  Transfers(const Transfers&) = delete;
  Transfers& operator=(const Transfers&) = delete;

  // Queues `version` of `name` for the partner; it starts at a later
  // Progress once committed locally. Any thread; no MPI.
  void Queue(const std::string& name, int64_t version) CAIRN_EXCLUDES(queue_mu_);
  // Queues a version already on disk, committed before this client opened
  // (a recovery sends the older versions whose copies a lost node took):
  // it starts at the next Progress, with no local commit to wait for; a
  // file retention deleted meanwhile is skipped. Any thread; no MPI.
  void QueueCommitted(const std::string& name, int64_t version) CAIRN_EXCLUDES(queue_mu_);
  bool Queued(const std::string& name, int64_t version) CAIRN_EXCLUDES(queue_mu_);

  // Moves every transfer on as far as it can without waiting for another
  // member (MPI_Test, MPI_Isend / MPI_Irecv starts, chunk reads and writes).
  // On the MPI thread (the opener's, or Cairn's own progress thread);
  // skipped when a Complete or Finish runs elsewhere. Returns what is left
  // to do (progress_thread.hpp): kBusy while messages of a version are in
  // flight, kWaiting while a queued version waits for its local commit or
  // a received one for its store.
  redundancy::Pace Progress() CAIRN_EXCLUDES(mu_, queue_mu_);

  // Blocks, moving the transfers on, until this member's queued transfers
  // up to (name, version) are acknowledged by the partner and every
  // source's transfer of (name, version) is stored here (each source must
  // have queued it: the collective wait checks that first). Returns the
  // first error among them. Needs the partner and sources to make progress
  // too: every member calls it in the same collective wait.
  Status Complete(const std::string& name, int64_t version) CAIRN_EXCLUDES(mu_, queue_mu_);

  // At close, after the last local commit (what is not committed by now
  // never will be): completes every queued transfer and the sources', then
  // withdraws the receives. Every member calls it; it returns once its
  // partner and sources have finished theirs. Afterwards nothing moves.
  Status Finish() CAIRN_EXCLUDES(mu_, queue_mu_);

  // Versions this member's partner acknowledged as stored.
  uint64_t copies() const CAIRN_EXCLUDES(mu_);
  // The newest version of `name` the partner acknowledged, and when this
  // member heard it (realtime ns); {-1, -1}: none.
  redundancy::Newest Acknowledged(const std::string& name) const CAIRN_EXCLUDES(mu_);

  // What the in-flight chunks are, for tests that damage one (a fake
  // transport): message tags.
  static constexpr int kDataTag = 0x2c2;
  static constexpr int kAckTag = 0x2c3;
  static constexpr int kAbortTag = 0x2c4;

 private:
  struct Out;
  struct In;
  struct Peer;
  struct Store;  // a whole received version, for the store thread
  // Queue's and QueueCommitted's entry.
  void Enqueue(const std::string& name, int64_t version, bool committed) CAIRN_EXCLUDES(queue_mu_);
  void Stored() CAIRN_REQUIRES(mu_);  // acknowledges what the store thread finished
  void Step() CAIRN_REQUIRES(mu_);
  redundancy::Pace PaceLocked() CAIRN_REQUIRES(mu_) CAIRN_EXCLUDES(queue_mu_);
  void StepOut() CAIRN_REQUIRES(mu_);
  void StepIn(In& in) CAIRN_REQUIRES(mu_);
  Status StartOut(Out& out) CAIRN_REQUIRES(mu_);
  Status StartEarly(Out& out, uint64_t bytes) CAIRN_REQUIRES(mu_);
  Status SendHead(Out& out, int64_t count) CAIRN_REQUIRES(mu_);
  Status SendChunks(Out& out) CAIRN_REQUIRES(mu_);
  Result<bool> AwaitingCommit(Out& out) CAIRN_REQUIRES(mu_);
  Status WithdrawOut(Out& out, const Status& why) CAIRN_REQUIRES(mu_);
  Status ReadChunk(Out& out, uint64_t begin, size_t n, uint8_t* dst) CAIRN_REQUIRES(mu_);
  Status Handle(In& in, std::vector<uint8_t>& msg, size_t bytes) CAIRN_REQUIRES(mu_);
  Status Begin(In& in, const uint8_t* msg, size_t bytes) CAIRN_REQUIRES(mu_);
  Status Post(In& in, std::vector<uint8_t> buf) CAIRN_REQUIRES(mu_);
  Status Keep(In& in) CAIRN_REQUIRES(mu_);
  Status Withdraw(In& in) CAIRN_REQUIRES(mu_);
  void Drop(In& in, const Status& why) CAIRN_REQUIRES(mu_);
  void RunStore(Store& job) CAIRN_REQUIRES(store_mu_);
  void RunWrites(Store& job) CAIRN_REQUIRES(store_mu_);
  // The storer's job (core::Worker), with store_mu_ held: RunStore, then
  // the store is kept in stored_ for Reap.
  friend class core::Worker<std::unique_ptr<Store>, Transfers>;
  void RunJob(std::unique_ptr<Store>& job);
  Status Ack(In& in, int64_t version, Code code) CAIRN_REQUIRES(mu_);
  void Fail(const Status& s) CAIRN_REQUIRES(mu_);
  void Listen() CAIRN_REQUIRES(mu_);
  void SendAborts() CAIRN_REQUIRES(mu_);
  void Aborted(int rank, const Status& s) CAIRN_REQUIRES(mu_);
  Status Drive(const std::function<bool()>& done) CAIRN_REQUIRES(mu_);
  // Request lifetimes (MPI reads a send's buffer and writes a receive's
  // until MPI_Test says done or a withdrawal completed): an Out done with
  // is destroyed only once quiet, else kept in abandoned_ and reaped later;
  // what is still pending when this object goes is kept until the process
  // exits (KeepUntilExit), never freed under MPI's feet.
  bool Quiet(Out& out) CAIRN_REQUIRES(mu_);
  void Dispose(std::unique_ptr<Out> out) CAIRN_REQUIRES(mu_);
  void Reap() CAIRN_REQUIRES(mu_);

  Group* const group_;
  const Map map_;
  const Config config_;
  redundancy::Checkpoints* const local_;
  const TransferLimits limits_;

  mutable Mutex mu_;  // the transfers' state; the MPI thread's (Progress, Complete, Finish)
  Mutex queue_mu_ CAIRN_ACQUIRED_AFTER(mu_);
  // Queued by Queue (any thread), taken into outs_ by Step: seq, name,
  // version (-2: the bye that ends this member's transfers, at Finish).
  struct Entry {
    uint64_t seq;
    std::string name;
    int64_t version;
    bool committed = false;  // QueueCommitted
  };
  std::vector<Entry> queued_ CAIRN_GUARDED_BY(queue_mu_);
  std::map<std::pair<std::string, int64_t>, uint64_t> seq_of_ CAIRN_GUARDED_BY(queue_mu_);
  uint64_t next_seq_ CAIRN_GUARDED_BY(queue_mu_) = 1;
  std::deque<std::unique_ptr<Out>> outs_ CAIRN_GUARDED_BY(mu_);  // front: the active one
  uint64_t done_seq_ CAIRN_GUARDED_BY(mu_) = 0;                  // every out <= it is done
  std::map<uint64_t, Status> out_results_ CAIRN_GUARDED_BY(mu_);  // seq -> failed outcome
  std::vector<std::unique_ptr<In>> ins_ CAIRN_GUARDED_BY(mu_);   // one per source
  uint64_t copies_ CAIRN_GUARDED_BY(mu_) = 0;
  std::map<std::string, redundancy::Newest> acknowledged_ CAIRN_GUARDED_BY(mu_);
  bool blocking_ CAIRN_GUARDED_BY(mu_) = false;   // in Complete: may wait for a local commit
  bool finishing_ CAIRN_GUARDED_BY(mu_) = false;  // no commit will come any more
  // Back-pressure: the last Step found the application capturing or
  // restoring and moved no chunk (a Complete or Finish never yields).
  bool yielding_ CAIRN_GUARDED_BY(mu_) = false;
  bool finished_ CAIRN_GUARDED_BY(mu_) = false;
  Status broken_ CAIRN_GUARDED_BY(mu_);  // a transport error: nothing moves any more
  // The partner and the sources, each once: the abort notices received
  // from them and sent to them (a notice's send is reaped once complete;
  // one still pending at destruction is kept, see KeepUntilExit).
  std::vector<std::unique_ptr<Peer>> peers_ CAIRN_GUARDED_BY(mu_);
  bool listening_ CAIRN_GUARDED_BY(mu_) = false;    // the notices' receives are posted
  bool aborts_sent_ CAIRN_GUARDED_BY(mu_) = false;  // after broken_
  Status partner_aborted_ CAIRN_GUARDED_BY(mu_);    // the partner's notice: no ack will come
  // Transfers done with (a partner that aborted, an error) whose sends may
  // still be in flight: kept with their buffers until they are quiet.
  std::vector<std::unique_ptr<Out>> abandoned_ CAIRN_GUARDED_BY(mu_);
  // The store thread's queue (in its Worker) and what it finished, for
  // Stored. Never held while waiting for mu_.
  Mutex store_mu_ CAIRN_ACQUIRED_AFTER(mu_);
  std::condition_variable_any store_done_;
  std::vector<std::unique_ptr<Store>> stored_ CAIRN_GUARDED_BY(store_mu_);
  core::Worker<std::unique_ptr<Store>, Transfers>
      storer_;  // last: joined (its queue run) before the rest goes
};

}  // namespace cairn::partner
