// What the pipeline needs from a GPU, with no CUDA types in sight: the loaded
// driver, one CUDA context, streams, page-locked buffers and the host-cache
// registration seam (docs/gpu.md, "Runtime").
//
// A Runtime exists only when a usable driver and device do: Open returns
// kUnsupported otherwise, and the pipeline then runs host-only (device
// pointers are rejected at protect/push time with that message).
//
// Contexts: Cairn's own threads (and the application's thread while Cairn
// copies for it) make the Runtime's context current for each driver call
// through Scope, which restores whatever was current before, so the
// application's own context handling is never disturbed.
//
// A lost context (docs/gpu.md, "Sticky errors"): CUDA documents some errors
// (CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ILLEGAL_ADDRESS, ...) as leaving "the
// process in an inconsistent state": "any further CUDA work will return the
// same error". The first driver call that returns one reports it as usual
// (its Status names the call and the CUDA error, code kIo); the Runtime
// remembers it, and from then on every device operation here (stream
// creation, copies, synchronization, pinned buffers, registration, the device
// cache's mapping, classifying a device pointer) fails at once, without
// calling the driver, with Usable()'s kUnsupported naming that first error.
// Releases (destructors, Unpin) still call the driver, so that nothing made
// here outlives the Runtime, and never wait for the device. Host memory is
// unaffected: Classify still answers for host pointers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "cairn/status.hpp"
#include "gpu/pointer_kind.hpp"
#include "os/mem/memory.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::gpu {

class Driver;

class Runtime {
 public:
  // Loads the process-wide driver (Driver::Get: $CAIRN_CUDA_DRIVER or
  // libcuda.so.1) and calls cuInit(0). The context: with device < 0, the
  // calling thread's current context when it has one, else device 0's primary
  // context; with device >= 0, that device's primary context. A primary
  // context is retained until the Runtime dies.
  static Result<std::unique_ptr<Runtime>> Open(int device);
  // As above with a given driver (tests pass the fake they loaded). cuInit(0)
  // is called again: it is cheap and idempotent, and a driver object may
  // outlive a reset of the fake. Precondition: driver outlives the Runtime.
  static Result<std::unique_ptr<Runtime>> Open(const Driver& driver, int device);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Driver& driver() const { return *driver_; }
  int device() const { return device_; }
  void* context() const { return context_; }  // a CUcontext

  // Makes the Runtime's context current on this thread for the scope.
  class Scope {
   public:
    explicit Scope(const Runtime& rt);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const Runtime& rt_;
    void* previous_ = nullptr;
    bool switched_ = false;
  };

  // ClassifyRegion with this runtime's driver. Device and managed memory
  // of a lost context: Usable()'s error.
  Result<PointerInfo> Classify(const void* p, size_t bytes) const;

  // OK while the context is usable; after a sticky error, kUnsupported
  // naming the first one (see the top of this file). Thread-safe.
  Status Usable() const;
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // The Status of a driver call's result (a CUresult; CUDA_SUCCESS: OK),
  // naming `call`, as Driver::Check; a sticky error also loses the context
  // (the first one is remembered, and its message says so). Every driver
  // call made for this Runtime's context goes through here. Thread-safe.
  Status Check(int cu_result, std::string_view call) const;

  // Registers host memory with cuMemHostRegister (PORTABLE) as one range and
  // unregisters it: the fast-init pin seam when a GPU is in use. A range
  // already registered (by the application, say) is reported as kExists by
  // Pin and left alone by Unpin; CUDA clears that error at once (not sticky).
  // The pinner remembers the ranges it registered itself (thread-safe): Unpin
  // of any other range does nothing. Lives as long as the Runtime.
  os::MemoryPinner* host_pinner() { return pinner_.get(); }

 private:
  Runtime() = default;
  const Driver* driver_ = nullptr;
  int device_ = 0;
  void* context_ = nullptr;
  bool retained_primary_ = false;
  std::unique_ptr<os::MemoryPinner> pinner_;
  // The loss (Check records it; const methods see it): lost_ is the fast
  // path, lost_error_ the first sticky error's Status, set once.
  mutable std::atomic<bool> lost_{false};
  mutable Mutex lost_mu_;
  mutable Status lost_error_ CAIRN_GUARDED_BY(lost_mu_);
};

// A stream of Cairn's own on the Runtime's context. Copies are enqueued with
// cuMemcpyAsync, which takes any pair of host, device and managed addresses
// (unified addressing); a copy to or from pageable host memory is
// synchronous, as CUDA documents.
//
// Ordering: a Synchronization::kWithLegacyStream stream (flags 0) is
// synchronized with the legacy default stream both ways, as CUDA documents
// for "blocking" streams: its copies start after the work the application
// queued there (kernels, cudaMemcpy) and the application's later work waits
// for them. The capture stream is one, so a checkpoint sees the results of
// the kernels launched before it. A kIndependent stream
// (CU_STREAM_NON_BLOCKING) never waits for, nor delays, the application: the
// background drain and prefetch copies use those.
class Stream {
 public:
  enum class Synchronization { kIndependent, kWithLegacyStream };
  static Result<std::unique_ptr<Stream>> Create(const Runtime& rt,
                                                Synchronization sync = Synchronization::kIndependent);
  ~Stream();  // synchronizes (errors ignored; not on a lost context), then destroys the stream
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Enqueues a copy of n bytes. Errors of the call itself are returned;
  // errors of the copy come from Synchronize. On a lost context: Usable().
  Status Copy(void* dst, const void* src, size_t n);
  // Waits for every enqueued copy; returns the first error among them. On a
  // lost context: Usable(), without waiting (CUDA abandons the work).
  Status Synchronize();

 private:
  explicit Stream(const Runtime& rt) : rt_(rt) {}
  const Runtime& rt_;
  void* stream_ = nullptr;  // a CUstream
};

// Page-locked host memory from cuMemAllocHost (a bounce buffer for copies
// between device memory and an unregistered host cache).
class PinnedBuffer {
 public:
  static Result<std::unique_ptr<PinnedBuffer>> Allocate(const Runtime& rt, size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  PinnedBuffer(const Runtime& rt, uint8_t* data, size_t size) : rt_(rt), data_(data), size_(size) {}
  const Runtime& rt_;
  uint8_t* data_;
  size_t size_;
};

}  // namespace cairn::gpu
