/* Cairn C API: asynchronous multi-level checkpoint/restart.
 *
 * Usable from C99 and from Fortran through iso_c_binding. Every function
 * returns 0 (CAIRN_OK) on success or a negative CAIRN_ERR_* code; none throws,
 * exits or aborts. cairn_strerror() names a code; cairn_last_error() gives the
 * detailed message of the calling thread's last failed call.
 *
 * Thread safety: all functions may be called from any thread. A history must be
 * closed before its client.
 */
#ifndef CAIRN_CAIRN_H_
#define CAIRN_CAIRN_H_

#include <stddef.h>
#include <stdint.h>

#include "cairn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cairn_client cairn_client_t;
typedef struct cairn_history cairn_history_t;

typedef enum {
  CAIRN_LEVEL_CACHE = 0,      /* captured into the host cache */
  CAIRN_LEVEL_LOCAL = 1,      /* committed to the local (scratch) directory */
  CAIRN_LEVEL_PERSISTENT = 2  /* committed to the persistent directory */
} cairn_level_t;

/* Error codes (negative). Values are stable. Declared in cairn/cairn_errors.def
 * (one row per code, with its meaning; cairn_strerror() describes each). */
enum {
  CAIRN_OK = 0,
#define CAIRN_ERROR(c, cpp, value, name, text, py) CAIRN_ERR_##c = (value),
#include "cairn/cairn_errors.def"
#undef CAIRN_ERROR
};

/* cairn_open - open a client.
 * config_path: a TOML file, or NULL for defaults; CAIRN_* environment
 * variables override both (docs/config.md). On success *out is a new client. */
CAIRN_EXPORT int cairn_open(const char *config_path, cairn_client_t **out);

/* cairn_close - drain pending flushes, persistent copies and retention
 * deletes, join background threads, free c. A run that waited only at
 * CAIRN_LEVEL_LOCAL pays its pending persistent copies here (docs/design.md,
 * "What Close waits for"). Returns the first unreported flush error. c is
 * freed even on error. NULL ok. */
CAIRN_EXPORT int cairn_close(cairn_client_t *c);

/* cairn_protect - register region id at [ptr, ptr+bytes); re-registering an
 * id replaces it. The memory must stay valid until unprotect/close. ptr may be
 * host, CUDA device or CUDA managed memory (asked of the CUDA driver; host
 * when there is none). CAIRN_ERR_INVALID_ARGUMENT for a range spanning two
 * allocations; CAIRN_ERR_UNSUPPORTED for GPU memory when Cairn cannot use the
 * GPU (the message says why). Checkpoints of device memory start after the
 * work queued on the legacy default stream; synchronize other streams that
 * write it first. */
CAIRN_EXPORT int cairn_protect(cairn_client_t *c, int id, void *ptr, size_t bytes);

/* checkpoint.changes values (cairn::ChangeDetection; docs/config.md), from
 * cairn/config_enums.def like the other configuration enums below. */
typedef enum {
  CAIRN_CHANGES_DEFAULT = -1, /* in cairn_protect_options_t: the client's checkpoint.changes */
#define CAIRN_CHANGE_DETECTION(cpp, value, name, c, doc) c = (value),
#include "cairn/config_enums.def"
} cairn_changes_t;

/* Per-region options of cairn_protect_ex. size: sizeof the caller's struct
 * (CAIRN_PROTECT_OPTIONS_INIT sets it and the defaults); members past it take
 * their defaults, so older callers keep working when members are appended. */
typedef struct {
  uint64_t size;
  int32_t changes;  /* a cairn_changes_t; CAIRN_CHANGES_DEFAULT: the client's */
  int32_t reserved; /* 0 */
} cairn_protect_options_t;

#define CAIRN_PROTECT_OPTIONS_INIT {.size = sizeof(cairn_protect_options_t), .changes = CAIRN_CHANGES_DEFAULT}

/* cairn_protect_ex - cairn_protect with this region's own options (opts NULL:
 * none). E.g. .changes = CAIRN_CHANGES_HASH for memory that cannot be tracked
 * page by page under checkpoint.changes = pages. Re-registering with other
 * options makes the region's next version full. CAIRN_ERR_INVALID_ARGUMENT
 * for an unknown mode or a size smaller than the size member. */
CAIRN_EXPORT int cairn_protect_ex(cairn_client_t *c, int id, void *ptr, size_t bytes,
                                  const cairn_protect_options_t *opts);

/* cairn_unprotect - forget region id; returns once no capture reads its
 * memory (a zero-copy checkpoint still reading it is read to the end first),
 * so that it may be freed right after. CAIRN_ERR_NOT_FOUND if unknown. */
CAIRN_EXPORT int cairn_unprotect(cairn_client_t *c, int id);

/* cairn_checkpoint - capture all protected regions as version (>= 0) of name.
 * Returns once the data is in the host cache (device regions: in the device
 * cache, when device_cache.size is set); flushing continues in the
 * background. Names: 1-128 chars, no '/', no "..", no control characters. */
CAIRN_EXPORT int cairn_checkpoint(cairn_client_t *c, const char *name, int64_t version);

/* cairn_wait - block until version is durable at level (levels are
 * cumulative: PERSISTENT also waits for the local commit); reports a failed
 * flush as its error code. */
CAIRN_EXPORT int cairn_wait(cairn_client_t *c, const char *name, int64_t version,
                            cairn_level_t level);

/* cairn_checkpoint_due - set *due to 1 if a checkpoint of name is due under
 * the optimal interval, else 0 (docs/design.md, "When to checkpoint"): 1
 * before this client's first checkpoint of name (it measures the cost), then
 * once T = max(C, sqrt(2 C (MTBF - R))) has passed since its last checkpoint
 * of name returned (or the last cairn_wait on that version). C: median
 * blocking time of the last 5 checkpoints of name (cairn_checkpoint plus the
 * cairn_wait calls on its version); R: the last restore of name, else its
 * bytes over the last restore's read bandwidth (1 GB/s before any restore);
 * MTBF: checkpoint.mtbf_s (CAIRN_MTBF). CAIRN_ERR_CONFIG (*due = 0) when no
 * MTBF is configured. On a client opened with cairn_open_mpi it is collective
 * (every rank calls it in the same order): *due is 1 on every rank when it is
 * 1 on any. The stats' interval_* fields show the decision. */
CAIRN_EXPORT int cairn_checkpoint_due(cairn_client_t *c, const char *name, int *due);

/* cairn_latest - newest committed version of name whose file's structure
 * checks out (header, footer, tables and their CRCs; such damage is skipped).
 * The data is not read: the restore verifies it (cairn_restore_latest falls
 * back on its own). CAIRN_ERR_NOT_FOUND if none. */
CAIRN_EXPORT int cairn_latest(cairn_client_t *c, const char *name, int64_t *version_out);

/* cairn_restore - copy version into the protected regions, verifying
 * checksums. CAIRN_ERR_CORRUPT if damaged (use cairn_latest to fall back),
 * CAIRN_ERR_SIZE_MISMATCH if a region's size differs. */
CAIRN_EXPORT int cairn_restore(cairn_client_t *c, const char *name, int64_t version);

/* cairn_restore_begin / cairn_restore_end - bracket a restore made of several
 * calls (a framework's load: its own metadata, planning, then cairn_restore
 * for the data). In between, the application counts as waiting on a
 * restore, as inside each cairn_restore, so the host cache's background
 * preparation (host_cache.init) pauses. They nest. cairn_restore_end with
 * none begun is CAIRN_ERR_STATE; cairn_close ends those left open. */
CAIRN_EXPORT int cairn_restore_begin(cairn_client_t *c);
CAIRN_EXPORT int cairn_restore_end(cairn_client_t *c);

/* cairn_restore_latest - the restart in one pass: restore the newest committed
 * version of name that verifies into the protected regions and store its
 * number in *version_out (-1 on error). Each byte is read once. When a version
 * turns out damaged or unreadable part-way, the regions are already partly
 * overwritten: the next older version is restored into them, and so on; on
 * success they hold exactly *version_out. CAIRN_ERR_NOT_FOUND when there is no
 * committed version or every one is damaged (regions then hold partial data);
 * CAIRN_ERR_SIZE_MISMATCH if a region's size differs. */
CAIRN_EXPORT int cairn_restore_latest(cairn_client_t *c, const char *name,
                                      int64_t *version_out);

/* Placement (docs/design.md, "Placement"). Every checkpoint records, unless
 * checkpoint.record_placement is false, the NUMA node of its host regions'
 * pages and the CPU affinity of the calling thread and of the registered
 * threads; a restore puts the pages back per restart.placement.
 *
 * cairn_register_thread - remember the calling thread under index (>= 0,
 * e.g. its OpenMP thread number) so that later checkpoints record its CPU
 * affinity; registering an index again replaces its thread. A thread that
 * has exited by a checkpoint is left out of it. CAIRN_ERR_INVALID_ARGUMENT
 * for a negative index. */
CAIRN_EXPORT int cairn_register_thread(cairn_client_t *c, int index);

/* The index under which the thread that called cairn_checkpoint is recorded. */
#define CAIRN_CHECKPOINTING_THREAD (-1)

/* cairn_restore_affinity - set the calling thread's CPU affinity to the one
 * recorded under index (CAIRN_CHECKPOINTING_THREAD or a registered index) in
 * the version last restored by this client; CPUs that this machine lacks are
 * wrapped around its CPUs (docs/design.md, "Topology mismatch"). Call it on
 * each thread after the restore (e.g. in an OpenMP parallel region with
 * omp_get_thread_num()). Does nothing when restart.placement is keep.
 * CAIRN_ERR_STATE if no version with a placement record was restored,
 * CAIRN_ERR_NOT_FOUND if the version recorded no such index. */
CAIRN_EXPORT int cairn_restore_affinity(cairn_client_t *c, int index);

/* cairn_history_open - open the adjoint history name (ephemeral by default). */
CAIRN_EXPORT int cairn_history_open(cairn_client_t *c, const char *name, cairn_history_t **out);

/* cairn_history_push - copy bytes at data as step (>= 0); returns once copied. */
CAIRN_EXPORT int cairn_history_push(cairn_history_t *h, int64_t step, const void *data,
                                    size_t bytes);

/* cairn_history_pop - copy step into dst (capacity bytes), consume it, and
 * store its size in *bytes_out (may be NULL). Prefetches the next lower steps.
 * CAIRN_ERR_SIZE_MISMATCH if capacity is too small (step not consumed). */
CAIRN_EXPORT int cairn_history_pop(cairn_history_t *h, int64_t step, void *dst, size_t capacity,
                                   size_t *bytes_out);

/* cairn_history_close - drop remaining steps and free h. NULL ok. */
CAIRN_EXPORT int cairn_history_close(cairn_history_t *h);

/* cairn_alloc - allocate tracked memory: *out becomes a zero-filled,
 * page-aligned private anonymous mapping of at least bytes (> 0) bytes,
 * rounded up to whole pages. From 2 MiB up the mapping is also aligned to
 * 2 MiB and transparent huge pages are advised (madvise MADV_HUGEPAGE): fewer
 * TLB misses and first-touch faults, and write-protecting it for tracking or
 * zero-copy capture costs far less; a tracked huge page is split at its first
 * tracked write, so changes are still found page by page (4 KiB). Protect the
 * memory with cairn_protect as usual: with checkpoint.changes = pages (or
 * auto) Cairn then copies and writes only the pages written since the previous
 * checkpoint. Memory that was not allocated here can be tracked too when its
 * start and size are page-aligned; a region that is not page-aligned is never
 * tracked: it falls back to hashing (changes = auto or hash) or to a full copy,
 * with a note in the client's stats. CAIRN_ERR_INVALID_ARGUMENT for bytes == 0
 * or out == NULL, CAIRN_ERR_NO_MEMORY when the mapping fails (the message names
 * the limit). Thread-safe. */
CAIRN_EXPORT int cairn_alloc(size_t bytes, void **out);

/* cairn_free - release memory that cairn_alloc returned (NULL: no-op).
 * Unprotect the region first (cairn_unprotect or cairn_close): a region freed
 * while protected is unmapped under Cairn, which notices at the next
 * checkpoint (tracking is lost for it) but cannot capture it: that checkpoint
 * fails. CAIRN_ERR_INVALID_ARGUMENT for a pointer cairn_alloc did not return,
 * or one already freed. Thread-safe. */
CAIRN_EXPORT int cairn_free(void *ptr);

/* cairn_strerror - static description of an error code; never NULL. */
CAIRN_EXPORT const char *cairn_strerror(int err);

/* cairn_last_error - detailed message of this thread's last failed Cairn call
 * ("" if none). Valid until the thread's next Cairn call. */
CAIRN_EXPORT const char *cairn_last_error(void);

/* Pipeline statistics (cairn::Stats in cairn.hpp). The fields are declared once,
 * in cairn/cairn_stats.def (listed with their meaning in docs/stats.md): each is
 * the C++ member's path with '_' for '.', e.g. capture_bytes, init_pinned_s,
 * device_capture_seconds. New fields are only ever appended.
 *
 * size: set by the caller to the size of the struct it was compiled with
 * (sizeof(cairn_stats_t), or use CAIRN_STATS_INIT) before calling cairn_stats;
 * the library writes at most that many bytes, so a program built against an
 * older, shorter cairn_stats_t keeps working, and sets size to the number of
 * bytes it filled. */
#define CAIRN_STATS_CTYPE_U64 uint64_t
#define CAIRN_STATS_CTYPE_F64 double
#define CAIRN_STATS_CTYPE_WHEN double
#define CAIRN_STATS_CTYPE_FLAG int32_t
#define CAIRN_STATS_CTYPE_ENUM int32_t
#define CAIRN_STATS_CTYPE_RATIO double
typedef struct {
  uint64_t size; /* in: sizeof the caller's struct; out: bytes filled */
#define CAIRN_STAT(kind, name, expr, doc) CAIRN_STATS_CTYPE_##kind name;
#include "cairn/cairn_stats.def"
#undef CAIRN_STAT
} cairn_stats_t;

/* `cairn_stats_t st = CAIRN_STATS_INIT;` sets size and zeroes the rest. */
#define CAIRN_STATS_INIT {.size = sizeof(cairn_stats_t)}

/* host_cache.init strategies (cairn::CacheInit; docs/config.md). */
typedef enum {
#define CAIRN_CACHE_INIT(cpp, value, name, c, doc) c = (value),
#include "cairn/config_enums.def"
} cairn_cache_init_t;

/* device_cache.init (cairn::DeviceCacheInit; docs/config.md). */
typedef enum {
#define CAIRN_DEVICE_CACHE_INIT(cpp, value, name, c, doc) c = (value),
#include "cairn/config_enums.def"
} cairn_device_cache_init_t;

/* checkpoint.capture (cairn::CaptureMode; docs/config.md). */
typedef enum {
#define CAIRN_CAPTURE_MODE(cpp, value, name, c, doc) c = (value),
#include "cairn/config_enums.def"
} cairn_capture_t;

/* checkpoint.write_protect (cairn::WriteProtectMode; docs/config.md). */
typedef enum {
#define CAIRN_WRITE_PROTECT_MODE(cpp, value, name, c, doc) c = (value),
#include "cairn/config_enums.def"
} cairn_write_protect_t;

/* mpi.l3_code (cairn::L3Code; docs/config.md). */
typedef enum {
#define CAIRN_L3_CODE(cpp, value, name, c, doc) c = (value),
#include "cairn/config_enums.def"
} cairn_l3_code_t;

/* cairn_stats - snapshot of the client's statistics into out, whose size the
 * caller sets first (see cairn_stats_t). CAIRN_ERR_INVALID_ARGUMENT when
 * out->size is smaller than the size member itself (e.g. 0: not set). */
CAIRN_EXPORT int cairn_stats(cairn_client_t *c, cairn_stats_t *out);

/* Messages. The library reports what the application did not ask for but
 * should know (a level that served a restore, a cache left unpinned, a device
 * cache that could not be made, a failed prefetch) as messages, not as errors.
 * By default each goes to stderr as "cairn: <message>\n".
 *
 * cairn_set_log_fn - route every later message to fn(user, level, message)
 * instead; NULL restores the default. Process-wide (like mimalloc's
 * mi_register_output): it applies to every client. fn may be called from any
 * of Cairn's threads, concurrently, until cairn_set_log_fn returns from
 * replacing it; message is valid during the call only and has no newline.
 * fn may run while Cairn holds its own locks: it must not call Cairn. */
typedef enum {
  CAIRN_LOG_ERROR = 0, /* something failed that the caller's calls did not report */
  CAIRN_LOG_WARN = 1,  /* a fallback was taken (e.g. unpinned cache, no device cache) */
  CAIRN_LOG_INFO = 2   /* what happened (e.g. which level served a restore) */
} cairn_log_level_t;
typedef void (*cairn_log_fn)(void *user, cairn_log_level_t level, const char *message);
CAIRN_EXPORT void cairn_set_log_fn(cairn_log_fn fn, void *user);

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_CAIRN_H_ */
