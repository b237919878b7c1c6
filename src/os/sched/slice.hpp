// The calling thread's scheduler slice.
//
// Why: Cairn's global-commit rounds are a few microseconds of work per
// wake-up, but each step of a reduction waits until every member's rounds
// thread runs. On a node whose cores are all busy with the application's
// ranks, a woken thread under EEVDF (Linux >= 6.6) waits for the running
// task's slice to end (0.75-3 ms by default), so a round of two steps over
// four members took 6-23 ms on the development VM with 4 ranks on 2 cores.
// A thread that asks for a short slice gets an earlier deadline and runs
// at its wake-up; its CPU share is unchanged (EEVDF's slice is a latency
// request, not a priority). Since Linux 6.12 a SCHED_OTHER thread sets it
// through sched_attr.sched_runtime, unprivileged; older kernels ignore it.
#pragma once

#include <chrono>

#include "cairn/status.hpp"

namespace cairn::os {

// Asks the kernel to run the calling thread with scheduler slices of
// `slice` (the kernel clamps it to [100 us, 100 ms]) under its current
// policy and nice value, and checks that it took. kUnsupported, saying
// why, where the kernel does not keep a slice per thread (before 6.12, or
// not Linux), refuses the call (a seccomp sandbox) or the thread is not
// SCHED_OTHER; the thread then runs as before. Precondition: slice > 0.
Status RequestSlice(std::chrono::microseconds slice);

// The calling thread's slice as the kernel reports it; 0 where it reports
// none (kernels without a slice per thread).
std::chrono::microseconds CurrentSlice();

}  // namespace cairn::os
