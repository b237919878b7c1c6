/* Run-time control of the fake CUDA driver (libcairn_fake_cuda.so).
 *
 * The fake exports these C functions beside the driver entry points. A test
 * that loaded the fake with dlopen (directly, or through cairn::gpu::Driver)
 * finds them with dlsym on a handle of the same library:
 *
 *   void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);   // already loaded
 *   auto set_fail = (cairn_fake_cuda_set_fail_fn)dlsym(h, "cairn_fake_cuda_set_fail");
 *
 * or, from C++, with cairn_fake_cuda::Control::Open(path) below. Each knob
 * also has an environment variable, read when the fake is first used and again
 * by cairn_fake_cuda_reset; see testing/fake_cuda/README.md for the syntax and
 * the defaults. A setting made here lasts until the next reset.
 */
#ifndef CAIRN_FAKE_CUDA_CONTROL_H_
#define CAIRN_FAKE_CUDA_CONTROL_H_

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CAIRN_FAKE_CUDA_EXPORT __attribute__((visibility("default")))
#else
#define CAIRN_FAKE_CUDA_EXPORT
#endif

/* Replaces the injected faults (CAIRN_FAKE_CUDA_FAIL syntax, e.g.
 * "cuMemCreate:3" or "cuMemcpyDtoHAsync:2:CUDA_ERROR_LAUNCH_FAILED:deferred");
 * NULL or "" removes them. Call counts for the faults restart at 0.
 * Returns 0, or -1 when the spec does not parse (the faults are unchanged). */
CAIRN_FAKE_CUDA_EXPORT int cairn_fake_cuda_set_fail(const char* spec);

/* Sets a bandwidth knob in GB/s (1e9 bytes/s); gbps <= 0 means unlimited.
 * knob: "copy", "map", "create", "alloc" or "register" (the same as the
 * CAIRN_FAKE_CUDA_<KNOB>_GBPS variables). Returns 0, or -1 for an unknown knob. */
CAIRN_FAKE_CUDA_EXPORT int cairn_fake_cuda_set_gbps(const char* knob, double gbps);

/* Sets the memory size of every fake device (what cuMemGetInfo reports as
 * total). Returns 0, or -1 if a device already uses more than `bytes`. */
CAIRN_FAKE_CUDA_EXPORT int cairn_fake_cuda_set_device_memory(unsigned long long bytes);

/* Calls of a driver API since load or the last reset, by its cuda.h name
 * ("cuMemAlloc", not "cuMemAlloc_v2"; the ABI name is accepted too). */
CAIRN_FAKE_CUDA_EXPORT unsigned long long cairn_fake_cuda_call_count(const char* api);

/* paused != 0: the stream workers start no new operation until called again
 * with 0 (operations already running finish). Lets a test observe
 * CUDA_ERROR_NOT_READY and ordering deterministically. */
CAIRN_FAKE_CUDA_EXPORT void cairn_fake_cuda_pause_streams(int paused);

/* Live objects, by kind: "device_allocs", "managed_allocs", "host_allocs",
 * "registrations", "reservations", "handles", "mappings", "streams",
 * "events", "device_bytes" (bytes of device memory in use, all devices),
 * "retained_contexts". Returns 0 for an unknown kind. */
CAIRN_FAKE_CUDA_EXPORT unsigned long long cairn_fake_cuda_live(const char* what);

/* Tears everything down (joins the stream workers, frees every allocation,
 * handle and reservation) and returns to the state before cuInit, with the
 * environment read again (settings made with the functions above are lost).
 * Every handle and pointer from before is invalid afterwards. Returns 0. */
CAIRN_FAKE_CUDA_EXPORT int cairn_fake_cuda_reset(void);

typedef int (*cairn_fake_cuda_set_fail_fn)(const char*);
typedef int (*cairn_fake_cuda_set_gbps_fn)(const char*, double);
typedef int (*cairn_fake_cuda_set_device_memory_fn)(unsigned long long);
typedef unsigned long long (*cairn_fake_cuda_call_count_fn)(const char*);
typedef void (*cairn_fake_cuda_pause_streams_fn)(int);
typedef unsigned long long (*cairn_fake_cuda_live_fn)(const char*);
typedef int (*cairn_fake_cuda_reset_fn)(void);

#ifdef __cplusplus
}  /* extern "C" */

#include <dlfcn.h>

#include <optional>

namespace cairn_fake_cuda {

/* The control functions of a fake driver library, resolved with dlsym. */
struct Control {
  cairn_fake_cuda_set_fail_fn set_fail = nullptr;
  cairn_fake_cuda_set_gbps_fn set_gbps = nullptr;
  cairn_fake_cuda_set_device_memory_fn set_device_memory = nullptr;
  cairn_fake_cuda_call_count_fn call_count = nullptr;
  cairn_fake_cuda_pause_streams_fn pause_streams = nullptr;
  cairn_fake_cuda_live_fn live = nullptr;
  cairn_fake_cuda_reset_fn reset = nullptr;

  /* dlopens `path` (kept loaded: RTLD_NODELETE) and resolves every function;
   * nullopt if the library or a function is missing (not the fake). */
  static std::optional<Control> Open(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h == nullptr) return std::nullopt;
    Control c;
    bool ok = Resolve(h, "cairn_fake_cuda_set_fail", &c.set_fail) &&
              Resolve(h, "cairn_fake_cuda_set_gbps", &c.set_gbps) &&
              Resolve(h, "cairn_fake_cuda_set_device_memory", &c.set_device_memory) &&
              Resolve(h, "cairn_fake_cuda_call_count", &c.call_count) &&
              Resolve(h, "cairn_fake_cuda_pause_streams", &c.pause_streams) &&
              Resolve(h, "cairn_fake_cuda_live", &c.live) &&
              Resolve(h, "cairn_fake_cuda_reset", &c.reset);
    dlclose(h);  /* RTLD_NODELETE: the functions stay valid */
    if (!ok) return std::nullopt;
    return c;
  }

 private:
  template <typename Fn>
  static bool Resolve(void* h, const char* name, Fn* out) {
    void* sym = dlsym(h, name);
    *out = reinterpret_cast<Fn>(sym);
    return sym != nullptr;
  }
};

}  // namespace cairn_fake_cuda
#endif /* __cplusplus */

#endif /* CAIRN_FAKE_CUDA_CONTROL_H_ */
