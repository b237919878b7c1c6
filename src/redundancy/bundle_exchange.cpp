// Bundles sent in windows at a collective call (bundle_exchange.hpp).
//
// Messages, per pair and in order (docs/format.md 3.8, "Recovery"): the
// bundle's size (int64; -1: nothing to send), then one message per round:
// 0 followed by the round's window of the bundle, 1 alone (the sender could
// not read its bundle: the receiver drops it), or nothing at all (the
// bundle ended, or was never sent). Every pair exchanges a message in every
// round, so what a receiver makes of one message never changes which
// message comes next.
#include "redundancy/bundle_exchange.hpp"

#include <algorithm>

#include "redundancy/redundancy.hpp"

namespace cairn::redundancy {
namespace {

constexpr uint8_t kWindow = 0, kUnreadable = 1;

std::string Rank(int r) { return "rank " + std::to_string(r); }

// The bundles this member receives: their sizes, then their windows.
class Incoming {
 public:
  Incoming(const Config& c, const std::vector<BundleReceive>& receives)
      : config_(c),
        receives_(receives),
        writers_(receives.size()),
        out_(receives.size(), Status::Ok()) {}

  void Sizes(const std::vector<std::vector<uint8_t>>& got) {
    for (size_t i = 0; i < receives_.size(); ++i) {
      const std::string from = Rank(receives_[i].from);
      int64_t size = -1;
      size_t at = 0;
      if (got[i].size() != sizeof size || !Get(got[i], &at, &size) || size < -1) {
        out_[i] = Status::Corrupt("the size of the bundle from " + from + " is malformed (" +
                                  std::to_string(got[i].size()) + " bytes)");
      } else if (size < 0) {
        out_[i] = Status::NotFound(from + " had no copy to send");
      } else {
        writers_[i] = std::make_unique<BundleWriter>(config_, receives_[i].dir, from,
                                                     static_cast<uint64_t>(size));
      }
    }
  }

  void Window(size_t i, const std::vector<uint8_t>& msg) {
    if (writers_[i] == nullptr || msg.empty()) return;
    Status s;
    if (msg[0] == kUnreadable && msg.size() == 1) {
      s = Status::NotFound(Rank(receives_[i].from) + " could not read all of its copy");
    } else if (msg[0] != kWindow) {
      s = Status::Corrupt("a window of the bundle from " + Rank(receives_[i].from) +
                          " is malformed");
    } else {
      s = writers_[i]->Append(msg.data() + 1, msg.size() - 1);
    }
    if (!s.ok()) Drop(i, s);
  }

  std::vector<Status> Commit() {
    for (size_t i = 0; i < receives_.size(); ++i) {
      if (writers_[i] != nullptr) out_[i] = writers_[i]->Commit();
      writers_[i].reset();
    }
    return out_;
  }

 private:
  void Drop(size_t i, const Status& s) {
    out_[i] = s;
    writers_[i].reset();  // its temp files go
  }

  const Config& config_;
  const std::vector<BundleReceive>& receives_;
  std::vector<std::unique_ptr<BundleWriter>> writers_;
  std::vector<Status> out_;
};

// This member's message of round r for send i, in *msg.
void NextWindow(BundleSend& send, size_t window, uint64_t r, Status& sent,
                std::vector<uint8_t>* msg) {
  msg->clear();
  if (send.reader == nullptr) return;
  const uint64_t size = send.reader->size(), at = r * window;
  if (at >= size) {
    send.reader.reset();
    return;
  }
  const size_t n = static_cast<size_t>(std::min<uint64_t>(window, size - at));
  msg->resize(1 + n);
  (*msg)[0] = kWindow;
  if (Status s = send.reader->Read(at, msg->data() + 1, n); !s.ok()) {
    sent = s.WithContext("sending a copy to " + Rank(send.to));
    msg->assign(1, kUnreadable);
    send.reader.reset();
  }
}

}  // namespace

Result<BundleOutcome> ExchangeBundles(Group& group, const Config& c, std::vector<BundleSend> sends,
                                      const std::vector<BundleReceive>& receives, size_t window) {
  if (window == 0) return Status::InvalidArgument("ExchangeBundles: a window of 0 bytes");
  BundleOutcome out;
  out.sent.assign(sends.size(), Status::Ok());
  std::vector<std::vector<uint8_t>> msgs(sends.size());
  std::vector<Group::Outgoing> outgoing(sends.size());
  std::vector<int> from;
  for (const BundleReceive& r : receives) from.push_back(r.from);
  int64_t rounds = 0;
  for (size_t i = 0; i < sends.size(); ++i) {
    const int64_t size = sends[i].reader ? static_cast<int64_t>(sends[i].reader->size()) : -1;
    Put(&msgs[i], size);
    outgoing[i] = {.to = sends[i].to, .data = msgs[i].data(), .bytes = msgs[i].size()};
    if (size > 0) rounds = std::max<int64_t>(rounds, (size - 1) / static_cast<int64_t>(window) + 1);
  }
  std::vector<std::vector<uint8_t>> got;
  CAIRN_RETURN_IF_ERROR(group.Exchange(outgoing, from, &got));
  Incoming in(c, receives);
  in.Sizes(got);
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMax, &rounds, 1));
  for (int64_t r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < sends.size(); ++i) {
      NextWindow(sends[i], window, static_cast<uint64_t>(r), out.sent[i], &msgs[i]);
      outgoing[i] = {.to = sends[i].to, .data = msgs[i].data(), .bytes = msgs[i].size()};
    }
    CAIRN_RETURN_IF_ERROR(group.Exchange(outgoing, from, &got));
    for (size_t i = 0; i < receives.size(); ++i) in.Window(i, got[i]);
  }
  out.received = in.Commit();
  return out;
}

}  // namespace cairn::redundancy
