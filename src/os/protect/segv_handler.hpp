// The process-wide SIGSEGV handler of the mprotect mechanisms: the page
// tracker's (page_tracker_mprotect.cpp) and zero-copy's write protection
// (write_protect_mprotect.cpp). One handler, installed once, serves a fixed
// table of claimed ranges; a fault that is not a write to a claimed range
// (and every fault when no range is claimed) goes to the handler the
// application had before ours: its SA_SIGINFO or plain handler, or the
// default action (the access faults again with SIG_DFL and ends the process
// as it would have without us). A write fault that no range claims is
// retried once first (per thread, address and Unclaim): it may have been
// raised on a range that was released and unclaimed before the handler ran.
//
// A claimed range's callback runs in the faulting thread, inside the signal
// handler: it must be async-signal-safe, never allocate nor take a lock the
// application could hold (the thread may hold any of its own, or a malloc
// arena lock). It may ask the thread to wait (kWait): the handler then
// sleeps on a futex until the next WakeWaiters() and returns, so the write is
// retried and faults again if its page is still protected.
//
// Limits (docs/design.md): a system call that writes into a protected page
// (read(2) into it) fails with EFAULT instead of faulting; a SIGSEGV handler
// installed by the application after ours bypasses it (HandlerIsOurs tells).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cairn/status.hpp"

namespace cairn::os::segv {

enum class Action : uint8_t {
  kNotOurs,  // pass the fault on to the previous handler
  kRetry,    // the page is writable now: retry the write
  kWait,     // sleep until WakeWaiters(), then retry the write
};

// Called for a write fault on page-aligned `page` of a claimed range.
using FaultFn = Action (*)(void* ctx, uintptr_t page);

// Installs the handler (once per process; later calls return Ok).
// kUnsupported naming sigaction's error.
Status Install();

// Routes write faults on [start, start + bytes) to fn(ctx). Returns the slot
// for Unclaim. kUnsupported when the range overlaps a claimed one (`who`
// names the caller in the message) or the table (256 ranges) is full.
Result<int> Claim(uintptr_t start, size_t bytes, FaultFn fn, void* ctx, std::string_view who);
// Stops routing the slot's faults; returns once no handler can still be in
// its callback (ctx may be freed then). Threads waiting after kWait are not
// waited for: the caller wakes them (WakeWaiters) after unprotecting.
void Unclaim(int slot);

// Wakes every thread that a callback asked to wait (they retry their writes).
void WakeWaiters();

// Whether SIGSEGV still reaches our handler (the application may have
// replaced it after Install).
bool HandlerIsOurs();

// Restores the handler that was there before ours (tests only; nothing may
// be claimed).
void UninstallForTest();

}  // namespace cairn::os::segv
