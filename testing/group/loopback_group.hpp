// An in-process cairn::Group for tests: the members of one job are objects of
// one process (driven by one thread, or one thread each). Nonblocking
// point-to-point messages match as MPI's do (in order per sender, tag and
// receiver); a test may damage a message on its way (Hub::damage) or fail
// a send as a broken transport would (Hub::fail_send). With Hub::rendezvous
// a send completes only once a receive took it, as MPI's large messages do,
// and is read from the sender's buffer only then.
// AllReduce and Exchange block, so members that use them need a thread each.
// Optionally (Hub::nonblocking) it has nonblocking reductions.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "cairn/group.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::test {

class LoopbackHub {
 public:
  explicit LoopbackHub(int size) : size_(size) {}
  int size() const { return size_; }

  // Called on every point-to-point message as it is sent (from, to, tag,
  // bytes); may change it.
  std::function<void(int, int, int, std::vector<uint8_t>&)> damage;
  // Called on every Exchange message as it is sent (from, to, bytes); may
  // change it. Set before the members start.
  std::function<void(int, int, std::vector<uint8_t>&)> damage_exchange;
  // Called on the sender's thread as a send starts (from, to, tag): an
  // error fails StartSend with it (the message is not sent). Set before
  // the members' threads start.
  std::function<Status(int, int, int)> fail_send;
  // Sends complete only once matched (MPI's rendezvous protocol) and the
  // message is copied from the sender's buffer then: a buffer freed before
  // is a heap-use-after-free under ASan, and a send request destroyed
  // before it completed is counted in sends_dropped. Set before the
  // members start.
  bool rendezvous = false;
  std::atomic<int> sends_dropped{0};
  // The members offer nonblocking reductions (Group::StartAllReduce: the
  // global commit in the background), and say their calls may come from a
  // thread of Cairn's own (Group::thread_multiple). Set before the members
  // start.
  bool nonblocking = false;
  bool thread_multiple = false;
  struct SendState {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
    bool done = false;
  };

  struct Receive {
    uint8_t* data;
    size_t capacity;
    bool done = false;
    bool cancelled = false;
    size_t bytes = 0;
  };
  using Key = std::tuple<int, int, int>;  // from, to, tag

  void Send(Key key, std::vector<uint8_t> msg) {
    cairn::MutexLock lock(&mu_);
    if (damage) damage(std::get<0>(key), std::get<1>(key), std::get<2>(key), msg);
    messages_[key].push_back({std::move(msg), nullptr});
    Match(key);
  }
  // Rendezvous: the message stays in the sender's buffer until matched.
  void SendLater(Key key, std::shared_ptr<SendState> state) {
    cairn::MutexLock lock(&mu_);
    messages_[key].push_back({{}, std::move(state)});
    Match(key);
  }
  bool SendDone(const SendState& state) {
    cairn::MutexLock lock(&mu_);
    return state.done;
  }
  void Post(Key key, std::shared_ptr<Receive> r) {
    cairn::MutexLock lock(&mu_);
    receives_[key].push_back(std::move(r));
    Match(key);
  }
  bool Done(const Receive& r) {
    cairn::MutexLock lock(&mu_);
    return r.done;
  }
  void Cancel(Key key, const std::shared_ptr<Receive>& r) {
    cairn::MutexLock lock(&mu_);
    if (r->done) return;
    auto& q = receives_[key];
    q.erase(std::remove(q.begin(), q.end(), r), q.end());
    r->done = r->cancelled = true;
  }
  // Messages sent and not received yet, for tests of what is in flight.
  size_t Unreceived() {
    cairn::MutexLock lock(&mu_);
    size_t n = 0;
    for (auto& [k, q] : messages_) n += q.size();
    return n;
  }

  // A blocking element-wise reduction over the members' threads.
  void Reduce(bool min, int64_t* values, size_t n) {
    cairn::MutexLock lock(&mu_);
    const uint64_t gen = generation_;
    if (arrived_ == 0) acc_.assign(values, values + n);
    for (size_t i = 0; i < n; ++i) acc_[i] = min ? std::min(acc_[i], values[i]) : std::max(acc_[i], values[i]);
    if (++arrived_ == size_) {
      result_ = acc_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      while (generation_ == gen) cv_.wait(lock);
    }
    std::copy(result_.begin(), result_.end(), values);
  }
  // The k-th channel of its own (Group::Duplicate: every member's k-th
  // call gets the same), with this hub's settings.
  LoopbackHub* Channel(int k) {
    cairn::MutexLock lock(&mu_);
    auto& c = channels_[k];
    if (!c) {
      c = std::make_unique<LoopbackHub>(size_);
      c->nonblocking = nonblocking;
      c->thread_multiple = thread_multiple;
    }
    return c.get();
  }
  // Nonblocking reductions: each member's k-th contribution is reduced with
  // every other member's k-th (group.hpp's contract).
  void Contribute(uint64_t seq, bool min, const int64_t* values, size_t n) {
    cairn::MutexLock lock(&mu_);
    Round& r = rounds_[seq];
    if (r.count == 0) r.acc.assign(values, values + n);
    for (size_t i = 0; i < n; ++i)
      r.acc[i] = min ? std::min(r.acc[i], values[i]) : std::max(r.acc[i], values[i]);
    if (++r.count == size_) cv_.notify_all();
  }
  // Whether round `seq` is complete (then *out is its result; a member
  // reads it once, and the round goes once every member read it).
  bool RoundDone(uint64_t seq, std::vector<int64_t>* out) {
    cairn::MutexLock lock(&mu_);
    return TakeRound(seq, out);
  }
  void WaitRound(uint64_t seq, std::vector<int64_t>* out) {
    cairn::MutexLock lock(&mu_);
    while (!TakeRound(seq, out)) cv_.wait(lock);
  }
  // Blocking mailboxes for Exchange (one per pair, in order).
  void Put(int from, int to, std::vector<uint8_t> msg) {
    cairn::MutexLock lock(&mu_);
    if (damage_exchange) damage_exchange(from, to, msg);
    mail_[{from, to}].push_back(std::move(msg));
    cv_.notify_all();
  }
  std::vector<uint8_t> Take(int from, int to) {
    cairn::MutexLock lock(&mu_);
    auto& q = mail_[{from, to}];
    while (q.empty()) cv_.wait(lock);
    auto msg = std::move(q.front());
    q.pop_front();
    return msg;
  }

 private:
  struct Round {
    std::vector<int64_t> acc;
    int count = 0, read = 0;
  };
  bool TakeRound(uint64_t seq, std::vector<int64_t>* out) CAIRN_REQUIRES(mu_) {
    auto it = rounds_.find(seq);
    if (it == rounds_.end() || it->second.count < size_) return false;
    *out = it->second.acc;
    if (++it->second.read == size_) rounds_.erase(it);
    return true;
  }
  void Match(const Key& key) CAIRN_REQUIRES(mu_) {
    auto& msgs = messages_[key];
    auto& recvs = receives_[key];
    while (!msgs.empty() && !recvs.empty()) {
      auto r = recvs.front();
      recvs.pop_front();
      auto& m = msgs.front();
      if (m.later) {  // read from the sender's buffer now
        m.bytes.assign(m.later->data, m.later->data + m.later->bytes);
        if (damage) damage(std::get<0>(key), std::get<1>(key), std::get<2>(key), m.bytes);
        m.later->done = true;
      }
      r->bytes = std::min(m.bytes.size(), r->capacity);
      std::memcpy(r->data, m.bytes.data(), r->bytes);
      r->done = true;
      msgs.pop_front();
    }
  }

  const int size_;
  // Guards everything below, and the SendState and Receive records handed
  // out (their done flags, a receive's bytes).
  cairn::Mutex mu_;
  std::condition_variable_any cv_;
  struct Message {
    std::vector<uint8_t> bytes;
    std::shared_ptr<SendState> later;  // rendezvous: not read yet
  };
  std::map<Key, std::deque<Message>> messages_ CAIRN_GUARDED_BY(mu_);
  std::map<Key, std::deque<std::shared_ptr<Receive>>> receives_ CAIRN_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> mail_ CAIRN_GUARDED_BY(mu_);
  int arrived_ CAIRN_GUARDED_BY(mu_) = 0;
  uint64_t generation_ CAIRN_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> acc_ CAIRN_GUARDED_BY(mu_), result_ CAIRN_GUARDED_BY(mu_);
  std::map<uint64_t, Round> rounds_ CAIRN_GUARDED_BY(mu_);
  std::map<int, std::unique_ptr<LoopbackHub>> channels_ CAIRN_GUARDED_BY(mu_);
};

// Member `rank` of the hub; node = rank (every member its own node).
class LoopbackGroup final : public Group {
 public:
  LoopbackGroup(LoopbackHub* hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  int node() const override { return rank_; }
  bool simulated_nodes() const override { return true; }
  int ranks_per_node() const override { return 1; }
  Status AllReduce(Op op, int64_t* values, size_t n) override {
    hub_->Reduce(op == Op::kMin, values, n);
    return Status::Ok();
  }
  Status Exchange(const std::vector<Outgoing>& sends, const std::vector<int>& from,
                  std::vector<std::vector<uint8_t>>* received) override {
    for (const auto& s : sends) hub_->Put(rank_, s.to, std::vector<uint8_t>(s.data, s.data + s.bytes));
    received->clear();
    for (int f : from) received->push_back(hub_->Take(f, rank_));
    return Status::Ok();
  }

  bool nonblocking() const override { return hub_->nonblocking; }
  bool thread_multiple() const override { return hub_->thread_multiple; }
  Result<std::unique_ptr<Group>> Duplicate() override {
    return std::unique_ptr<Group>(new LoopbackGroup(hub_->Channel(duplicates_++), rank_));
  }
  Result<std::unique_ptr<Pending>> StartAllReduce(Op op, const int64_t* values, size_t n) override {
    if (!hub_->nonblocking) return Group::StartAllReduce(op, values, n);
    const uint64_t seq = next_round_++;
    hub_->Contribute(seq, op == Op::kMin, values, n);
    return std::unique_ptr<Pending>(new Round(hub_, seq));
  }

  bool point_to_point() const override { return true; }
  Result<std::unique_ptr<Request>> StartSend(int to, int tag, const uint8_t* data, size_t bytes) override {
    if (hub_->fail_send) {
      if (Status s = hub_->fail_send(rank_, to, tag); !s.ok()) return s;
    }
    if (hub_->rendezvous) {
      auto state = std::make_shared<LoopbackHub::SendState>(LoopbackHub::SendState{.data = data, .bytes = bytes});
      hub_->SendLater({rank_, to, tag}, state);
      return std::unique_ptr<Request>(new Sent(hub_, std::move(state)));
    }
    hub_->Send({rank_, to, tag}, std::vector<uint8_t>(data, data + bytes));
    return std::unique_ptr<Request>(new Sent(hub_, nullptr));
  }
  Result<std::unique_ptr<Request>> StartReceive(int from, int tag, uint8_t* data, size_t capacity) override {
    auto r = std::make_shared<LoopbackHub::Receive>();
    r->data = data;
    r->capacity = capacity;
    hub_->Post({from, rank_, tag}, r);
    return std::unique_ptr<Request>(new Received(hub_, {from, rank_, tag}, r));
  }

 private:
  class Round final : public Pending {
   public:
    Round(LoopbackHub* hub, uint64_t seq) : hub_(hub), seq_(seq) {}
    Result<bool> Test() override { return done_ || (done_ = hub_->RoundDone(seq_, &values_)); }
    Status Wait() override {
      if (!done_) hub_->WaitRound(seq_, &values_);
      done_ = true;
      return Status::Ok();
    }
    const std::vector<int64_t>& values() const override { return values_; }

   private:
    LoopbackHub* hub_;
    uint64_t seq_;
    bool done_ = false;
    std::vector<int64_t> values_;
  };
  // Sends are buffered by the hub and complete at once; with rendezvous
  // once matched.
  class Sent final : public Request {
   public:
    Sent(LoopbackHub* hub, std::shared_ptr<LoopbackHub::SendState> later) : hub_(hub), later_(std::move(later)) {}
    ~Sent() override {
      if (later_ && !hub_->SendDone(*later_)) ++hub_->sends_dropped;
    }
    Result<bool> Test() override { return !later_ || hub_->SendDone(*later_); }
    size_t bytes() const override { return 0; }
    Status Cancel() override {
      if (!later_ || hub_->SendDone(*later_)) return Status::Ok();
      return Status::Unsupported("a send is never withdrawn");
    }

   private:
    LoopbackHub* hub_;
    std::shared_ptr<LoopbackHub::SendState> later_;
  };
  class Received final : public Request {
   public:
    Received(LoopbackHub* hub, LoopbackHub::Key key, std::shared_ptr<LoopbackHub::Receive> r)
        : hub_(hub), key_(key), r_(std::move(r)) {}
    ~Received() override { hub_->Cancel(key_, r_); }
    Result<bool> Test() override { return hub_->Done(*r_); }
    size_t bytes() const override { return r_->bytes; }
    Status Cancel() override {
      hub_->Cancel(key_, r_);
      return Status::Ok();
    }

   private:
    LoopbackHub* hub_;
    LoopbackHub::Key key_;
    std::shared_ptr<LoopbackHub::Receive> r_;
  };

  LoopbackHub* hub_;
  int rank_;
  uint64_t next_round_ = 0;
  int duplicates_ = 0;  // StartAllReduce's calls are made one at a time (group.hpp)
};

}  // namespace cairn::test
