// L2 partner copies in the background (partner_transfer.hpp; the messages
// are docs/format.md 3.8's): the transfers' lifecycle, abort notices, the
// progress steps and the blocking calls. The sending side is
// partner_send.cpp, the receiving side partner_receive.cpp, their shared
// state transfer_state.hpp.
#include "redundancy/partner/partner_transfer.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "redundancy/partner/transfer_state.hpp"
#include "redundancy/redundancy.hpp"
#include "util/clock.hpp"

namespace cairn::partner {

using namespace wire;  // NOLINT(google-build-using-namespace): docs/format.md 3.8's constants

Transfers::Transfers(Group* group, Map map, Config config, redundancy::Checkpoints* local,
                     TransferLimits limits)
    : group_(group),
      map_(std::move(map)),
      config_(std::move(config)),
      local_(local),
      limits_(limits),
      storer_(&store_mu_, &store_done_, this) {
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

void Transfers::Queue(const std::string& name, int64_t version) { Enqueue(name, version, false); }

void Transfers::QueueCommitted(const std::string& name, int64_t version) {
  Enqueue(name, version, true);
}

void Transfers::Enqueue(const std::string& name, int64_t version, bool committed) {
  MutexLock lock(&queue_mu_);
  const uint64_t seq = next_seq_++;
  seq_of_[{name, version}] = seq;
  queued_.push_back({seq, name, version, committed});
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
    p->sent = EncodeAbort(broken_.code());
    auto r = group_->StartSend(p->rank, kAbortTag, reinterpret_cast<const uint8_t*>(p->sent.data()),
                               sizeof p->sent);
    if (r.ok()) p->send = std::move(*r);
  }
}

// Posts the notices' receives once, then takes the notices that came.
void Transfers::Listen() {
  if (!listening_) {
    listening_ = true;
    for (auto& p : peers_) {
      auto r = group_->StartReceive(p->rank, kAbortTag,
                                    reinterpret_cast<uint8_t*>(p->notice.data()), sizeof p->notice);
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
    const std::string from = "rank " + std::to_string(p->rank);
    auto code =
        ParseAbort(reinterpret_cast<const uint8_t*>(p->notice.data()), p->req->bytes(), from);
    Aborted(p->rank, code.ok()
                         ? Status(*code, from + " stopped its partner copies (L2) after an error "
                                                "(its own error says which)")
                         : code.status());
  }
}

// Nothing more comes from `rank`: what this member waits for from it fails
// with `s` (a partial copy is dropped), and nothing more goes to it.
void Transfers::Aborted(int rank, const Status& s) {
  if (rank == map_.partner && partner_aborted_.ok()) partner_aborted_ = s;
  for (auto& in : ins_) {
    if (in->source != rank || !in->aborted.ok()) continue;
    in->aborted = s;
    in->bye = true;
    for (auto& p : in->posted) {
      if (!Withdrawn(p.req)) Kept::UntilExit(std::make_shared<Out::Flight>(std::move(p)));
    }
    in->posted.clear();
    if (in->receiving) Drop(*in, s);
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
  if (yielding_) return Pace::kWaiting;  // the application's capture or restore ends first
  Pace pace = abandoned_.empty() ? Pace::kIdle : Pace::kWaiting;
  for (const auto& o : outs_) {
    if (o->state != Out::State::kWaiting && !o->awaiting) return Pace::kBusy;
    pace = Pace::kWaiting;  // queued, or started early and waiting for its commit
  }
  for (const auto& in : ins_) {
    if (in->receiving || !in->acks.empty()) return Pace::kBusy;
    if (in->storing > 0 || in->writing > 0) pace = Pace::kWaiting;
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
      out->committed = q.committed;
      outs_.push_back(std::move(out));
    }
    queued_.clear();
  }
  Stored();
  yielding_ = !blocking_ && !finishing_ && local_->ApplicationBusy();
  if (yielding_) return;
  StepOut();
  for (auto& in : ins_) {
    if (broken_.ok()) StepIn(*in);
  }
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
    return std::all_of(ins_.begin(), ins_.end(), [](const auto& in) {
      return in->bye && in->storing == 0 && in->writing == 0 &&
             (in->acks.empty() || !in->aborted.ok());
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
