// The shared SIGSEGV handler (os/protect/segv_handler.hpp).
//
// Claimed ranges live in a fixed table of slots read with atomics (the
// handler may not lock or allocate). A slot's callback and context are
// written before its start is published (release); Unclaim clears the start
// and then waits, holding the table's mutex so that the slot cannot be
// claimed again meanwhile, until no handler is inside a callback.
//
// A fault raised on a claimed page may reach the handler after the range was
// made writable and unclaimed (the end of an epoch, Untrack): it is no longer
// "ours", yet chaining it would be wrong (with SIG_DFL before us, Chain would
// even reinstall the default action and drop our handler). So a write fault
// that no slot claims is first retried once per thread, address and unclaim
// generation: a stale fault then simply succeeds, a foreign one faults again
// at once and is chained (one extra trap for the application's own faults).
#include "os/protect/segv_handler.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "os/mem/memory.hpp"
#include "util/mutex.hpp"

namespace cairn::os::segv {
namespace {

constexpr int kSlots = 256;

struct Slot {
  std::atomic<uintptr_t> start{0};  // 0 = free; published last (release)
  std::atomic<uintptr_t> end{0};
  std::atomic<FaultFn> fn{nullptr};
  std::atomic<void*> ctx{nullptr};
};

Slot g_slots[kSlots];
std::atomic<int> g_in_handler{0};
// Bumped by WakeWaiters; a waiting handler sleeps while it is unchanged.
// 32 bits: a futex word.
std::atomic<uint32_t> g_wake_gen{0};
struct sigaction g_previous;  // written once, before the handler is installed
Mutex g_mu;
bool g_installed CAIRN_GUARDED_BY(g_mu) = false;
std::string g_who[kSlots] CAIRN_GUARDED_BY(g_mu);
std::atomic<uint64_t> g_unclaim_gen{0};  // bumped by every Unclaim

// The last unclaimed write fault this thread retried (initial-exec TLS: a
// plain %fs-relative access, safe in a signal handler; 16 bytes of static TLS).
struct Retried {
  uintptr_t addr;
  uint64_t gen;
};
__thread Retried t_retried __attribute__((tls_model("initial-exec"))) = {0, 0};

bool IsWriteFault(void* uctx) {
#if defined(__x86_64__)
  // The page-fault error code: bit 1 = the access was a write.
  return (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)uctx;
  return true;  // a claimed page is PROT_READ: only a write faults on it
#endif
}

void Chain(int sig, siginfo_t* info, void* uctx) {
  const struct sigaction& p = g_previous;
  if ((p.sa_flags & SA_SIGINFO) != 0 && p.sa_sigaction != nullptr) {
    p.sa_sigaction(sig, info, uctx);
  } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
    p.sa_handler(sig);
  } else {
    // Default action: restore it; returning re-executes the access, which
    // faults again and terminates the process as it would have without us.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void OnSegv(int sig, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  // Read before the callback: a WakeWaiters after this point (the page's
  // release) makes the wait below return at once.
  const uint32_t gen = g_wake_gen.load(std::memory_order_seq_cst);
  g_in_handler.fetch_add(1, std::memory_order_seq_cst);
  Action action = Action::kNotOurs;
  const auto a = reinterpret_cast<uintptr_t>(info->si_addr);
  const bool write_fault = info->si_code == SEGV_ACCERR && IsWriteFault(uctx);
  if (write_fault) {
    for (Slot& s : g_slots) {
      const uintptr_t start = s.start.load(std::memory_order_acquire);
      if (start == 0 || a < start || a >= s.end.load(std::memory_order_relaxed)) continue;
      const size_t page = PageSize();
      action = s.fn.load(std::memory_order_relaxed)(s.ctx.load(std::memory_order_relaxed), a / page * page);
      break;
    }
  }
  g_in_handler.fetch_sub(1, std::memory_order_seq_cst);
  // Waits outside the in-handler count: Unclaim never waits for a sleeper.
  if (action == Action::kWait) FutexWait(&g_wake_gen, gen);
  errno = saved_errno;
  if (action != Action::kNotOurs) return;
  if (write_fault) {
    const uint64_t gen_now = g_unclaim_gen.load(std::memory_order_seq_cst);
    if (t_retried.addr != a || t_retried.gen != gen_now) {
      t_retried = Retried{a, gen_now};
      return;  // retry: a stale fault of a range released since succeeds now
    }
    t_retried = Retried{0, 0};
  }
  Chain(sig, info, uctx);
}

}  // namespace

Status Install() {
  MutexLock l(&g_mu);
  if (g_installed) return Status::Ok();
  struct sigaction sa {};
  sa.sa_sigaction = OnSegv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGSEGV, &sa, &g_previous) != 0) {
    return Status::Unsupported(std::string("sigaction(SIGSEGV): ") + std::strerror(errno));
  }
  g_installed = true;
  return Status::Ok();
}

Result<int> Claim(uintptr_t start, size_t bytes, FaultFn fn, void* ctx, std::string_view who) {
  MutexLock l(&g_mu);
  int free_slot = -1;
  for (int i = 0; i < kSlots; ++i) {
    const uintptr_t s = g_slots[i].start.load(std::memory_order_acquire);
    if (s == 0) {
      if (free_slot < 0) free_slot = i;
    } else if (s < start + bytes && start < g_slots[i].end.load(std::memory_order_relaxed)) {
      return Status::Unsupported(std::string(who) + ": the range overlaps one already protected with mprotect (by " +
                                 g_who[i] + ")");
    }
  }
  if (free_slot < 0) {
    return Status::Unsupported(std::string(who) + ": more than " + std::to_string(kSlots) +
                               " ranges protected with mprotect");
  }
  Slot& s = g_slots[free_slot];
  g_who[free_slot] = std::string(who);
  s.fn.store(fn, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.end.store(start + bytes, std::memory_order_relaxed);
  s.start.store(start, std::memory_order_release);
  return free_slot;
}

void Unclaim(int slot) {
  MutexLock l(&g_mu);
  g_slots[slot].start.store(0, std::memory_order_seq_cst);
  g_unclaim_gen.fetch_add(1, std::memory_order_seq_cst);
  while (g_in_handler.load(std::memory_order_seq_cst) != 0) ::sched_yield();
}

void WakeWaiters() {
  g_wake_gen.fetch_add(1, std::memory_order_seq_cst);
  (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_wake_gen), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
                  nullptr, 0);
}

bool HandlerIsOurs() {
  struct sigaction cur {};
  return ::sigaction(SIGSEGV, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) != 0 && cur.sa_sigaction == OnSegv;
}

void UninstallForTest() {
  MutexLock l(&g_mu);
  if (!g_installed) return;
  ::sigaction(SIGSEGV, &g_previous, nullptr);
  g_installed = false;
}

}  // namespace cairn::os::segv
