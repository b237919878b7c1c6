// Cairn's own progress thread (progress_thread.hpp).
#include "redundancy/progress_thread.hpp"

#include <utility>

#include "os/sched/slice.hpp"

namespace cairn::redundancy {

ProgressThread::ProgressThread(Pass* pass, Periods periods) : pass_(pass), periods_(periods) {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

ProgressThread::~ProgressThread() { Stop(); }

void ProgressThread::Kick() {
  MutexLock lock(&mu_);
  kicked_ = true;
  cv_.notify_all();
}

void ProgressThread::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  {
    MutexLock lock(&mu_);
    cv_.notify_all();
  }
  thread_.join();
}

uint64_t ProgressThread::passes() const {
  MutexLock lock(&mu_);
  return passes_;
}

void ProgressThread::Loop(std::stop_token stop) {
  // Unsupported leaves the thread as it was: only its wake-up latency differs.
  if (periods_.slice.count() > 0) (void)os::RequestSlice(periods_.slice);
  while (!stop.stop_requested()) {
    const Pace pace = pass_->Run();
    const auto period = pace == Pace::kBusy      ? periods_.busy
                        : pace == Pace::kWaiting ? periods_.waiting
                                                 : periods_.idle;
    MutexLock lock(&mu_);
    ++passes_;
    // The wait is the pacing itself (nothing to wait *for* but a kick): a
    // transport without a completion callback must be polled.
    cv_.wait_for(lock, period,
                 [&]() CAIRN_REQUIRES(mu_) { return kicked_ || stop.stop_requested(); });
    kicked_ = false;
  }
}

}  // namespace cairn::redundancy
