// Rounds consumed behind their producer (write_behind.hpp).
#include "redundancy/write_behind.hpp"

#include <algorithm>
#include <system_error>

namespace cairn::redundancy {

WriteBehind::WriteBehind(size_t depth, std::function<void(const Round&, uint64_t)> consume)
    : consume_(std::move(consume)), rounds_(std::max<size_t>(depth, 1)), number_(rounds_.size(), 0) {
  try {
    thread_ = std::jthread([this] { Run(); });
  } catch (const std::system_error&) {
    // No thread to spare: Push consumes each round itself, not overlapped.
  }
}

WriteBehind::~WriteBehind() { Finish(); }

WriteBehind::Round* WriteBehind::Next() {
  MutexLock lock(&mu_);
  cv_.wait(lock, [&]() CAIRN_REQUIRES(mu_) { return pushed_ - consumed_ < rounds_.size(); });
  return &rounds_[pushed_ % rounds_.size()];
}

void WriteBehind::Push(uint64_t r) {
  if (!thread_.joinable()) {
    consume_(rounds_[0], r);
    return;  // pushed_ stays 0: Next hands out slot 0 again
  }
  MutexLock lock(&mu_);
  number_[pushed_ % rounds_.size()] = r;
  ++pushed_;
  cv_.notify_all();
}

void WriteBehind::Finish() {
  {
    MutexLock lock(&mu_);
    finishing_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void WriteBehind::Run() {
  MutexLock lock(&mu_);
  for (;;) {
    cv_.wait(lock, [&]() CAIRN_REQUIRES(mu_) { return consumed_ < pushed_ || finishing_; });
    if (consumed_ == pushed_) return;  // finishing, nothing left
    const size_t slot = consumed_ % rounds_.size();
    lock.Unlock();  // the slot is this thread's until consumed_ moves past it
    consume_(rounds_[slot], number_[slot]);
    lock.Lock();
    ++consumed_;
    cv_.notify_all();
  }
}

}  // namespace cairn::redundancy
