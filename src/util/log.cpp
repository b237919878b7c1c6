#include "util/log.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>

namespace cairn::util {
namespace {

void ToStderr(LogLevel, std::string_view message) {
  std::fprintf(stderr, "cairn: %.*s\n", static_cast<int>(message.size()), message.data());
}

// Readers (Log) share the lock while they call the function, so SetLog, which
// takes it exclusively, returns only when no call to the old one is running:
// a C caller may free its `user` right after replacing the function.
// std::shared_mutex rather than util::Mutex: this is the one reader-writer
// lock, and nothing else is taken under it.
struct Sink {
  std::shared_mutex mu;
  LogFunction fn;
};

Sink& TheSink() {
  static Sink* sink = new Sink;  // never destroyed: worker threads may log during exit
  return *sink;
}

}  // namespace

void SetLog(LogFunction fn) {
  Sink& s = TheSink();
  std::unique_lock lock(s.mu);
  s.fn = std::move(fn);
}

void Log(LogLevel level, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  std::string_view message(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  Sink& s = TheSink();
  std::shared_lock lock(s.mu);
  if (s.fn) {
    try {
      s.fn(level, message);
      return;
    } catch (...) {  // nothing throws out of the library: say it where it would have gone
    }
  }
  ToStderr(level, message);
}

}  // namespace cairn::util

namespace cairn {

void SetLogFunction(std::function<void(LogLevel, std::string_view)> fn) { util::SetLog(std::move(fn)); }

}  // namespace cairn
