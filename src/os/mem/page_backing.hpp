// Which pages back a range of this process's memory: small (base) pages, or
// huge pages (transparent or hugetlbfs).
//
// Why it matters: the block layer cuts a direct-I/O request at its segment
// limit (virtio-blk here: 254 segments, so ~1 MiB of 4 KiB pages per request
// against a whole 4 MiB read in 2 segments of huge pages), and each segment
// costs the device (or the hypervisor) a translation. On this project's VM an
// O_DIRECT read of 1 GiB into 4 KiB-page memory took 0.9-1.5 s, into
// huge-page memory 0.41-0.43 s, and into a huge-page staging buffer followed
// by a memcpy into the 4 KiB pages 0.46-0.59 s (docs/bench.md). So a reader
// asks first and stages when the destination is in small pages.
#pragma once

#include <cstddef>

#include "cairn/status.hpp"

namespace cairn::os {

// Whether [p, p+n) is backed by huge pages (transparent or hugetlbfs).
// Where the kernel has PAGEMAP_SCAN (Linux 6.7), from the range's own
// present pages, 64 windows of 2 MiB of it when it is larger: true when at
// least 3/4 of the present bytes are in huge pages. With nothing present
// yet, or on an older kernel, from /proc/self/smaps: true when every
// mapping that overlaps the range either has a kernel page size above the
// base page (hugetlbfs) or holds mostly transparent huge pages
// (AnonHugePages at least 3/4 of its resident bytes; a mapping with nothing
// resident counts when THP may back it, "THPeligible: 1"). Precondition:
// n > 0. Errors: kNotFound when part of the range is not mapped, kIo when
// smaps is needed and cannot be read. The scan costs ~0.5 ms; smaps ~11 ms
// per GiB the process holds in 4 KiB pages: ask once per region per
// restore, not per block.
Result<bool> BackedByHugePages(const void* p, size_t n);

}  // namespace cairn::os
