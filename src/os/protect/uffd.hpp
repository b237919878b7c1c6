// userfaultfd write-protection pieces shared by the page tracker (dirty-page
// tracking, page_tracker_uffd.cpp) and WriteProtect (zero-copy captures,
// write_protect.cpp): opening a descriptor, registering a range, and
// (un)protecting one. Linux only; every call reports errors as values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/status.hpp"

namespace cairn::os::uffd {

// "what: strerror(err)".
std::string Errno(const char* what, int err);

// A userfaultfd (O_CLOEXEC | O_NONBLOCK) whose supported features are
// `*supported`, probed on a throwaway descriptor because UFFDIO_API may be
// called once per descriptor: the caller negotiates on the returned one.
// user_mode_first: try UFFD_USER_MODE_ONLY first (no privilege needed when
// vm.unprivileged_userfaultfd=0); fine where the kernel resolves every write
// itself, but a handler that must see kernel-mode faults too (a read(2) into
// protected memory, which USER_MODE_ONLY turns into EFAULT) tries without.
Result<int> Open(bool user_mode_first, uint64_t* supported);

// Registers page-aligned [addr, addr + bytes) in write-protect mode on `fd`,
// first faulting the pages in when the descriptor lacks WP_UNPOPULATED
// (`features`: the negotiated ones), since a never-touched page has nothing
// to protect and its first write would go unseen. kUnsupported on failure;
// `who` prefixes the messages, and EBUSY (another userfaultfd holds the
// range) says `busy_hint`.
Status RegisterWp(int fd, uint64_t features, void* addr, size_t bytes, std::string_view who,
                  std::string_view busy_hint);

// UFFDIO_WRITEPROTECT of [start, start + len): protect (wp) or release and
// wake. 0 or the errno; EAGAIN (the memory map is changing) is the caller's
// to retry, because only it knows which locks to drop meanwhile.
int Protect(int fd, uintptr_t start, size_t len, bool wp);

}  // namespace cairn::os::uffd
