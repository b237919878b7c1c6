// The parts of the kernel's userfaultfd and pagemap UAPI that Cairn uses and
// that older <linux/*.h> lack (the build machine has 6.1 headers; the kernels
// Cairn runs on may be newer). Values are the kernel's own ABI, copied from
// include/uapi/linux/userfaultfd.h and include/uapi/linux/fs.h of Linux 6.7+;
// each is guarded so that newer headers win. Support is always detected at
// run time (UFFDIO_API feature negotiation, ENOTTY/EINVAL from the ioctl):
// a definition here says nothing about the running kernel.
#pragma once

#include <linux/fs.h>
#include <linux/types.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

// --- userfaultfd (include/uapi/linux/userfaultfd.h) -------------------------
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1  // Linux 5.11: only user-mode faults; no privilege needed
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)  // Linux 6.4: protect never-touched pages too
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)  // Linux 6.7: the kernel resolves WP faults itself
#endif

// --- PAGEMAP_SCAN (include/uapi/linux/fs.h, Linux 6.7) ----------------------
#ifndef PAGEMAP_SCAN
#define PAGE_IS_WPALLOWED (1 << 0)
#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_FILE (1 << 2)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGE_IS_HUGE (1 << 6)
#define PAGE_IS_SOFT_DIRTY (1 << 7)

struct page_region {
  __u64 start;
  __u64 end;  // exclusive
  __u64 categories;
};

#define PM_SCAN_WP_MATCHING (1 << 0)    // write-protect the pages matched
#define PM_SCAN_CHECK_WPASYNC (1 << 1)  // fail (EPERM) on a VMA without async WP

struct pm_scan_arg {
  __u64 size;  // sizeof(struct pm_scan_arg)
  __u64 flags;
  __u64 start;
  __u64 end;
  __u64 walk_end;  // written by the kernel: where the walk stopped
  __u64 vec;       // struct page_region[vec_len]
  __u64 vec_len;
  __u64 max_pages;  // 0 = no limit
  __u64 category_inverted;
  __u64 category_mask;
  __u64 category_anyof_mask;
  __u64 return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif  // PAGEMAP_SCAN
