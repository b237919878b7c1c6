#pragma once
// The library's messages (cairn_set_log_fn in include/cairn/cairn.h): what it
// reports without failing a call goes through Log, never to stderr directly,
// so that an application can route it (to its own log, to Python's logging).

#include <functional>
#include <string_view>

#include "cairn/cairn.hpp"

namespace cairn::util {

using LogFunction = std::function<void(LogLevel, std::string_view)>;

// Replaces the process's log function (empty: the default, stderr). Returns
// once no call to the previous function is in progress.
void SetLog(LogFunction fn);

// Formats (printf) and hands the message to the current log function. Safe
// from any thread; a message longer than 1 KiB is cut.
[[gnu::format(printf, 2, 3)]] void Log(LogLevel level, const char* fmt, ...);

}  // namespace cairn::util
