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

/* Error codes (negative). Values are stable. */
enum {
  CAIRN_OK = 0,
  CAIRN_ERR_INVALID_ARGUMENT = -1, /* bad pointer, name, size, level */
  CAIRN_ERR_CONFIG = -2,           /* bad configuration key/value/file */
  CAIRN_ERR_NOT_FOUND = -3,        /* no such name/version/step/region */
  CAIRN_ERR_CORRUPT = -4,          /* a checkpoint failed verification */
  CAIRN_ERR_IO = -5,               /* operating-system I/O error */
  CAIRN_ERR_NO_SPACE = -6,         /* file system full or quota exceeded */
  CAIRN_ERR_SIZE_MISMATCH = -7,    /* region/buffer size differs */
  CAIRN_ERR_NO_MEMORY = -8,        /* memory allocation/mapping failed */
  CAIRN_ERR_STATE = -9,            /* not valid now (closed, busy) */
  CAIRN_ERR_UNSUPPORTED = -10,     /* not available in this build */
  CAIRN_ERR_EXISTS = -11,          /* version/step already exists */
  CAIRN_ERR_INTERNAL = -12         /* a bug in Cairn */
};

/* cairn_open - open a client.
 * config_path: a TOML file, or NULL for defaults; CAIRN_* environment
 * variables override both (docs/config.md). On success *out is a new client. */
int cairn_open(const char *config_path, cairn_client_t **out);

/* cairn_close - drain pending flushes, join background threads, free c.
 * Returns the first unreported flush error. c is freed even on error. NULL ok. */
int cairn_close(cairn_client_t *c);

/* cairn_protect - register region id at [ptr, ptr+bytes); re-registering an
 * id replaces it. The memory must stay valid until unprotect/close. ptr may be
 * host, CUDA device or CUDA managed memory (asked of the CUDA driver; host
 * when there is none). CAIRN_ERR_INVALID_ARGUMENT for a range spanning two
 * allocations; CAIRN_ERR_UNSUPPORTED for GPU memory when Cairn cannot use the
 * GPU (the message says why). Checkpoints of device memory start after the
 * work queued on the legacy default stream; synchronize other streams that
 * write it first. */
int cairn_protect(cairn_client_t *c, int id, void *ptr, size_t bytes);

/* cairn_unprotect - forget region id. CAIRN_ERR_NOT_FOUND if unknown. */
int cairn_unprotect(cairn_client_t *c, int id);

/* cairn_checkpoint - capture all protected regions as version (>= 0) of name.
 * Returns once the data is in the host cache (device regions: in the device
 * cache, when device_cache.size is set); flushing continues in the
 * background. Names: 1-128 chars, no '/', no "..", no control characters. */
int cairn_checkpoint(cairn_client_t *c, const char *name, int64_t version);

/* cairn_wait - block until version is durable at level; reports a failed
 * flush as its error code. */
int cairn_wait(cairn_client_t *c, const char *name, int64_t version, cairn_level_t level);

/* cairn_latest - newest committed version of name whose data verifies (damaged
 * versions are skipped). CAIRN_ERR_NOT_FOUND if none. */
int cairn_latest(cairn_client_t *c, const char *name, int64_t *version_out);

/* cairn_restore - copy version into the protected regions, verifying
 * checksums. CAIRN_ERR_CORRUPT if damaged (use cairn_latest to fall back),
 * CAIRN_ERR_SIZE_MISMATCH if a region's size differs. */
int cairn_restore(cairn_client_t *c, const char *name, int64_t version);

/* cairn_history_open - open the adjoint history name (ephemeral by default). */
int cairn_history_open(cairn_client_t *c, const char *name, cairn_history_t **out);

/* cairn_history_push - copy bytes at data as step (>= 0); returns once copied. */
int cairn_history_push(cairn_history_t *h, int64_t step, const void *data, size_t bytes);

/* cairn_history_pop - copy step into dst (capacity bytes), consume it, and
 * store its size in *bytes_out (may be NULL). Prefetches the next lower steps.
 * CAIRN_ERR_SIZE_MISMATCH if capacity is too small (step not consumed). */
int cairn_history_pop(cairn_history_t *h, int64_t step, void *dst, size_t capacity,
                      size_t *bytes_out);

/* cairn_history_close - drop remaining steps and free h. NULL ok. */
int cairn_history_close(cairn_history_t *h);

/* cairn_strerror - static description of an error code; never NULL. */
const char *cairn_strerror(int err);

/* cairn_last_error - detailed message of this thread's last failed Cairn call
 * ("" if none). Valid until the thread's next Cairn call. */
const char *cairn_last_error(void);

/* Pipeline statistics (see cairn::Stats in cairn.hpp). */
typedef struct {
  uint64_t capture_bytes, flush_local_bytes, flush_persistent_bytes, prefetch_bytes,
      restore_bytes;
  double capture_seconds, flush_local_seconds, flush_persistent_seconds, prefetch_seconds,
      restore_seconds;
  uint64_t cache_hits, cache_misses, prefetch_waits, evictions, flushes_skipped,
      failed_flushes;
  double capture_blocked_seconds;
  uint64_t cache_capacity_bytes, cache_used_bytes, cache_dirty_bytes;
  /* Fast initialization (cairn::InitStats): seconds since open, < 0 = not yet. */
  double init_fully_touched_seconds, init_pinned_seconds;
  uint64_t init_touched_bytes, capture_untouched_bytes, capture_touched_bytes,
      capture_pinned_bytes, init_mode_switches;
  int32_t init_strategy;   /* a cairn_cache_init_t */
  int32_t init_pin_failed; /* 1 if pinning was on and failed (reason on stderr) */
  /* The GPU tier (cairn::DeviceStats; docs/gpu.md). Counters are 0 and
   * device_fully_mapped_seconds is < 0 when no device cache and no device
   * region were used. Appended after the fields above, whose layout does not
   * change. */
  int32_t device_gpu;        /* 1 if a CUDA driver and device are in use */
  int32_t device_init;       /* a cairn_device_cache_init_t (device_cache.init) */
  uint64_t device_capacity_bytes, /* device cache size (0 = none) */
      device_mapped_bytes,        /* backed by device memory so far */
      device_used_bytes;          /* device cache slots holding data now */
  double device_fully_mapped_seconds; /* since open; < 0 = still mapping (or no cache) */
  /* device/managed regions -> device cache (or host cache); device cache ->
   * host cache (background); host cache -> device cache (background) */
  uint64_t device_capture_bytes, device_drain_bytes, device_prefetch_bytes;
  double device_capture_seconds, device_drain_seconds, device_prefetch_seconds;
  uint64_t device_hits,      /* restores/pops served from the device cache */
      device_evictions,      /* device cache slots evicted (data safe in the host tier) */
      device_bounce_bytes;   /* moved through the pinned bounce buffers */
  double device_capture_blocked_seconds; /* captures waited for mapped or free slots */
  int32_t device_map_failed; /* 1 if mapping the device cache stopped early: it works with
                                what was mapped (reason: cairn::DeviceStats::map_error) */
  int32_t device_reserved;   /* padding; always 0 */
} cairn_stats_t;

/* host_cache.init strategies (cairn::CacheInit; docs/config.md). */
typedef enum {
  CAIRN_INIT_EAGER = 0,
  CAIRN_INIT_MEMSET = 1,
  CAIRN_INIT_LAZY = 2,
  CAIRN_INIT_CONCURRENT = 3,
  CAIRN_INIT_SEQUENTIAL = 4,
  CAIRN_INIT_ADAPTIVE = 5
} cairn_cache_init_t;

/* device_cache.init (cairn::DeviceCacheInit; docs/config.md). */
typedef enum {
  CAIRN_DEVICE_CACHE_DIRECT = 0,     /* one cuMemAlloc of the whole cache at open */
  CAIRN_DEVICE_CACHE_INCREMENTAL = 1 /* reserve the range, map it in the background */
} cairn_device_cache_init_t;

/* cairn_stats - snapshot of the client's statistics. */
int cairn_stats(cairn_client_t *c, cairn_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_CAIRN_H_ */
