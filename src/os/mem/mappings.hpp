// The mappings behind cairn_alloc, in one table, and their transparent huge
// pages kept whole across zero-copy checkpoints.
//
// Page tracking needs page-aligned ranges and malloc promises none, hence
// anonymous mappings of our own; those of 2 MiB or more are 2 MiB-aligned
// and advised for huge pages. Their sizes live in a table (a header before
// the block would cost a page, or 2 MiB when huge-aligned), which also
// tells RestoreHugePages what it may touch.
//
// Why RestoreHugePages: write-protecting 1 GiB takes ~0.1 ms while its
// 2 MiB huge pages are mapped whole, and ~10 ms once they are split into
// 4 KiB page table entries. A zero-copy epoch splits them: the reader and
// the fault handler release the protection of a block or a page at a time,
// and the kernel splits a huge page's mapping for a change to part of it.
// The kernel puts them back only slowly (khugepaged scans 16 MiB every 10 s
// by default), so from the second checkpoint on the call paid the 4 KiB
// price, and the application ran on 4 KiB TLB entries. RestoreHugePages asks
// the kernel to put them back at once, off the application's thread. Only
// memory the application asked to be in huge pages through Cairn (a Map of
// 2 MiB or more) is touched: MADV_COLLAPSE does not look at the madvise
// setting, and turning other memory into huge pages is not Cairn's decision.
//
// Thread safety: every function, from any thread.
#pragma once

#include <cstddef>
#include <functional>

#include "cairn/status.hpp"

namespace cairn::os {

constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64, and arm64 with 4 KiB pages

// A fresh anonymous read-write mapping of at least `bytes` (> 0): whole
// pages, or for 2 MiB or more whole 2 MiB-aligned huge pages, advised with
// MADV_HUGEPAGE (best effort: THP may be off). kNoMemory naming the size
// and the likely limit when the kernel refuses.
Result<void*> Map(size_t bytes);
// Unmaps what Map returned at p. kInvalidArgument when p is not such a
// mapping (or was unmapped already); kIo when munmap fails.
Status Unmap(void* p);
// Puts back the huge pages of the kHugePageBytes-aligned spans of
// [p, p + n) that a huge Map covers: madvise(MADV_COLLAPSE) (Linux >= 6.1),
// one span at a time (the kernel copies it into a fresh huge page: ~0.35 ms
// per span here, with the span's page faults waiting meanwhile), stopping
// early once stop() is true. A span whose mapping is whole costs a page
// table look-up; one that cannot be collapsed (no free huge page, part of
// it write-protected or not resident, a kernel without MADV_COLLAPSE) is
// skipped. Returns the bytes of spans collapsed.
size_t RestoreHugePages(const void* p, size_t n, const std::function<bool()>& stop);

}  // namespace cairn::os
