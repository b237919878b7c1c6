// cairn.set_log: Cairn's messages (cairn_set_log_fn) to a Python function.
//
// Why a delivery thread: Cairn logs from its own threads, sometimes while it
// holds its locks, and most calls of this extension hold the GIL while they
// take those locks. A log function that took the GIL where the message is
// made could deadlock against such a call. So the library's thread only
// queues the message; this module's own thread, which holds no Cairn lock,
// takes the GIL and calls the Python function.

#include "log.hpp"

#include <condition_variable>
#include <deque>
#include <string>
#include <thread>
#include <utility>

#include "cairn/cairn.hpp"
#include "util/mutex.hpp"

namespace nb = nanobind;

namespace cairn::python {
namespace {

// Python's logging levels, so that `lambda level, m: logger.log(level, m)`
// works as it is.
int PythonLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return 40;
    case LogLevel::kWarn: return 30;
    case LogLevel::kInfo: return 20;
  }
  return 20;
}

class Delivery {
 public:
  explicit Delivery(nb::object fn) : fn_(std::move(fn)), thread_([this] { Run(); }) {}
  // Called without the GIL: the thread may be waiting for it.
  ~Delivery() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    nb::gil_scoped_acquire gil;
    fn_.reset();
  }
  // Cairn's threads: queue and return. At most kMax waiting messages; past
  // that the oldest are dropped and counted, so a slow function cannot make
  // the library's memory grow.
  void Push(LogLevel level, std::string_view message) CAIRN_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      if (queue_.size() >= kMax) {
        queue_.pop_front();
        ++dropped_;
      }
      queue_.emplace_back(level, std::string(message));
    }
    cv_.notify_one();
  }

 private:
  static constexpr size_t kMax = 1024;

  void Run() CAIRN_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    for (;;) {
      cv_.wait(lock, [&]() CAIRN_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, everything delivered
      auto [level, message] = std::move(queue_.front());
      queue_.pop_front();
      if (dropped_ > 0) message += " (" + std::to_string(std::exchange(dropped_, 0)) + " earlier messages dropped)";
      MutexUnlock unlocked(&mu_);  // the function may take as long as it likes
      Call(level, message);
    }
  }
  void Call(LogLevel level, const std::string& message) {
    nb::gil_scoped_acquire gil;
    try {
      fn_(PythonLevel(level), nb::str(message.data(), message.size()));
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("cairn.set_log's function");
    }
  }

  nb::object fn_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::pair<LogLevel, std::string>> queue_ CAIRN_GUARDED_BY(mu_);
  size_t dropped_ CAIRN_GUARDED_BY(mu_) = 0;
  bool stop_ CAIRN_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members it uses
};

std::shared_ptr<Delivery>& Current() {
  static auto* current = new std::shared_ptr<Delivery>;
  return *current;
}

void SetLog(nb::object fn) {
  std::shared_ptr<Delivery> next;
  if (!fn.is_none()) {
    if (!PyCallable_Check(fn.ptr())) throw nb::type_error("cairn.set_log: expected a callable or None");
    next = std::make_shared<Delivery>(std::move(fn));
  }
  std::shared_ptr<Delivery> previous;
  {
    nb::gil_scoped_release release;  // Cairn's log lock, then the old thread's join
    if (next) {
      cairn::SetLogFunction([d = next](LogLevel level, std::string_view m) { d->Push(level, m); });
    } else {
      cairn::SetLogFunction(nullptr);
    }
    previous = std::exchange(Current(), std::move(next));
    previous.reset();  // delivers what it holds, then joins
  }
}

}  // namespace

void BindLog(nb::module_& m) {
  m.def("set_log", &SetLog, nb::arg("fn").none(),
        "Route Cairn's messages to fn(level, message) (level: logging.ERROR, WARNING or INFO), "
        "called from a thread of its own; None: back to stderr.");
}

}  // namespace cairn::python
