// L3 parity encoded off the application's thread (background_encoder.hpp).
#include "redundancy/parity/background_encoder.hpp"

#include <chrono>
#include <utility>

#include "redundancy/collective.hpp"
#include "redundancy/redundancy.hpp"
#include "util/clock.hpp"
#include "util/log.hpp"

namespace cairn::parity {
namespace {

// The encoder's group as an older version's recovery uses it: every
// exchange (a window of the rebuild or of the re-encoding, or a step of
// their agreement) first yields to the member's application, as each
// window of an encoding does (Pauser). Recover needs only these calls.
class YieldingGroup final : public Group {
 public:
  YieldingGroup(Group& base, Pauser& pause) : base_(base), pause_(pause) {}
  int rank() const override { return base_.rank(); }
  int size() const override { return base_.size(); }
  int node() const override { return base_.node(); }
  bool simulated_nodes() const override { return base_.simulated_nodes(); }
  int ranks_per_node() const override { return base_.ranks_per_node(); }
  Status AllReduce(Op op, int64_t* values, size_t n) override {
    return base_.AllReduce(op, values, n);
  }
  Status Exchange(const std::vector<Outgoing>& sends, const std::vector<int>& from,
                  std::vector<std::vector<uint8_t>>* received) override {
    pause_.Pause();
    return base_.Exchange(sends, from, received);
  }

 private:
  Group& base_;
  Pauser& pause_;
};

}  // namespace

BackgroundEncoder::BackgroundEncoder(std::unique_ptr<Group> group, std::optional<Sets> sets,
                                     std::optional<partner::Map> partner, Config config,
                                     redundancy::Checkpoints* local, Listener* listener)
    : group_(std::move(group)),
      sets_(std::move(sets)),
      partner_(std::move(partner)),
      config_(std::move(config)),
      local_(local),
      listener_(listener),
      worker_(&mu_, &progress_, this) {
  worker_.Start(nullptr);
}

BackgroundEncoder::~BackgroundEncoder() {
  (void)Drain();  // every member encodes what it queued: the others wait for it
  worker_.Stop();
}

void BackgroundEncoder::Queue(const std::string& name, int64_t version) {
  MutexLock lock(&mu_);
  worker_.Push({name, version});
}

void BackgroundEncoder::QueueOlder(const std::string& name, int64_t version, int count) {
  if (count <= 0) return;
  MutexLock lock(&mu_);
  worker_.Push({name, version, count});
}

Status BackgroundEncoder::Drain() {
  draining_.fetch_add(1);
  {
    MutexLock lock(&mu_);
    progress_.wait(lock, [&]() CAIRN_REQUIRES(mu_) { return worker_.Idle(); });
  }
  draining_.fetch_sub(1);
  return TakeError();
}

void BackgroundEncoder::Pause() {
  // Re-checks every few ms: a Drain that begins meanwhile ends the pause.
  while (draining_.load() == 0 && local_->ApplicationBusy())
    local_->AwaitApplicationIdle(std::chrono::milliseconds(5));
}

Status BackgroundEncoder::TakeError() {
  MutexLock lock(&mu_);
  return std::exchange(error_, Status::Ok());
}

// The encoding runs without mu_ (Queue and Drain go on meanwhile); its
// outcome is agreed over the encoder's group, as the wait agreed it when
// the encoding ran there.
void BackgroundEncoder::RunJob(Job& job) {
  mu_.AssertHeld();  // the Worker runs jobs under its mutex, mu_
  if (job.older > 0) {
    MutexUnlock unlock(&mu_);
    RecoverOlder(job);
    return;
  }
  Done d;
  {
    MutexUnlock unlock(&mu_);
    d = EncodeJob(job);
  }
  if (!d.status.ok() && error_.ok()) error_ = d.status;
}

BackgroundEncoder::Done BackgroundEncoder::EncodeJob(const Job& job) {
  Done d{.name = job.name, .version = job.version};
  // Encoded even when the local commit failed: every member takes part,
  // and this one's failure to read its bundle fails the encoding for all.
  const Status local = local_->WaitLocal(job.name, job.version);
  const SteadyTime start = std::chrono::steady_clock::now();
  auto bytes = sets_ ? Encode(*group_, *sets_, config_, job.name, job.version, this, local_)
                     : Result<uint64_t>(Status::Internal("an L3 encoding queued with L3 off"));
  // Superseded: the same on every member (Encode shares it), so none
  // agrees, and the local wait's error (the files are gone) does not count.
  d.superseded = bytes.ok() && *bytes == 0;
  if (!d.superseded) {
    d.status = collective::Agree(*group_, local.ok() ? bytes.status() : local,
                                 "the parity (L3) of version " + std::to_string(job.version) +
                                     " of '" + job.name + "', in the background");
  }
  d.bytes = bytes.ok() ? *bytes : 0;
  d.seconds = SecondsSince(start);
  d.end_ns = RealtimeNs();
  if (listener_ != nullptr) listener_->EncodingEnded(d);
  return d;
}

// Recover's steps are collective and their outcome agreed, so every member
// takes the same number of turns and stops at the same one.
void BackgroundEncoder::RecoverOlder(const Job& job) {
  YieldingGroup yielding(*group_, *this);
  int64_t bound = job.version - 1;
  for (int i = 0; i < job.older && bound >= 0; ++i) {
    auto intact = local_->IntactVersions(job.name);  // none readable: this member offers none
    MpiStats times;
    std::vector<std::unique_ptr<redundancy::Level>> owned;
    if (partner_)
      owned.push_back(partner::MakeLevel(yielding, *partner_, config_, /*refill=*/false));
    if (sets_) owned.push_back(MakeLevel(yielding, *sets_, config_, &times));
    std::vector<redundancy::Level*> levels;
    for (auto& level : owned) levels.push_back(level.get());
    auto r = redundancy::Recover(yielding, config_, levels, job.name,
                                 intact.ok() ? *intact : std::vector<int64_t>{}, bound, -1);
    const Status agreed =
        collective::Agree(*group_, r.status(),
                          "bringing back the versions of '" + job.name + "' older than " +
                              std::to_string(job.version) + " after a node loss");
    if (!agreed.ok()) {
      util::Log(LogLevel::kWarn, "rank %d: %s", group_->rank(), agreed.ToString().c_str());
      return;
    }
    if (r->version < 0) return;
    if (!r->served.empty())
      util::Log(LogLevel::kInfo, "rank %d: brought back %s, in the background", group_->rank(),
                r->served.c_str());
    for (const std::string& note : r->notes)
      util::Log(LogLevel::kWarn, "rank %d: %s", group_->rank(), note.c_str());
    bound = r->version - 1;
  }
}

}  // namespace cairn::parity
