// libcairn_fake_cuda.so: a fake CUDA driver over host memory, for CI machines
// without a GPU (README.md beside this file; docs/gpu.md).
//
// It exports the driver entry points under the ABI names the real
// libcuda.so.1 exports (the names cuda.h binds the API names to: each
// function below is defined through cuda.h's declarations, so both the name
// and the signature are checked by the compiler) and implements them from the
// CUDA driver API reference, returning the documented errors for misuse:
//
// * Device memory lives in a separate "device address space": a PROT_NONE
//   reservation the host cannot touch (a host dereference faults, as with a
//   real device pointer), backed by a private mapping only the fake's copy
//   engine uses. Every copy validates that device pointers are inside live
//   allocations, or mapped and accessible VMM ranges.
// * Streams run in order on one worker thread each (std::jthread, bounded
//   queue); the NULL stream is the legacy default stream with its implicit
//   synchronization with blocking streams; events capture stream positions.
// * The synchronous/asynchronous behaviour of each copy follows "API
//   synchronization behavior" of the driver API documentation.
// * Faults and latencies are injected from the environment or at run time
//   (fake_cuda_control.h).
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fake_cuda_control.h"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

#if CUDA_VERSION < 12000
#error "the fake CUDA driver needs cuda.h from CUDA 12.0 or newer"
#endif

namespace {

// The driver's locks, annotated so that the clang tree's thread-safety
// analysis checks them (docs/design.md, "Locking"). Globals rather than
// State members so that the annotations of the objects State holds can name
// them. Lock order: g_mu, then a stream's own mutex; g_knobs_mu and
// g_pause_mu are taken alone. Stream workers never take g_mu.
cairn::Mutex g_mu;        // the driver's objects: State's maps, Context, Device
cairn::Mutex g_knobs_mu;  // injected faults and call counts
cairn::Mutex g_pause_mu;  // paused stream workers

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr size_t kQueueDepth = 1024;  // pending operations per stream before Push blocks
constexpr int kMaxDevices = 16;

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// ---------------------------------------------------------------------------
// Error names and descriptions (cuGetErrorName / cuGetErrorString)

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

#define E(code, text) {code, #code, text}
constexpr ErrorText kErrors[] = {
    E(CUDA_SUCCESS, "no error"),
    E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    E(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled while using external profiling tool"),
    E(CUDA_ERROR_PROFILER_NOT_INITIALIZED, "profiler not initialized"),
    E(CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started"),
    E(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped"),
    E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    E(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
    E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    E(CUDA_ERROR_DEVICE_NOT_LICENSED, "device doesn't have valid Grid license"),
    E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    E(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
    E(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
    E(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
    E(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped"),
    E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    E(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
    E(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired"),
    E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    E(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array"),
    E(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer"),
    E(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    E(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit is not supported on this architecture"),
    E(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "exclusive-thread device already in use by a different thread"),
    E(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices"),
    E(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    E(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid OpenGL or DirectX context"),
    E(CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error detected during the execution"),
    E(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found"),
    E(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain."),
    E(CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled"),
    E(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "the provided execution affinity is not supported"),
    E(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
    E(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
    E(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found"),
    E(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed"),
    E(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
    E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    E(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    E(CUDA_ERROR_NOT_READY, "device not ready"),
    E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    E(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    E(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "launch uses incompatible texturing mode"),
    E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    E(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process"),
    E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    E(CUDA_ERROR_ASSERT, "device-side assert triggered"),
    E(CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted"),
    E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
      "part or all of the requested memory range is already mapped"),
    E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
      "pointer does not correspond to a registered memory region"),
    E(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error"),
    E(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
    E(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
    E(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space"),
    E(CUDA_ERROR_INVALID_PC, "invalid program counter"),
    E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    E(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch"),
    E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    E(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized"),
    E(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination"),
    E(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility was attempted on non supported HW"),
    E(CUDA_ERROR_MPS_CONNECTION_FAILED, "MPS client failed to connect to the MPS control daemon or the MPS server"),
    E(CUDA_ERROR_MPS_RPC_FAILURE, "the remote procedural call between the MPS server and the MPS client failed"),
    E(CUDA_ERROR_MPS_SERVER_NOT_READY, "MPS server is not ready to accept new MPS client requests"),
    E(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "the hardware resources required to create MPS client have been exhausted"),
    E(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "the hardware resources required to support device connections have been exhausted"),
    E(CUDA_ERROR_MPS_CLIENT_TERMINATED, "the MPS client has been terminated by the server"),
    E(CUDA_ERROR_CDP_NOT_SUPPORTED, "the module is using CUDA Dynamic Parallelism, but the current configuration does not support it"),
    E(CUDA_ERROR_CDP_VERSION_MISMATCH, "the module is using CUDA Dynamic Parallelism with an unsupported version"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
    E(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture"),
    E(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work"),
    E(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream"),
    E(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing blocking stream"),
    E(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream"),
    E(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from another thread"),
    E(CUDA_ERROR_TIMEOUT, "wait operation timed out"),
    E(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"),
    E(CUDA_ERROR_EXTERNAL_DEVICE, "an async error has occured in external entity outside of CUDA"),
    E(CUDA_ERROR_INVALID_CLUSTER_SIZE, "a kernel launch error has occurred due to cluster misconfiguration"),
#if CUDA_VERSION >= 13000
    E(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "API call requires a newer CUDA driver"),
    E(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "the provided PTX contains unsupported call to cudaDeviceSynchronize"),
    E(CUDA_ERROR_CONTAINED, "an exception occurred on the device that is now contained by the GPU's error containment capability"),
    E(CUDA_ERROR_LOSSY_QUERY, "the attempted operation is not supported due to the lossy query"),
    E(CUDA_ERROR_FUNCTION_NOT_LOADED, "function not loaded"),
    E(CUDA_ERROR_INVALID_RESOURCE_TYPE, "invalid resource type"),
    E(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "invalid resource configuration"),
    E(CUDA_ERROR_KEY_ROTATION, "an error occurred during the key rotation sequence"),
    E(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory not completely freed"),
#endif
    E(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef E

const ErrorText* FindError(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Sticky errors (README.md, "Sticky errors")
//
// cuda.h documents these as fatal: "This leaves the process in an
// inconsistent state and any further CUDA work will return the same error.
// To continue using CUDA, the process must be terminated and relaunched."
// CUDA_ERROR_ASSERT is worded differently: "The context cannot be used
// anymore, and must be destroyed": the context's reset (the last
// cuDevicePrimaryCtxRelease) clears it; only cairn_fake_cuda_reset (the
// fake's "relaunch") clears the others. Every other code, e.g.
// CUDA_ERROR_OUT_OF_MEMORY or CUDA_ERROR_ECC_UNCORRECTABLE ("an
// uncorrectable ECC error was detected during execution": nothing more is
// documented), is not sticky.
struct StickyError {
  CUresult code;
  bool cleared_by_context_reset;
};

constexpr StickyError kStickyErrors[] = {
    {CUDA_ERROR_ILLEGAL_ADDRESS, false},
    {CUDA_ERROR_LAUNCH_TIMEOUT, false},
    {CUDA_ERROR_ASSERT, true},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, false},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, false},
    {CUDA_ERROR_MISALIGNED_ADDRESS, false},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, false},
    {CUDA_ERROR_INVALID_PC, false},
    {CUDA_ERROR_LAUNCH_FAILED, false},
    {CUDA_ERROR_EXTERNAL_DEVICE, false},
#if CUDA_VERSION >= 13000
    {CUDA_ERROR_CONTAINED, false},
    {CUDA_ERROR_TENSOR_MEMORY_LEAK, false},
#endif
};

const StickyError* FindSticky(CUresult code) {
  for (const StickyError& e : kStickyErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Configuration from the environment, and the injected faults

struct Fault {
  std::string api;  // base API name, "cuMemCreate"
  uint64_t nth = 1;
  bool or_later = false;
  CUresult code = CUDA_ERROR_OUT_OF_MEMORY;
  bool deferred = false;  // reported at the next synchronization, not by the call
};

// "cuMemAlloc_v2" -> "cuMemAlloc" (also _ptds / _ptsz suffixes).
std::string BaseName(std::string_view name) {
  for (std::string_view suffix : {"_ptds", "_ptsz"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      name.remove_suffix(suffix.size());
    }
  }
  if (name.size() > 3 && name[name.size() - 3] == '_' && name[name.size() - 2] == 'v' &&
      name.back() >= '2' && name.back() <= '9') {
    name.remove_suffix(3);
  }
  return std::string(name);
}

bool ParseUnsigned(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool ParseCode(std::string_view s, CUresult* out) {
  uint64_t v = 0;
  if (ParseUnsigned(s, &v)) {
    if (v == 0 || v > 100000) return false;
    *out = static_cast<CUresult>(v);
    return true;
  }
  for (const ErrorText& e : kErrors) {
    if (s == e.name && e.code != CUDA_SUCCESS) {
      *out = e.code;
      return true;
    }
  }
  return false;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "API:N[+][:CODE][:deferred]" separated by ',' or ';'.
bool ParseFaults(std::string_view spec, std::vector<Fault>* out, std::string* error) {
  out->clear();
  std::string normalized(spec);
  std::replace(normalized.begin(), normalized.end(), ';', ',');
  for (std::string_view item : Split(normalized, ',')) {
    item = Trim(item);
    if (item.empty()) continue;
    auto fields = Split(item, ':');
    Fault f;
    if (fields.size() < 2 || fields.size() > 4 || fields[0].empty()) {
      *error = "expected API:N[+][:CODE][:deferred], got '" + std::string(item) + "'";
      return false;
    }
    f.api = BaseName(Trim(fields[0]));
    std::string_view n = Trim(fields[1]);
    if (!n.empty() && n.back() == '+') {
      f.or_later = true;
      n.remove_suffix(1);
    }
    if (!ParseUnsigned(n, &f.nth) || f.nth == 0) {
      *error = "bad call number in '" + std::string(item) + "' (1 is the first call)";
      return false;
    }
    for (size_t i = 2; i < fields.size(); ++i) {
      std::string_view field = Trim(fields[i]);
      if (field == "deferred") {
        f.deferred = true;
      } else if (!ParseCode(field, &f.code)) {
        *error = "bad error code '" + std::string(field) + "' in '" + std::string(item) + "'";
        return false;
      }
    }
    out->push_back(std::move(f));
  }
  return true;
}

// "8GiB", "512MiB", "64M", "1G", "4096" (binary units; the B is optional).
bool ParseBytes(std::string_view s, uint64_t* out) {
  s = Trim(s);
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  uint64_t v = 0;
  if (!ParseUnsigned(s.substr(0, digits), &v)) return false;
  std::string_view unit = Trim(s.substr(digits));
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.remove_suffix(1);
  if (!unit.empty() && unit.back() == 'i') unit.remove_suffix(1);
  int shift = 0;
  if (unit.empty()) shift = 0;
  else if (unit == "K" || unit == "k") shift = 10;
  else if (unit == "M" || unit == "m") shift = 20;
  else if (unit == "G" || unit == "g") shift = 30;
  else if (unit == "T" || unit == "t") shift = 40;
  else return false;
  if (shift > 0 && v > (UINT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

bool ParseRate(std::string_view s, double* out) {
  std::string str(Trim(s));
  if (str.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(str.c_str(), &end);
  if (errno != 0 || end == nullptr || *end != '\0' || !(v >= 0)) return false;
  *out = v;
  return true;
}

struct Config {
  int devices = 1;
  uint64_t memory = 16 * kGiB;
  uint64_t granularity = 2 * kMiB;
  std::string error;  // why the environment is invalid (reported by cuInit)
};

// ---------------------------------------------------------------------------
// Streams

class Stream;
struct Context;

struct Dep {
  std::shared_ptr<Stream> stream;
  uint64_t seq;
};

struct Op {
  uint64_t seq = 0;
  std::vector<Dep> deps;
  std::function<CUresult()> run;  // empty: a marker
};

void WaitWhilePaused();
// A context's sticky error (CUDA_SUCCESS while it has none), and recording
// one: the first sticky code wins; other codes are ignored. Lock-free: the
// stream workers call them and never take the State's mutex.
CUresult LostError(const Context* c);
void LoseContext(Context* c, CUresult r);

// One in-order queue of operations executed by its own worker thread.
class Stream {
 public:
  Stream(Context* context, unsigned stream_flags, bool is_legacy)
      : ctx(context), flags(stream_flags), legacy(is_legacy) {
    worker_ = std::jthread([this] { Run(); });
  }
  ~Stream() { Stop(); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Enqueues an operation that starts after `deps` and after every earlier
  // operation of this stream; blocks while kQueueDepth are pending. False
  // once the stream is stopping (destroyed, or its context reset).
  bool Push(std::vector<Dep> deps, std::function<CUresult()> run, uint64_t* seq) {
    cairn::MutexLock lock(&mu_);
    while (!stopping_ && queue_.size() >= kQueueDepth) cv_.wait(lock);
    if (stopping_) return false;
    Op op;
    op.seq = ++submitted_;
    op.deps = std::move(deps);
    op.run = std::move(run);
    queue_.push_back(std::move(op));
    if (seq != nullptr) *seq = submitted_;
    cv_.notify_all();
    return true;
  }
  uint64_t Tail() {
    cairn::MutexLock lock(&mu_);
    return submitted_;
  }
  bool Done(uint64_t seq) {
    cairn::MutexLock lock(&mu_);
    return completed_ >= seq;
  }
  void WaitFor(uint64_t seq) {
    cairn::MutexLock lock(&mu_);
    while (completed_ < seq) cv_.wait(lock);
  }
  void Drain() { WaitFor(Tail()); }
  // The first error of an operation since the last TakeError (deferred
  // faults), cleared by reading it.
  CUresult TakeError() {
    cairn::MutexLock lock(&mu_);
    CUresult e = error_;
    error_ = CUDA_SUCCESS;
    return e;
  }
  CUresult PeekError() {
    cairn::MutexLock lock(&mu_);
    return error_;
  }
  // No more pushes; the worker finishes what is queued and exits.
  void BeginStop() {
    {
      cairn::MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }
  void Stop() {
    BeginStop();
    if (!worker_.joinable()) return;
    if (worker_.get_id() == std::this_thread::get_id()) {
      worker_.detach();  // cannot happen (no operation owns its own stream)
    } else {
      worker_.join();
    }
  }
  bool Finished() const { return finished_.load(); }

  Context* const ctx;
  const unsigned flags;
  const bool legacy;

 private:
  void Run() {
    for (;;) {
      Op op;
      {
        cairn::MutexLock lock(&mu_);
        while (!stopping_ && queue_.empty()) cv_.wait(lock);
        if (queue_.empty()) break;
        op = std::move(queue_.front());  // the slot stays queued until done
      }
      WaitWhilePaused();
      for (const Dep& d : op.deps) d.stream->WaitFor(d.seq);
      // The work of a lost context is abandoned, not run: it completes at
      // once (nothing waiting for it hangs) and writes nothing.
      const bool lost = LostError(ctx) != CUDA_SUCCESS;
      const CUresult r = op.run && !lost ? op.run() : CUDA_SUCCESS;
      if (r != CUDA_SUCCESS) LoseContext(ctx, r);
      {
        cairn::MutexLock lock(&mu_);
        queue_.pop_front();
        completed_ = op.seq;
        if (r != CUDA_SUCCESS && error_ == CUDA_SUCCESS) error_ = r;
      }
      cv_.notify_all();
    }
    finished_.store(true);
  }

  cairn::Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Op> queue_ CAIRN_GUARDED_BY(mu_);
  uint64_t submitted_ CAIRN_GUARDED_BY(mu_) = 0;
  uint64_t completed_ CAIRN_GUARDED_BY(mu_) = 0;
  CUresult error_ CAIRN_GUARDED_BY(mu_) = CUDA_SUCCESS;
  bool stopping_ CAIRN_GUARDED_BY(mu_) = false;
  std::atomic<bool> finished_{false};
  std::jthread worker_;  // last: started once the members above exist
};

// ---------------------------------------------------------------------------
// Driver objects

struct Context {
  explicit Context(int dev) : device(dev) {}
  const int device;
  int refs CAIRN_GUARDED_BY(g_mu) = 0;         // cuDevicePrimaryCtxRetain count
  bool active CAIRN_GUARDED_BY(g_mu) = false;  // retained at least once since the last reset
  // The sticky error that lost this context (README.md, "Sticky errors"):
  // every later call that does work in it returns this. Atomic: set by the
  // stream workers, read without mu.
  std::atomic<CUresult> lost{CUDA_SUCCESS};
  std::shared_ptr<Stream> legacy CAIRN_GUARDED_BY(g_mu);                // the NULL stream
  std::vector<std::shared_ptr<Stream>> streams CAIRN_GUARDED_BY(g_mu);  // created, not destroyed
  std::vector<std::shared_ptr<Stream>> retired CAIRN_GUARDED_BY(g_mu);  // destroyed, maybe draining

  std::vector<std::shared_ptr<Stream>> AllStreams() const CAIRN_REQUIRES(g_mu) {
    std::vector<std::shared_ptr<Stream>> all = streams;
    all.insert(all.end(), retired.begin(), retired.end());
    if (legacy) all.push_back(legacy);
    return all;
  }
};

CUresult LostError(const Context* c) {
  return c != nullptr ? c->lost.load(std::memory_order_acquire) : CUDA_SUCCESS;
}

void LoseContext(Context* c, CUresult r) {
  if (c == nullptr || FindSticky(r) == nullptr) return;
  CUresult none = CUDA_SUCCESS;
  c->lost.compare_exchange_strong(none, r, std::memory_order_acq_rel);
}

struct Device {
  int ordinal = 0;
  uint64_t total = 0;
  uint64_t used CAIRN_GUARDED_BY(g_mu) = 0;  // cuMemAlloc + cuMemCreate bytes
  std::unique_ptr<Context> primary;

  // What cuMemGetInfo calls free; what allocations must fit in.
  uint64_t free_bytes() const CAIRN_REQUIRES(g_mu) { return total - std::min(used, total); }
};

// Physical memory of cuMemCreate.
struct Phys {
  uint64_t handle = 0;
  size_t size = 0;
  int device = 0;
  char* backing = nullptr;
  uint64_t buffer_id = 0;
  bool released = false;  // cuMemRelease called; freed when the last mapping goes
  int maps = 0;
};

struct Mapping {
  size_t size = 0;
  std::shared_ptr<Phys> phys;
  std::vector<unsigned> access;  // CUmemAccess_flags per device; all PROT_NONE at map
};

enum class Kind { kDevice, kManaged, kHostAlloc, kReservation };

// A range of the address space the fake owns: device memory (cuMemAlloc),
// managed memory, cuMemAllocHost memory, or a VMM reservation.
struct Block {
  Kind kind = Kind::kDevice;
  uintptr_t start = 0;
  size_t size = 0;
  void* map_base = nullptr;  // what munmap takes for the address range
  size_t map_len = 0;
  char* backing = nullptr;   // kDevice: the private mapping the copy engine uses
  size_t backing_len = 0;
  Context* ctx = nullptr;    // owner (not for reservations)
  int device = 0;
  uint64_t buffer_id = 0;
  std::map<uintptr_t, Mapping> maps;  // kReservation: start -> mapping
};

struct Registration {
  uintptr_t start = 0;
  size_t size = 0;
  uintptr_t page_start = 0;  // the page-rounded range the "pinning" covers
  uintptr_t page_end = 0;
  Context* ctx = nullptr;
  unsigned flags = 0;
  uint64_t buffer_id = 0;
};

struct Event {
  Context* ctx = nullptr;
  unsigned flags = 0;
  std::shared_ptr<Stream> stream;  // null until recorded: "an empty set of work"
  uint64_t seq = 0;
};

struct State {
  State() { ReadEnvironment(); }
  ~State() { Teardown(); }

  void ReadEnvironment();
  void Teardown();

  // Guarded by g_mu, except the atomics.
  Config config CAIRN_GUARDED_BY(g_mu);
  std::atomic<bool> initialized{false};
  std::atomic<uint64_t> generation{1};  // bumped by reset: stale current contexts
  std::vector<std::unique_ptr<Device>> devices CAIRN_GUARDED_BY(g_mu);
  std::map<uintptr_t, std::unique_ptr<Block>> blocks CAIRN_GUARDED_BY(g_mu);
  std::map<uintptr_t, Registration> regs CAIRN_GUARDED_BY(g_mu);
  // not yet released
  std::unordered_map<uint64_t, std::shared_ptr<Phys>> handles CAIRN_GUARDED_BY(g_mu);
  // released, still mapped
  std::vector<std::shared_ptr<Phys>> released_mapped CAIRN_GUARDED_BY(g_mu);
  // live CUstreams and CUevents
  std::unordered_map<Stream*, std::shared_ptr<Stream>> streams CAIRN_GUARDED_BY(g_mu);
  std::unordered_map<Event*, std::unique_ptr<Event>> events CAIRN_GUARDED_BY(g_mu);
  uint64_t next_handle CAIRN_GUARDED_BY(g_mu) = 0xfa4e0000;
  uint64_t next_buffer_id CAIRN_GUARDED_BY(g_mu) = 1;

  // Knobs (g_knobs_mu): injected faults and call counts.
  std::vector<Fault> faults CAIRN_GUARDED_BY(g_knobs_mu);
  // Calls counted since the faults were set, and since load / reset.
  std::unordered_map<std::string, uint64_t> fault_calls CAIRN_GUARDED_BY(g_knobs_mu);
  std::unordered_map<std::string, uint64_t> calls CAIRN_GUARDED_BY(g_knobs_mu);
  std::atomic<double> copy_gbps{0}, map_gbps{0}, create_gbps{0}, alloc_gbps{0},
      register_gbps{0};
  // CAIRN_FAKE_CUDA_POPULATE: device memory gets its pages at allocation.
  std::atomic<bool> populate{false};

  // Paused stream workers (g_pause_mu).
  std::condition_variable_any pcv;
  bool paused CAIRN_GUARDED_BY(g_pause_mu) = false;
};

State& S() {
  static State state;
  return state;
}

void WaitWhilePaused() {
  State& st = S();
  cairn::MutexLock lock(&g_pause_mu);
  while (st.paused) st.pcv.wait(lock);
}

void SetPaused(bool paused) {
  State& st = S();
  {
    cairn::MutexLock lock(&g_pause_mu);
    st.paused = paused;
  }
  st.pcv.notify_all();
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

void State::ReadEnvironment() {
  Config c;
  auto bad = [&](const char* var, const char* value, const std::string& why) {
    if (c.error.empty()) c.error = std::string(var) + "='" + value + "': " + why;
  };
  if (const char* v = Env("CAIRN_FAKE_CUDA_DEVICES")) {
    uint64_t n = 0;
    if (!ParseUnsigned(v, &n) || n > kMaxDevices) {
      bad("CAIRN_FAKE_CUDA_DEVICES", v, "expected 0 to " + std::to_string(kMaxDevices));
    } else {
      c.devices = static_cast<int>(n);
    }
  }
  if (const char* v = Env("CAIRN_FAKE_CUDA_MEM")) {
    if (!ParseBytes(v, &c.memory) || c.memory == 0) bad("CAIRN_FAKE_CUDA_MEM", v, "expected a size like 8GiB");
  }
  if (const char* v = Env("CAIRN_FAKE_CUDA_GRANULARITY")) {
    uint64_t g = 0;
    if (!ParseBytes(v, &g) || g < PageSize() || (g & (g - 1)) != 0) {
      bad("CAIRN_FAKE_CUDA_GRANULARITY", v, "expected a power of two >= the page size");
    } else {
      c.granularity = g;
    }
  }
  std::vector<Fault> faults_from_env;
  if (const char* v = Env("CAIRN_FAKE_CUDA_FAIL")) {
    std::string why;
    if (!ParseFaults(v, &faults_from_env, &why)) bad("CAIRN_FAKE_CUDA_FAIL", v, why);
  }
  struct RateVar {
    const char* var;
    std::atomic<double>* knob;
  } rates[] = {{"CAIRN_FAKE_CUDA_COPY_GBPS", &copy_gbps},
               {"CAIRN_FAKE_CUDA_MAP_GBPS", &map_gbps},
               {"CAIRN_FAKE_CUDA_CREATE_GBPS", &create_gbps},
               {"CAIRN_FAKE_CUDA_ALLOC_GBPS", &alloc_gbps},
               {"CAIRN_FAKE_CUDA_REGISTER_GBPS", &register_gbps}};
  for (const RateVar& r : rates) {
    double gbps = 0;
    if (const char* v = Env(r.var); v != nullptr && !ParseRate(v, &gbps)) {
      bad(r.var, v, "expected a rate in GB/s like 3 or 0.5");
      gbps = 0;
    }
    r.knob->store(gbps);
  }
  bool populate_pages = false;
  if (const char* v = Env("CAIRN_FAKE_CUDA_POPULATE")) {
    const std::string_view pv = v;
    if (pv == "1" || pv == "0") {
      populate_pages = pv == "1";
    } else {
      bad("CAIRN_FAKE_CUDA_POPULATE", v, "expected 0 or 1");
    }
  }
  populate.store(populate_pages);
  {
    cairn::MutexLock lock(&g_mu);
    config = c;
  }
  cairn::MutexLock lock(&g_knobs_mu);
  faults = std::move(faults_from_env);
  fault_calls.clear();
  calls.clear();
}

void FreeBlockMemory(Block& b) {
  if (b.backing != nullptr) munmap(b.backing, b.backing_len);
  if (b.map_base != nullptr) munmap(b.map_base, b.map_len);
  b.backing = nullptr;
  b.map_base = nullptr;
}

void FreePhysMemory(Phys& p) {
  if (p.backing != nullptr) munmap(p.backing, p.size);
  p.backing = nullptr;
}

void State::Teardown() {
  {
    cairn::MutexLock lock(&g_pause_mu);
    paused = false;
  }
  pcv.notify_all();
  cairn::MutexLock lock(&g_mu);
  for (auto& dev : devices) {
    Context* c = dev->primary.get();
    for (auto& s : c->AllStreams()) s->Stop();
    c->streams.clear();
    c->retired.clear();
    c->legacy.reset();
  }
  streams.clear();
  events.clear();
  for (auto& [start, b] : blocks) {
    for (auto& [at, m] : b->maps) FreePhysMemory(*m.phys);
    FreeBlockMemory(*b);
  }
  blocks.clear();
  for (auto& [h, p] : handles) FreePhysMemory(*p);
  handles.clear();
  for (auto& p : released_mapped) FreePhysMemory(*p);
  released_mapped.clear();
  regs.clear();
  devices.clear();
  initialized.store(false);
  generation.fetch_add(1);
}

// ---------------------------------------------------------------------------
// Per-call helpers

struct Gate {
  CUresult now = CUDA_SUCCESS;       // fail the call with this
  CUresult deferred = CUDA_SUCCESS;  // the call's operation fails with this
};

// Counts the call and applies the injected faults.
Gate Enter(const char* api) {
  State& st = S();
  cairn::MutexLock lock(&g_knobs_mu);
  ++st.calls[api];
  Gate gate;
  if (st.faults.empty()) return gate;
  const uint64_t n = ++st.fault_calls[api];
  for (const Fault& f : st.faults) {
    if (f.api == api && (n == f.nth || (f.or_later && n > f.nth))) {
      (f.deferred ? gate.deferred : gate.now) = f.code;
      break;
    }
  }
  return gate;
}

// Sleeps as long as moving `bytes` at `rate` GB/s takes (no sleep if unlimited).
void Throttle(size_t bytes, double rate) {
  if (rate <= 0 || bytes == 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(static_cast<double>(bytes) / (rate * 1e9)));
}
void Throttle(size_t bytes, const std::atomic<double>& gbps) { Throttle(bytes, gbps.load()); }

struct Current {
  uint64_t generation = 0;
  Context* ctx = nullptr;
};
thread_local Current t_current;

Context* CurrentContext() {
  return t_current.generation == S().generation.load() ? t_current.ctx : nullptr;
}

#define FAKE_RETURN_IF_ERROR(expr)               \
  do {                                           \
    const CUresult fake_r_ = (expr);             \
    if (fake_r_ != CUDA_SUCCESS) return fake_r_; \
  } while (0)

// Under mu: the current context, which must exist and be active. For the
// calls that release or only name something (frees, destroys,
// cuCtxGetDevice): a lost context is still theirs to use.
CUresult RequireLiveContext(Context** out) CAIRN_REQUIRES(g_mu) {
  Context* c = CurrentContext();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!c->active) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = c;
  return CUDA_SUCCESS;
}

// Under mu: as above, and not lost: the calls that do work in the context
// (allocate, register, copy, set, create, record, wait, synchronize) return
// its sticky error.
CUresult RequireContext(Context** out) CAIRN_REQUIRES(g_mu) {
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireLiveContext(&c));
  FAKE_RETURN_IF_ERROR(LostError(c));
  *out = c;
  return CUDA_SUCCESS;
}

// A call failed with an injected fault: a sticky code loses the calling
// thread's current context, as if the call had reported a device fault.
CUresult FailNow(CUresult r) {
  LoseContext(CurrentContext(), r);
  return r;
}

// The sticky error of the calling thread's current context, if any: what the
// VMM calls (which need no context) return once it is lost.
CUresult CurrentLostError() { return LostError(CurrentContext()); }

// Counts the call, applies injected faults and requires cuInit.
#define FAKE_ENTER(api)                                    \
  [[maybe_unused]] const Gate gate = Enter(api);           \
  if (gate.now != CUDA_SUCCESS) return FailNow(gate.now);  \
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED

Device* FindDevice(State& st, CUdevice dev) CAIRN_REQUIRES(g_mu) {
  if (dev < 0 || static_cast<size_t>(dev) >= st.devices.size()) return nullptr;
  return st.devices[static_cast<size_t>(dev)].get();
}

Context* FindContext(State& st, CUcontext handle) CAIRN_REQUIRES(g_mu) {
  for (auto& d : st.devices) {
    if (reinterpret_cast<CUcontext>(d->primary.get()) == handle) return d->primary.get();
  }
  return nullptr;
}

Block* FindBlock(State& st, uintptr_t a) CAIRN_REQUIRES(g_mu) {
  auto it = st.blocks.upper_bound(a);
  if (it == st.blocks.begin()) return nullptr;
  --it;
  Block* b = it->second.get();
  return a - b->start < b->size ? b : nullptr;
}

// The first block overlapping [a, a + n), or null.
Block* OverlappingBlock(State& st, uintptr_t a, size_t n) CAIRN_REQUIRES(g_mu) {
  if (Block* b = FindBlock(st, a)) return b;
  auto it = st.blocks.upper_bound(a);
  return it != st.blocks.end() && it->first - a < n ? it->second.get() : nullptr;
}

bool OverlapsBlock(State& st, uintptr_t a, size_t n) CAIRN_REQUIRES(g_mu) {
  return OverlappingBlock(st, a, n) != nullptr;
}

Registration* FindRegistration(State& st, uintptr_t a) CAIRN_REQUIRES(g_mu) {
  auto it = st.regs.upper_bound(a);
  if (it == st.regs.begin()) return nullptr;
  --it;
  Registration& r = it->second;
  return a - r.start < r.size ? &r : nullptr;
}

// Reserves `len` bytes of address space nobody may touch, aligned to `align`.
void* ReserveAddressSpace(size_t len, size_t align, void** map_base, size_t* map_len) {
  const size_t total = len + (align > PageSize() ? align : 0);
  void* p = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto base = reinterpret_cast<uintptr_t>(p);
  uintptr_t aligned = align > PageSize() ? (base + align - 1) / align * align : base;
  // Trim the slack so that only [aligned, aligned + len) stays reserved.
  if (aligned > base) munmap(p, aligned - base);
  if (base + total > aligned + len) {
    munmap(reinterpret_cast<void*>(aligned + len), base + total - (aligned + len));
  }
  *map_base = reinterpret_cast<void*>(aligned);
  *map_len = len;
  return *map_base;
}

// populate: fault every page in now (MAP_POPULATE). GPU memory is physical
// once allocated; host pages of a fresh mapping are not, and the first write
// into them would otherwise pay the page faults that a GPU never pays.
char* MapReadWrite(size_t len, bool populate = false) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (populate ? MAP_POPULATE : 0);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// ---------------------------------------------------------------------------
// Address resolution for the copy engine

enum class Where { kDevice, kManaged, kPinnedHost, kPageableHost };
struct Span {
  char* p;
  size_t n;
};
struct Resolved {
  Where where = Where::kPageableHost;
  std::vector<Span> spans;  // where the fake reads or writes the bytes
};

bool DeviceSide(Where w) { return w == Where::kDevice || w == Where::kManaged; }

// Under mu: [a, a + n) as seen by `device` for a read or a write. Device
// memory must be inside one live allocation, or a mapped VMM range whose
// access flags allow the access; host memory is pinned when it lies inside one
// registration or cuMemAllocHost allocation.
CUresult Resolve(State& st, uintptr_t a, size_t n, bool write, int device, Resolved* r)
    CAIRN_REQUIRES(g_mu) {
  if (a == 0 || n > UINTPTR_MAX - a) return CUDA_ERROR_INVALID_VALUE;
  r->spans.clear();
  if (Block* b = FindBlock(st, a)) {
    const size_t off = a - b->start;
    if (n > b->size - off) return CUDA_ERROR_INVALID_VALUE;  // runs past the allocation
    switch (b->kind) {
      case Kind::kDevice:
        r->where = Where::kDevice;
        r->spans.push_back({b->backing + off, n});
        return CUDA_SUCCESS;
      case Kind::kManaged:
        r->where = Where::kManaged;
        r->spans.push_back({reinterpret_cast<char*>(a), n});
        return CUDA_SUCCESS;
      case Kind::kHostAlloc:
        r->where = Where::kPinnedHost;
        r->spans.push_back({reinterpret_cast<char*>(a), n});
        return CUDA_SUCCESS;
      case Kind::kReservation: {
        r->where = Where::kDevice;
        uintptr_t cur = a;
        const uintptr_t end = a + n;
        auto it = b->maps.upper_bound(cur);
        if (it == b->maps.begin()) return CUDA_ERROR_INVALID_VALUE;  // not mapped
        --it;
        while (cur < end) {
          if (it == b->maps.end() || cur < it->first || cur - it->first >= it->second.size) {
            return CUDA_ERROR_INVALID_VALUE;  // a hole: reserved but not mapped
          }
          const Mapping& m = it->second;
          const unsigned acc = m.access[static_cast<size_t>(device)];
          if (write ? acc != CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                    : (acc & CU_MEM_ACCESS_FLAGS_PROT_READ) == 0) {
            return CUDA_ERROR_INVALID_VALUE;  // mapped, but not accessible (cuMemSetAccess)
          }
          const size_t moff = cur - it->first;
          const size_t len = std::min<size_t>(end - cur, m.size - moff);
          r->spans.push_back({m.phys->backing + moff, len});
          cur += len;
          ++it;
        }
        return CUDA_SUCCESS;
      }
    }
  }
  if (OverlapsBlock(st, a, n)) return CUDA_ERROR_INVALID_VALUE;  // host range running into device memory
  const Registration* reg = FindRegistration(st, a);
  if (reg != nullptr && n <= reg->start + reg->size - a) {
    if (write && (reg->flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0) return CUDA_ERROR_INVALID_VALUE;
    r->where = Where::kPinnedHost;
  } else {
    r->where = Where::kPageableHost;
  }
  r->spans.push_back({reinterpret_cast<char*>(a), n});
  return CUDA_SUCCESS;
}

void CopySpans(const std::vector<Span>& dst, const std::vector<Span>& src) {
  size_t di = 0, si = 0, doff = 0, soff = 0;
  while (di < dst.size() && si < src.size()) {
    const size_t len = std::min(dst[di].n - doff, src[si].n - soff);
    std::memmove(dst[di].p + doff, src[si].p + soff, len);
    doff += len;
    soff += len;
    if (doff == dst[di].n) {
      ++di;
      doff = 0;
    }
    if (soff == src[si].n) {
      ++si;
      soff = 0;
    }
  }
}

// ---------------------------------------------------------------------------
// Streams of a context

// Under mu: the stream `h` names in `ctx` (NULL and CU_STREAM_LEGACY: the
// legacy default stream), and the implicit dependencies of the legacy stream:
// work in the legacy stream waits for earlier work of every blocking stream of
// the context, and work in a blocking stream waits for earlier legacy work.
CUresult PrepareStream(State& st, Context* ctx, CUstream h, std::shared_ptr<Stream>* out,
                       std::vector<Dep>* deps) CAIRN_REQUIRES(g_mu) {
  std::shared_ptr<Stream> s;
  if (h == nullptr || h == CU_STREAM_LEGACY) {
    s = ctx->legacy;
  } else if (h == CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_NOT_SUPPORTED;  // the fake has no per-thread default streams
  } else {
    auto it = st.streams.find(reinterpret_cast<Stream*>(h));
    if (it == st.streams.end() || it->second->ctx != ctx) return CUDA_ERROR_INVALID_HANDLE;
    s = it->second;
  }
  deps->clear();
  auto add = [&](const std::shared_ptr<Stream>& other) {
    const uint64_t tail = other->Tail();
    if (tail != 0 && !other->Done(tail)) deps->push_back({other, tail});
  };
  if (s->legacy) {
    for (const auto& o : ctx->streams) {
      if ((o->flags & CU_STREAM_NON_BLOCKING) == 0) add(o);
    }
    for (const auto& o : ctx->retired) {
      if ((o->flags & CU_STREAM_NON_BLOCKING) == 0) add(o);
    }
  } else if ((s->flags & CU_STREAM_NON_BLOCKING) == 0) {
    add(ctx->legacy);
  }
  *out = std::move(s);
  return CUDA_SUCCESS;
}

// Outside mu: enqueues `run` and, if `wait`, waits for it and returns the
// stream's pending error (the operation's, or an earlier deferred one).
CUresult Submit(const std::shared_ptr<Stream>& s, std::vector<Dep> deps,
                std::function<CUresult()> run, bool wait, uint64_t* seq_out = nullptr) {
  uint64_t seq = 0;
  if (!s->Push(std::move(deps), std::move(run), &seq)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (seq_out != nullptr) *seq_out = seq;
  if (!wait) return CUDA_SUCCESS;
  s->WaitFor(seq);
  const CUresult e = s->TakeError();
  const CUresult lost = LostError(s->ctx);
  return lost != CUDA_SUCCESS ? lost : e;
}

// Waits for all work queued so far in `streams`; returns the first pending error.
CUresult DrainStreams(const std::vector<std::shared_ptr<Stream>>& streams, bool take_errors) {
  CUresult first = CUDA_SUCCESS;
  for (const auto& s : streams) {
    s->Drain();
    if (take_errors) {
      const CUresult e = s->TakeError();
      if (first == CUDA_SUCCESS) first = e;
    }
  }
  return first;
}

// Under mu: every stream of every active context (for device-wide syncs).
std::vector<std::shared_ptr<Stream>> AllActiveStreams(State& st) CAIRN_REQUIRES(g_mu) {
  std::vector<std::shared_ptr<Stream>> all;
  for (auto& d : st.devices) {
    if (d->primary->active) {
      auto s = d->primary->AllStreams();
      all.insert(all.end(), s.begin(), s.end());
    }
  }
  return all;
}

// Under mu: joins streams that were destroyed and have finished their work.
void ReapRetired(Context* ctx) CAIRN_REQUIRES(g_mu) {
  auto& r = ctx->retired;
  for (auto it = r.begin(); it != r.end();) {
    if ((*it)->Finished()) {
      (*it)->Stop();
      it = r.erase(it);
    } else {
      ++it;
    }
  }
}

void ReleasePhysIfUnused(State& st, const std::shared_ptr<Phys>& p) CAIRN_REQUIRES(g_mu) {
  if (!p->released || p->maps != 0 || p->backing == nullptr) return;
  FreePhysMemory(*p);
  if (Device* d = FindDevice(st, p->device)) d->used -= p->size;
  auto& rm = st.released_mapped;
  rm.erase(std::remove(rm.begin(), rm.end(), p), rm.end());
}

// Under mu (held throughout: stream workers never take it): the reset that
// follows the last cuDevicePrimaryCtxRelease. Destroys the context's streams
// and events and frees the memory allocated or registered in it.
void ResetContext(State& st, Context* ctx) CAIRN_REQUIRES(g_mu) {
  ctx->active = false;
  // "The context cannot be used anymore, and must be destroyed"
  // (CUDA_ERROR_ASSERT): the reset is that destruction. The other sticky
  // errors outlive it (the process must be relaunched).
  if (const StickyError* e = FindSticky(LostError(ctx)); e != nullptr && e->cleared_by_context_reset) {
    ctx->lost.store(CUDA_SUCCESS, std::memory_order_release);
  }
  std::vector<std::shared_ptr<Stream>> streams = ctx->AllStreams();
  for (auto it = st.streams.begin(); it != st.streams.end();) {
    it = it->second->ctx == ctx ? st.streams.erase(it) : std::next(it);
  }
  for (auto it = st.events.begin(); it != st.events.end();) {
    it = it->second->ctx == ctx ? st.events.erase(it) : std::next(it);
  }
  ctx->streams.clear();
  ctx->retired.clear();
  ctx->legacy.reset();
  for (auto& s : streams) s->Stop();  // finishes queued work first
  streams.clear();
  for (auto it = st.blocks.begin(); it != st.blocks.end();) {
    Block& b = *it->second;
    if (b.kind != Kind::kReservation && b.ctx == ctx) {
      if (b.kind == Kind::kDevice) st.devices[static_cast<size_t>(b.device)]->used -= b.size;
      FreeBlockMemory(b);
      it = st.blocks.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = st.regs.begin(); it != st.regs.end();) {
    it = it->second.ctx == ctx ? st.regs.erase(it) : std::next(it);
  }
}

// ---------------------------------------------------------------------------
// Copies and memset

// The operation a stream runs for a call: `op`, or, for a deferred injected
// fault, an operation that only fails.
std::function<CUresult()> OrDeferred(const Gate& gate, std::function<CUresult()> op) {
  if (gate.deferred == CUDA_SUCCESS) return op;
  return [code = gate.deferred] { return code; };
}

enum class CopyKind { kAny, kHtoD, kDtoH, kDtoD };

// The memcpy family. Per "API synchronization behavior" (driver API docs):
//  synchronous calls (on the legacy stream):
//   - pageable host -> device: the stream is synchronized, the source is
//     staged, the call returns; the transfer to the device may not be done;
//   - pinned host -> device: synchronous with respect to the host;
//   - device -> pageable or pinned host: returns once the copy is complete;
//   - device -> device: no host-side synchronization;
//   - host -> host: fully synchronous;
//   - any transfer involving managed memory: fully synchronous (older
//     editions of the same page).
//  asynchronous calls:
//   - device <-> pageable host: synchronous with respect to the host (the
//     documented "might be"; pageable sources are staged after a stream sync);
//   - host -> host: fully synchronous;
//   - every other transfer is asynchronous and stream-ordered.
CUresult Copy(const Gate& gate, CopyKind kind, uintptr_t dst, uintptr_t src, size_t n,
              CUstream h, bool async_api) {
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* ctx = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&ctx));
  std::shared_ptr<Stream> s;
  std::vector<Dep> deps;
  FAKE_RETURN_IF_ERROR(PrepareStream(st, ctx, h, &s, &deps));
  if (n == 0) return CUDA_SUCCESS;
  Resolved d, r;
  FAKE_RETURN_IF_ERROR(Resolve(st, dst, n, /*write=*/true, ctx->device, &d));
  FAKE_RETURN_IF_ERROR(Resolve(st, src, n, /*write=*/false, ctx->device, &r));
  const bool dev_dst = DeviceSide(d.where), dev_src = DeviceSide(r.where);
  switch (kind) {
    case CopyKind::kHtoD:
      if (!dev_dst || r.where == Where::kDevice) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CopyKind::kDtoH:
      if (!dev_src || d.where == Where::kDevice) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CopyKind::kDtoD:
      if (!dev_dst || !dev_src) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CopyKind::kAny:
      break;
  }
  lock.Unlock();

  const bool managed = d.where == Where::kManaged || r.where == Where::kManaged;
  bool wait = false;
  bool stage = false;
  if (!dev_dst && !dev_src) {
    wait = true;  // host to host
  } else if (dev_dst && !dev_src) {
    stage = r.where == Where::kPageableHost;
    wait = !async_api && (managed || !stage);
  } else if (!dev_dst && dev_src) {
    wait = d.where == Where::kPageableHost || !async_api;
  } else {
    wait = !async_api && managed;
  }

  if (stage) {
    // Synchronize with the stream, then copy the pageable source into a
    // staging buffer: the caller may reuse it as soon as the call returns.
    uint64_t marker = 0;
    if (!s->Push(std::move(deps), {}, &marker)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    deps.clear();
    s->WaitFor(marker);
    auto staged = std::make_shared<std::vector<char>>(n);
    CopySpans({{staged->data(), n}}, r.spans);
    r.spans = {{staged->data(), n}};
    return Submit(s, {},
                  OrDeferred(gate, [dspans = std::move(d.spans), staged, n, rate = st.copy_gbps.load()] {
                    Throttle(n, rate);
                    CopySpans(dspans, {{staged->data(), n}});
                    return CUDA_SUCCESS;
                  }),
                  wait);
  }
  return Submit(s, std::move(deps),
                OrDeferred(gate, [dspans = std::move(d.spans), sspans = std::move(r.spans), n,
                                  rate = st.copy_gbps.load()] {
                  Throttle(n, rate);
                  CopySpans(dspans, sspans);
                  return CUDA_SUCCESS;
                }),
                wait);
}

// cuMemsetD8: asynchronous with respect to the host except when the target is
// pinned host memory or managed memory (then fully synchronous); the Async
// form is always asynchronous. Pageable host memory is not a valid target.
CUresult Memset(const Gate& gate, uintptr_t dst, unsigned char value, size_t n, CUstream h,
                bool async_api) {
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* ctx = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&ctx));
  std::shared_ptr<Stream> s;
  std::vector<Dep> deps;
  FAKE_RETURN_IF_ERROR(PrepareStream(st, ctx, h, &s, &deps));
  if (n == 0) return CUDA_SUCCESS;
  Resolved d;
  FAKE_RETURN_IF_ERROR(Resolve(st, dst, n, /*write=*/true, ctx->device, &d));
  if (d.where == Where::kPageableHost) return CUDA_ERROR_INVALID_VALUE;
  lock.Unlock();
  const bool wait = !async_api && d.where != Where::kDevice;
  return Submit(s, std::move(deps),
                OrDeferred(gate, [spans = std::move(d.spans), value, n, rate = st.copy_gbps.load()] {
                  Throttle(n, rate);
                  for (const Span& sp : spans) std::memset(sp.p, value, sp.n);
                  return CUDA_SUCCESS;
                }),
                wait);
}

// ---------------------------------------------------------------------------
// Pointer attributes

enum class PtrClass { kUnknown, kDevice, kManaged, kHostAlloc, kRegistered, kVmmMapped, kVmmUnmapped };

struct PtrInfo {
  PtrClass cls = PtrClass::kUnknown;
  Context* ctx = nullptr;
  int device = 0;
  uintptr_t range_start = 0;
  size_t range_size = 0;
  uint64_t buffer_id = 0;
  const Mapping* mapping = nullptr;
};

PtrInfo Classify(State& st, uintptr_t a) CAIRN_REQUIRES(g_mu) {
  PtrInfo i;
  if (Block* b = FindBlock(st, a)) {
    i.ctx = b->ctx;
    i.device = b->device;
    i.range_start = b->start;
    i.range_size = b->size;
    i.buffer_id = b->buffer_id;
    switch (b->kind) {
      case Kind::kDevice: i.cls = PtrClass::kDevice; break;
      case Kind::kManaged: i.cls = PtrClass::kManaged; break;
      case Kind::kHostAlloc: i.cls = PtrClass::kHostAlloc; break;
      case Kind::kReservation: {
        i.cls = PtrClass::kVmmUnmapped;
        auto it = b->maps.upper_bound(a);
        if (it != b->maps.begin()) {
          --it;
          if (a - it->first < it->second.size) {
            i.cls = PtrClass::kVmmMapped;
            i.mapping = &it->second;
            i.device = it->second.phys->device;
            i.buffer_id = it->second.phys->buffer_id;
          }
        }
        break;
      }
    }
    return i;
  }
  if (const Registration* r = FindRegistration(st, a)) {
    i.cls = PtrClass::kRegistered;
    i.ctx = r->ctx;
    i.device = r->ctx != nullptr ? r->ctx->device : 0;
    i.range_start = r->start;
    i.range_size = r->size;
    i.buffer_id = r->buffer_id;
  }
  return i;
}

template <typename T>
void Put(void* data, T value) {
  std::memcpy(data, &value, sizeof value);
}

// One attribute (types per the cuPointerGetAttribute reference). `multi`:
// for cuPointerGetAttributes, which gives NULL defaults for a pointer CUDA
// does not know instead of CUDA_ERROR_INVALID_VALUE.
CUresult PointerAttribute(const PtrInfo& i, CUpointer_attribute attr, void* data, uintptr_t ptr,
                          bool multi) {
  const bool known = i.cls != PtrClass::kUnknown && i.cls != PtrClass::kVmmUnmapped;
  const bool host_accessible = i.cls == PtrClass::kManaged || i.cls == PtrClass::kHostAlloc ||
                               i.cls == PtrClass::kRegistered;
  // An attribute the pointer does not have: NULL default or INVALID_VALUE.
  auto missing = [&](auto zero) {
    if (!multi) return CUDA_ERROR_INVALID_VALUE;
    Put(data, zero);
    return CUDA_SUCCESS;
  };
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      if (!known) return missing(CUcontext{});
      Put(data, reinterpret_cast<CUcontext>(i.ctx));  // NULL for VMM memory (no context)
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      if (!known) return missing(0u);
      Put(data, static_cast<unsigned int>(i.cls == PtrClass::kHostAlloc || i.cls == PtrClass::kRegistered
                                              ? CU_MEMORYTYPE_HOST
                                              : CU_MEMORYTYPE_DEVICE));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!known) return missing(CUdeviceptr{0});
      if (CurrentContext() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
      Put(data, static_cast<CUdeviceptr>(ptr));  // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 1
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host_accessible) return missing(static_cast<void*>(nullptr));
      Put(data, reinterpret_cast<void*>(ptr));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      if (!known) return missing(0);
      Put(data, 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      if (!known) return missing(0ull);
      Put(data, static_cast<unsigned long long>(i.buffer_id));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      if (!known) return missing(0);
      Put(data, i.cls == PtrClass::kManaged ? 1 : 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      if (!known) return missing(0);
      Put(data, i.device);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      if (!known) return missing(0);
      Put(data, i.cls == PtrClass::kDevice ? 1 : 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      if (i.cls == PtrClass::kUnknown) return missing(CUdeviceptr{0});
      Put(data, static_cast<CUdeviceptr>(i.range_start));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      if (i.cls == PtrClass::kUnknown) return missing(size_t{0});
      Put(data, i.range_size);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      if (i.cls == PtrClass::kUnknown) return missing(0);
      Put(data, i.cls == PtrClass::kVmmUnmapped ? 0 : 1);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      if (!known) return missing(0u);
      Put(data, static_cast<unsigned int>(CU_MEM_HANDLE_TYPE_NONE));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      if (!known) return missing(0);
      Put(data, 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
      if (!known) return missing(0);
      Context* cur = CurrentContext();
      if (cur == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
      int flags = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
      if (i.mapping != nullptr) flags = static_cast<int>(i.mapping->access[static_cast<size_t>(cur->device)]);
      Put(data, flags);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      if (!known) return missing(CUmemoryPool{});
      Put(data, CUmemoryPool{});
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // not modelled (P2P tokens, ...) or unknown
  }
}

// ---------------------------------------------------------------------------
// Allocation helpers

// Under mu: a host-accessible block (managed or cuMemAllocHost memory) owned
// by `ctx`.
CUresult AddHostBlock(State& st, Context* ctx, Kind kind, size_t bytesize, uintptr_t* out)
    CAIRN_REQUIRES(g_mu) {
  const size_t len = RoundUp(bytesize, PageSize());
  char* p = MapReadWrite(len);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  auto b = std::make_unique<Block>();
  b->kind = kind;
  b->start = reinterpret_cast<uintptr_t>(p);
  b->size = bytesize;
  b->map_base = p;
  b->map_len = len;
  b->ctx = ctx;
  b->device = ctx->device;
  b->buffer_id = st.next_buffer_id++;
  *out = b->start;
  st.blocks.emplace(b->start, std::move(b));
  return CUDA_SUCCESS;
}

// Frees the block starting at `base` if `freeable(kind)`, after the implicit
// synchronization the free calls "may perform": work still queued may read or
// write the memory. Needs a current context. CUDA_ERROR_INVALID_VALUE when
// `base` is not such a block's start.
//
// On a lost context the block is freed all the same and the sticky error
// returned (README.md, "Sticky errors": releases).
template <typename Freeable>
CUresult FreeBlockAfterSync(uintptr_t base, Freeable freeable) {
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireLiveContext(&c));
  auto find = [&]() CAIRN_REQUIRES(g_mu) {
    auto it = st.blocks.find(base);
    return it != st.blocks.end() && freeable(it->second->kind) ? it : st.blocks.end();
  };
  if (base == 0 || find() == st.blocks.end()) return CUDA_ERROR_INVALID_VALUE;
  auto streams = AllActiveStreams(st);
  lock.Unlock();
  DrainStreams(streams, /*take_errors=*/false);
  lock.Lock();
  auto it = find();
  if (it == st.blocks.end()) return CUDA_ERROR_INVALID_VALUE;  // freed meanwhile
  Block& b = *it->second;
  if (b.kind == Kind::kDevice) st.devices[static_cast<size_t>(b.device)]->used -= b.size;
  FreeBlockMemory(b);
  st.blocks.erase(it);
  return LostError(c);
}

// ---------------------------------------------------------------------------
// VMM helpers

// Under mu: validates an allocation property (PINNED device memory).
CUresult CheckProp(State& st, const CUmemAllocationProp* prop) CAIRN_REQUIRES(g_mu) {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
      prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
      prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
    return CUDA_ERROR_NOT_SUPPORTED;  // the fake models a discrete GPU: device memory only
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (FindDevice(st, prop->location.id) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (prop->win32HandleMetaData != nullptr) return CUDA_ERROR_INVALID_VALUE;  // "required to be zero"
  return CUDA_SUCCESS;
}

// Under mu: the reservation containing [a, a + n), or null.
Block* FindReservation(State& st, uintptr_t a, size_t n) CAIRN_REQUIRES(g_mu) {
  Block* b = FindBlock(st, a);
  if (b == nullptr || b->kind != Kind::kReservation || n > b->size - (a - b->start)) return nullptr;
  return b;
}

// Under mu: the mappings that exactly tile [a, a + n) (first starts at a, no
// holes, last ends at a + n), as iterators; empty if they do not.
std::vector<std::map<uintptr_t, Mapping>::iterator> ExactMappings(Block* b, uintptr_t a, size_t n)
    CAIRN_REQUIRES(g_mu) {
  std::vector<std::map<uintptr_t, Mapping>::iterator> out;
  auto it = b->maps.find(a);
  uintptr_t cur = a;
  while (it != b->maps.end() && it->first == cur && cur - a < n) {
    out.push_back(it);
    cur += it->second.size;
    ++it;
  }
  if (cur - a != n) out.clear();
  return out;
}

}  // namespace

// ===========================================================================
// The driver entry points. cuda.h declared them extern "C" (under their ABI
// names), so these definitions have C linkage and the exported names.

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  Enter("cuGetErrorName");
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *pStr = e != nullptr ? e->name : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
  Enter("cuGetErrorString");
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *pStr = e != nullptr ? e->text : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuInit(unsigned int Flags) {
  const Gate gate = Enter("cuInit");
  if (gate.now != CUDA_SUCCESS) return gate.now;
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;  // "Currently, the Flags parameter must be 0"
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  if (st.initialized.load()) return CUDA_SUCCESS;
  if (!st.config.error.empty()) {
    std::fprintf(stderr, "fake CUDA driver: %s\n", st.config.error.c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  st.devices.clear();
  for (int i = 0; i < st.config.devices; ++i) {
    auto d = std::make_unique<Device>();
    d->ordinal = i;
    d->total = st.config.memory;
    d->primary = std::make_unique<Context>(i);
    st.devices.push_back(std::move(d));
  }
  // Documented: with no device, cuDeviceGetCount returns 0 (cuInit succeeds).
  st.initialized.store(true);
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* driverVersion) {
  const Gate gate = Enter("cuDriverGetVersion");
  if (gate.now != CUDA_SUCCESS) return gate.now;
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  if (FindDevice(st, ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  FAKE_ENTER("cuDeviceGetCount");
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  *count = static_cast<int>(st.devices.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  FAKE_ENTER("cuDeviceGetName");
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  if (FindDevice(st, dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "Cairn fake CUDA device %d", dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  FAKE_ENTER("cuDeviceTotalMem");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Device* d = FindDevice(st, dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = d->total;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  FAKE_ENTER("cuDeviceGetAttribute");
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Device* d = FindDevice(st, dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  int v = 0;  // attributes not modelled read as 0
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 0x10 + dev; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 2; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
    default: break;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Device* d = FindDevice(st, dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  Context* c = d->primary.get();
  if (c->refs++ == 0) {
    c->active = true;
    c->legacy = std::make_shared<Stream>(c, 0u, /*is_legacy=*/true);
  }
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Device* d = FindDevice(st, dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  Context* c = d->primary.get();
  // "Releasing a primary context that has not been previously retained will
  // fail with CUDA_ERROR_INVALID_CONTEXT."
  if (c->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  // "The context is automatically reset once the last reference to it is released."
  if (--c->refs == 0) ResetContext(st, c);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  FAKE_ENTER("cuCtxSetCurrent");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  if (ctx == nullptr) {
    t_current = Current{};
    return CUDA_SUCCESS;
  }
  Context* c = FindContext(st, ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = Current{st.generation.load(), c};
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  FAKE_ENTER("cuCtxGetCurrent");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(CurrentContext());
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  FAKE_ENTER("cuCtxGetDevice");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireLiveContext(&c));  // names the device: works on a lost context
  *device = c->device;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  FAKE_ENTER("cuCtxSynchronize");
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&c));
  auto streams = c->AllStreams();
  lock.Unlock();
  // "cuCtxSynchronize() returns an error if one of the preceding tasks failed."
  const CUresult first = DrainStreams(streams, /*take_errors=*/true);
  const CUresult lost = LostError(c);
  return lost != CUDA_SUCCESS ? lost : first;
}

// --- Streams ----------------------------------------------------------------

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  FAKE_ENTER("cuStreamCreate");
  if (phStream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((Flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&c));
  ReapRetired(c);
  auto s = std::make_shared<Stream>(c, Flags, /*is_legacy=*/false);
  st.streams.emplace(s.get(), s);
  c->streams.push_back(s);
  *phStream = reinterpret_cast<CUstream>(s.get());
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream) {
  FAKE_ENTER("cuStreamDestroy");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  if (hStream == nullptr || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_INVALID_HANDLE;  // the default streams cannot be destroyed
  }
  auto it = st.streams.find(reinterpret_cast<Stream*>(hStream));
  if (it == st.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Stream> s = it->second;
  st.streams.erase(it);
  Context* c = s->ctx;
  c->streams.erase(std::remove(c->streams.begin(), c->streams.end(), s), c->streams.end());
  // "the function will return immediately and the resources associated with
  // hStream will be released automatically once the device has completed all
  // work in hStream."
  s->BeginStop();
  c->retired.push_back(std::move(s));
  ReapRetired(c);
  return LostError(c);  // destroyed all the same on a lost context
}

namespace {

// Under mu: the stream a synchronizing call names; NULL/legacy need a context.
CUresult FindStreamForSync(State& st, CUstream h, std::shared_ptr<Stream>* out, Context** ctx_out)
    CAIRN_REQUIRES(g_mu) {
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    if (h == CU_STREAM_PER_THREAD) return CUDA_ERROR_NOT_SUPPORTED;
    Context* c = nullptr;
    FAKE_RETURN_IF_ERROR(RequireContext(&c));
    *out = c->legacy;
    *ctx_out = c;
    return CUDA_SUCCESS;
  }
  auto it = st.streams.find(reinterpret_cast<Stream*>(h));
  if (it == st.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  *ctx_out = it->second->ctx;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult cuStreamSynchronize(CUstream hStream) {
  FAKE_ENTER("cuStreamSynchronize");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  std::shared_ptr<Stream> s;
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(FindStreamForSync(st, hStream, &s, &c));
  FAKE_RETURN_IF_ERROR(LostError(c));
  std::vector<Dep> deps;
  if (s->legacy) {
    // The legacy stream also waits for the blocking streams' earlier work.
    FAKE_RETURN_IF_ERROR(PrepareStream(st, c, nullptr, &s, &deps));
    lock.Unlock();
    return Submit(s, std::move(deps), {}, /*wait=*/true);
  }
  lock.Unlock();
  s->Drain();
  const CUresult e = s->TakeError();
  const CUresult lost = LostError(c);  // lost by this stream's work, or another's
  return lost != CUDA_SUCCESS ? lost : e;
}

CUresult cuStreamQuery(CUstream hStream) {
  FAKE_ENTER("cuStreamQuery");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  std::shared_ptr<Stream> s;
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(FindStreamForSync(st, hStream, &s, &c));
  lock.Unlock();
  FAKE_RETURN_IF_ERROR(LostError(c));
  if (!s->Done(s->Tail())) return CUDA_ERROR_NOT_READY;
  FAKE_RETURN_IF_ERROR(LostError(c));  // lost meanwhile
  return s->TakeError();
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  FAKE_ENTER("cuStreamWaitEvent");
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;  // CU_EVENT_WAIT_DEFAULT only
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  auto ev = st.events.find(reinterpret_cast<Event*>(hEvent));
  if (ev == st.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  Context* c = nullptr;
  std::shared_ptr<Stream> s;
  if (hStream == nullptr || hStream == CU_STREAM_LEGACY) {
    FAKE_RETURN_IF_ERROR(RequireContext(&c));
  } else {
    auto it = st.streams.find(reinterpret_cast<Stream*>(hStream));
    if (it == st.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
    c = it->second->ctx;
  }
  FAKE_RETURN_IF_ERROR(LostError(c));
  std::vector<Dep> deps;
  FAKE_RETURN_IF_ERROR(PrepareStream(st, c, hStream, &s, &deps));
  // Waits on the work captured by the most recent cuEventRecord (none: no-op).
  if (ev->second->stream) deps.push_back({ev->second->stream, ev->second->seq});
  lock.Unlock();
  return Submit(s, std::move(deps), {}, /*wait=*/false);
}

// --- Events -----------------------------------------------------------------

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  FAKE_ENTER("cuEventCreate");
  if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned valid = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if ((Flags & ~valid) != 0) return CUDA_ERROR_INVALID_VALUE;
  // "CU_EVENT_INTERPROCESS must be specified along with CU_EVENT_DISABLE_TIMING."
  if ((Flags & CU_EVENT_INTERPROCESS) != 0 && (Flags & CU_EVENT_DISABLE_TIMING) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&c));
  auto e = std::make_unique<Event>();
  e->ctx = c;
  e->flags = Flags;
  Event* raw = e.get();
  st.events.emplace(raw, std::move(e));
  *phEvent = reinterpret_cast<CUevent>(raw);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  FAKE_ENTER("cuEventRecord");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  auto ev = st.events.find(reinterpret_cast<Event*>(hEvent));
  if (ev == st.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  Context* c = ev->second->ctx;
  if (hStream == nullptr || hStream == CU_STREAM_LEGACY) {
    Context* cur = nullptr;
    FAKE_RETURN_IF_ERROR(RequireContext(&cur));
    if (cur != c) return CUDA_ERROR_INVALID_HANDLE;  // event and stream of different contexts
  }
  if (!c->active) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  FAKE_RETURN_IF_ERROR(LostError(c));
  std::shared_ptr<Stream> s;
  std::vector<Dep> deps;
  FAKE_RETURN_IF_ERROR(PrepareStream(st, c, hStream, &s, &deps));
  lock.Unlock();
  // A marker: the event completes when everything before it in the stream has.
  uint64_t seq = 0;
  FAKE_RETURN_IF_ERROR(Submit(s, std::move(deps), {}, /*wait=*/false, &seq));
  lock.Lock();
  ev = st.events.find(reinterpret_cast<Event*>(hEvent));
  if (ev == st.events.end()) return CUDA_ERROR_INVALID_HANDLE;  // destroyed meanwhile
  ev->second->stream = std::move(s);
  ev->second->seq = seq;
  return CUDA_SUCCESS;
}

namespace {

CUresult EventTarget(CUevent hEvent, std::shared_ptr<Stream>* s, uint64_t* seq, Context** ctx) {
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  auto ev = st.events.find(reinterpret_cast<Event*>(hEvent));
  if (ev == st.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  *s = ev->second->stream;
  *seq = ev->second->seq;
  *ctx = ev->second->ctx;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult cuEventQuery(CUevent hEvent) {
  FAKE_ENTER("cuEventQuery");
  std::shared_ptr<Stream> s;
  uint64_t seq = 0;
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(EventTarget(hEvent, &s, &seq, &c));
  FAKE_RETURN_IF_ERROR(LostError(c));
  // "Before the first call to cuEventRecord(), an event represents an empty
  // set of work, so for example cuEventQuery() would return CUDA_SUCCESS."
  if (!s) return CUDA_SUCCESS;
  if (!s->Done(seq)) return CUDA_ERROR_NOT_READY;
  FAKE_RETURN_IF_ERROR(LostError(c));
  return s->PeekError();
}

CUresult cuEventSynchronize(CUevent hEvent) {
  FAKE_ENTER("cuEventSynchronize");
  std::shared_ptr<Stream> s;
  uint64_t seq = 0;
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(EventTarget(hEvent, &s, &seq, &c));
  FAKE_RETURN_IF_ERROR(LostError(c));
  if (!s) return CUDA_SUCCESS;
  s->WaitFor(seq);
  FAKE_RETURN_IF_ERROR(LostError(c));
  return s->PeekError();
}

CUresult cuEventDestroy(CUevent hEvent) {
  FAKE_ENTER("cuEventDestroy");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  // "An event may be destroyed before it is complete": nothing waits for it.
  auto ev = st.events.find(reinterpret_cast<Event*>(hEvent));
  if (ev == st.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  Context* c = ev->second->ctx;
  st.events.erase(ev);
  return LostError(c);  // destroyed all the same on a lost context
}

// --- Memory -----------------------------------------------------------------

CUresult cuMemGetInfo(size_t* free, size_t* total) {
  FAKE_ENTER("cuMemGetInfo");
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&c));
  Device* d = st.devices[static_cast<size_t>(c->device)].get();
  *total = d->total;
  *free = d->free_bytes();
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  FAKE_ENTER("cuMemAlloc");
  // "If bytesize is 0, cuMemAlloc() returns CUDA_ERROR_INVALID_VALUE."
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  {
    cairn::MutexLock lock(&g_mu);
    Context* c = nullptr;
    FAKE_RETURN_IF_ERROR(RequireContext(&c));
    // Checked again below; here so that nothing is mapped (or populated) for
    // a request that cannot fit.
    const Device* d = st.devices[static_cast<size_t>(c->device)].get();
    if (bytesize > d->free_bytes()) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Throttle(bytesize, st.alloc_gbps);
  auto b = std::make_unique<Block>();
  b->kind = Kind::kDevice;
  b->size = bytesize;
  const size_t len = RoundUp(bytesize, PageSize());
  b->backing_len = len;
  // Outside mu: populating can take a while, other calls go on meanwhile.
  if (ReserveAddressSpace(len, 0, &b->map_base, &b->map_len) == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  b->backing = MapReadWrite(len, st.populate.load());
  if (b->backing == nullptr) {
    FreeBlockMemory(*b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  if (CUresult r = RequireContext(&c); r != CUDA_SUCCESS) {
    FreeBlockMemory(*b);
    return r;
  }
  Device* d = st.devices[static_cast<size_t>(c->device)].get();
  if (bytesize > d->free_bytes()) {
    FreeBlockMemory(*b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  b->start = reinterpret_cast<uintptr_t>(b->map_base);
  b->ctx = c;
  b->device = c->device;
  b->buffer_id = st.next_buffer_id++;
  d->used += bytesize;
  *dptr = static_cast<CUdeviceptr>(b->start);
  st.blocks.emplace(b->start, std::move(b));
  return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  FAKE_ENTER("cuMemAllocManaged");
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&c));
  // Managed memory is host memory here (host-accessible at the same address);
  // it may oversubscribe the device and does not count against it.
  uintptr_t p = 0;
  FAKE_RETURN_IF_ERROR(AddHostBlock(st, c, Kind::kManaged, bytesize, &p));
  *dptr = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr dptr) {
  FAKE_ENTER("cuMemFree");
  if (dptr == 0) {
    cairn::MutexLock lock(&g_mu);
    Context* c = nullptr;
    return RequireContext(&c);  // freeing 0 does nothing
  }
  // "this API may perform implicit synchronization"
  return FreeBlockAfterSync(static_cast<uintptr_t>(dptr),
                            [](Kind k) { return k == Kind::kDevice || k == Kind::kManaged; });
}

CUresult cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  FAKE_ENTER("cuMemGetAddressRange");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&c));
  Block* b = FindBlock(st, static_cast<uintptr_t>(dptr));
  if (b == nullptr || (b->kind != Kind::kDevice && b->kind != Kind::kManaged)) return CUDA_ERROR_NOT_FOUND;
  if (pbase != nullptr) *pbase = static_cast<CUdeviceptr>(b->start);
  if (psize != nullptr) *psize = b->size;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void** pp, size_t bytesize) {
  FAKE_ENTER("cuMemAllocHost");
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  {
    cairn::MutexLock lock(&g_mu);
    Context* c = nullptr;
    FAKE_RETURN_IF_ERROR(RequireContext(&c));
  }
  Throttle(bytesize, st.register_gbps);  // page-locking costs what registration does
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireContext(&c));
  uintptr_t p = 0;
  FAKE_RETURN_IF_ERROR(AddHostBlock(st, c, Kind::kHostAlloc, bytesize, &p));
  *pp = reinterpret_cast<void*>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* p) {
  FAKE_ENTER("cuMemFreeHost");
  return FreeBlockAfterSync(reinterpret_cast<uintptr_t>(p), [](Kind k) { return k == Kind::kHostAlloc; });
}

CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  FAKE_ENTER("cuMemHostRegister");
  if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  const unsigned valid = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                         CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if ((Flags & ~valid) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((Flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (bytesize > UINTPTR_MAX - a) return CUDA_ERROR_INVALID_VALUE;
  const uintptr_t page_start = a / PageSize() * PageSize();
  const uintptr_t page_end = RoundUp(a + bytesize, PageSize());
  State& st = S();
  auto check = [&](Context** c) CAIRN_REQUIRES(g_mu) -> CUresult {
    FAKE_RETURN_IF_ERROR(RequireContext(c));
    if (Block* b = OverlappingBlock(st, page_start, page_end - page_start)) {
      // cuMemAllocHost memory is page-locked already; device memory is not host memory.
      return b->kind == Kind::kHostAlloc ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                                         : CUDA_ERROR_INVALID_VALUE;
    }
    // Pinning works on pages: a range sharing a page with a registered range
    // is "already registered" in part.
    auto it = st.regs.lower_bound(page_end);
    if (it != st.regs.begin()) {
      --it;
      for (;;) {
        if (it->second.page_end > page_start && it->second.page_start < page_end) {
          return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
        if (it == st.regs.begin() || it->second.page_end <= page_start) break;
        --it;
      }
    }
    return CUDA_SUCCESS;
  };
  {
    cairn::MutexLock lock(&g_mu);
    Context* c = nullptr;
    FAKE_RETURN_IF_ERROR(check(&c));
  }
  // The range must be mapped memory of this process.
  if (msync(reinterpret_cast<void*>(page_start), page_end - page_start, MS_ASYNC) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Throttle(bytesize, st.register_gbps);
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(check(&c));  // again: another thread may have registered meanwhile
  Registration r;
  r.start = a;
  r.size = bytesize;
  r.page_start = page_start;
  r.page_end = page_end;
  r.ctx = c;
  r.flags = Flags;
  r.buffer_id = st.next_buffer_id++;
  st.regs.emplace(a, r);
  return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* p) {
  FAKE_ENTER("cuMemHostUnregister");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  Context* c = nullptr;
  FAKE_RETURN_IF_ERROR(RequireLiveContext(&c));
  // "The base address must be the same one specified to cuMemHostRegister()."
  auto it = st.regs.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.regs.end()) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  st.regs.erase(it);
  return LostError(c);  // unregistered all the same on a lost context
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  FAKE_ENTER("cuMemcpy");
  return Copy(gate, CopyKind::kAny, dst, src, ByteCount, nullptr, false);
}

CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  FAKE_ENTER("cuMemcpyHtoD");
  return Copy(gate, CopyKind::kHtoD, dstDevice, reinterpret_cast<uintptr_t>(srcHost), ByteCount,
              nullptr, false);
}

CUresult cuMemcpyDtoH(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  FAKE_ENTER("cuMemcpyDtoH");
  return Copy(gate, CopyKind::kDtoH, reinterpret_cast<uintptr_t>(dstHost), srcDevice, ByteCount,
              nullptr, false);
}

CUresult cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  FAKE_ENTER("cuMemcpyDtoD");
  return Copy(gate, CopyKind::kDtoD, dstDevice, srcDevice, ByteCount, nullptr, false);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  FAKE_ENTER("cuMemcpyAsync");
  return Copy(gate, CopyKind::kAny, dst, src, ByteCount, hStream, true);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                           CUstream hStream) {
  FAKE_ENTER("cuMemcpyHtoDAsync");
  return Copy(gate, CopyKind::kHtoD, dstDevice, reinterpret_cast<uintptr_t>(srcHost), ByteCount,
              hStream, true);
}

CUresult cuMemcpyDtoHAsync(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                           CUstream hStream) {
  FAKE_ENTER("cuMemcpyDtoHAsync");
  return Copy(gate, CopyKind::kDtoH, reinterpret_cast<uintptr_t>(dstHost), srcDevice, ByteCount,
              hStream, true);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                           CUstream hStream) {
  FAKE_ENTER("cuMemcpyDtoDAsync");
  return Copy(gate, CopyKind::kDtoD, dstDevice, srcDevice, ByteCount, hStream, true);
}

CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  FAKE_ENTER("cuMemsetD8");
  return Memset(gate, dstDevice, uc, N, nullptr, false);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  FAKE_ENTER("cuMemsetD8Async");
  return Memset(gate, dstDevice, uc, N, hStream, true);
}

// --- Pointer attributes -------------------------------------------------------

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  FAKE_ENTER("cuPointerGetAttribute");
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  const PtrInfo i = Classify(st, static_cast<uintptr_t>(ptr));
  return PointerAttribute(i, attribute, data, static_cast<uintptr_t>(ptr), /*multi=*/false);
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                void** data, CUdeviceptr ptr) {
  FAKE_ENTER("cuPointerGetAttributes");
  if (numAttributes == 0 || attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  const PtrInfo i = Classify(st, static_cast<uintptr_t>(ptr));
  for (unsigned k = 0; k < numAttributes; ++k) {
    if (data[k] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    FAKE_RETURN_IF_ERROR(
        PointerAttribute(i, attributes[k], data[k], static_cast<uintptr_t>(ptr), /*multi=*/true));
  }
  return CUDA_SUCCESS;
}

// --- Virtual memory management --------------------------------------------------

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  FAKE_ENTER("cuMemGetAllocationGranularity");
  if (granularity == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  FAKE_RETURN_IF_ERROR(CheckProp(st, prop));
  *granularity = st.config.granularity;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  FAKE_ENTER("cuMemAddressReserve");
  FAKE_RETURN_IF_ERROR(CurrentLostError());
  if (ptr == nullptr || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  // "the alignment must be a power of two or zero for default alignment"
  if ((alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (addr % PageSize() != 0) return CUDA_ERROR_INVALID_VALUE;  // the hint is otherwise ignored
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  // Stricter than the reference's "multiple of the host page size": mappings
  // are granularity multiples, so a reservation must be one to be mappable.
  const size_t g = st.config.granularity;
  if (size % g != 0) return CUDA_ERROR_INVALID_VALUE;
  auto b = std::make_unique<Block>();
  b->kind = Kind::kReservation;
  b->size = size;
  if (ReserveAddressSpace(size, std::max(alignment, g), &b->map_base, &b->map_len) == nullptr) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  b->start = reinterpret_cast<uintptr_t>(b->map_base);
  b->buffer_id = st.next_buffer_id++;
  *ptr = static_cast<CUdeviceptr>(b->start);
  st.blocks.emplace(b->start, std::move(b));
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FAKE_ENTER("cuMemAddressFree");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  // "The size must match what was given to memAddressReserve and the ptr
  // given must match what was returned from memAddressReserve."
  auto it = st.blocks.find(static_cast<uintptr_t>(ptr));
  if (it == st.blocks.end() || it->second->kind != Kind::kReservation || it->second->size != size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Not documented either way; the fake refuses to free a reservation that
  // still has mappings (cuMemUnmap them first).
  if (!it->second->maps.empty()) return CUDA_ERROR_INVALID_VALUE;
  FreeBlockMemory(*it->second);
  st.blocks.erase(it);
  return CurrentLostError();  // freed all the same on a lost context
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  FAKE_ENTER("cuMemCreate");
  FAKE_RETURN_IF_ERROR(CurrentLostError());
  if (handle == nullptr || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = S();
  {
    cairn::MutexLock lock(&g_mu);
    FAKE_RETURN_IF_ERROR(CheckProp(st, prop));
    // "The size of this allocation must be a multiple of the the value given
    // via cuMemGetAllocationGranularity with the CU_MEM_ALLOC_GRANULARITY_MINIMUM flag."
    if (size % st.config.granularity != 0) return CUDA_ERROR_INVALID_VALUE;
    // Checked again below; here so that nothing is mapped for a request that
    // cannot fit.
    const Device* d = FindDevice(st, prop->location.id);
    if (size > d->free_bytes()) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Throttle(size, st.create_gbps);
  auto p = std::make_shared<Phys>();
  // Outside mu: populating can take a while, other calls go on meanwhile.
  p->backing = MapReadWrite(size, st.populate.load());
  if (p->backing == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  p->size = size;
  cairn::MutexLock lock(&g_mu);
  if (CUresult r = CheckProp(st, prop); r != CUDA_SUCCESS) {
    FreePhysMemory(*p);
    return r;
  }
  Device* d = FindDevice(st, prop->location.id);
  if (size > d->free_bytes()) {
    FreePhysMemory(*p);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  p->device = d->ordinal;
  p->handle = st.next_handle++;
  p->buffer_id = st.next_buffer_id++;
  d->used += size;
  st.handles.emplace(p->handle, p);
  *handle = p->handle;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKE_ENTER("cuMemRelease");
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  auto it = st.handles.find(handle);
  if (it == st.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Phys> p = it->second;
  st.handles.erase(it);
  // "The memory allocation will be freed when all outstanding mappings to the
  // memory are unmapped ... The generic memory handle can be freed when there
  // are still outstanding mappings made with this handle."
  p->released = true;
  if (p->maps > 0) {
    st.released_mapped.push_back(p);
  } else {
    ReleasePhysIfUnused(st, p);
  }
  return CurrentLostError();  // released all the same on a lost context
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  FAKE_ENTER("cuMemMap");
  FAKE_RETURN_IF_ERROR(CurrentLostError());
  // "offset ... Note: currently must be zero"; "flags for future use, must be zero now"
  if (flags != 0 || offset != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  const auto a = static_cast<uintptr_t>(ptr);
  State& st = S();
  auto check = [&](std::shared_ptr<Phys>* phys, Block** res) CAIRN_REQUIRES(g_mu) -> CUresult {
    auto h = st.handles.find(handle);
    if (h == st.handles.end()) return CUDA_ERROR_INVALID_VALUE;  // unknown or released handle
    const size_t g = st.config.granularity;
    if (a % g != 0 || size % g != 0) return CUDA_ERROR_INVALID_VALUE;
    if (size > h->second->size)
      return CUDA_ERROR_INVALID_VALUE;  // offset + size past the allocation
    Block* b = FindReservation(st, a, size);
    if (b == nullptr) return CUDA_ERROR_INVALID_VALUE;  // not inside one cuMemAddressReserve range
    // "cuMemMap can only create mappings on VA range reservations that are not
    // currently mapped."
    auto it = b->maps.lower_bound(a);
    if (it != b->maps.end() && it->first < a + size) return CUDA_ERROR_INVALID_VALUE;
    if (it != b->maps.begin() && std::prev(it)->first + std::prev(it)->second.size > a) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *phys = h->second;
    *res = b;
    return CUDA_SUCCESS;
  };
  {
    cairn::MutexLock lock(&g_mu);
    std::shared_ptr<Phys> phys;
    Block* b = nullptr;
    FAKE_RETURN_IF_ERROR(check(&phys, &b));
  }
  Throttle(size, st.map_gbps);
  cairn::MutexLock lock(&g_mu);
  std::shared_ptr<Phys> phys;
  Block* b = nullptr;
  FAKE_RETURN_IF_ERROR(check(&phys, &b));
  Mapping m;
  m.size = size;
  m.phys = phys;
  // "all mappings start with no accessibility setup"
  m.access.assign(static_cast<size_t>(kMaxDevices), CU_MEM_ACCESS_FLAGS_PROT_NONE);
  ++phys->maps;
  b->maps.emplace(a, std::move(m));
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FAKE_ENTER("cuMemUnmap");
  const auto a = static_cast<uintptr_t>(ptr);
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  auto find = [&](std::vector<std::map<uintptr_t, Mapping>::iterator>* maps)
                  CAIRN_REQUIRES(g_mu) -> Block* {
    Block* b = size == 0 ? nullptr : FindReservation(st, a, size);
    if (b == nullptr) return nullptr;
    // "The range must be the entire contiguous address range that was mapped
    // to": whole mappings, no holes.
    *maps = ExactMappings(b, a, size);
    return maps->empty() ? nullptr : b;
  };
  std::vector<std::map<uintptr_t, Mapping>::iterator> maps;
  if (find(&maps) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // \note_sync: work still using the range finishes first.
  auto streams = AllActiveStreams(st);
  lock.Unlock();
  DrainStreams(streams, /*take_errors=*/false);
  lock.Lock();
  Block* b = find(&maps);
  if (b == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (auto it : maps) {
    std::shared_ptr<Phys> p = it->second.phys;
    b->maps.erase(it);
    --p->maps;
    // "Any backing memory allocations will be freed if there are no existing
    // mappings and there are no unreleased memory handles."
    ReleasePhysIfUnused(st, p);
  }
  return CurrentLostError();  // unmapped all the same on a lost context
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  FAKE_ENTER("cuMemSetAccess");
  FAKE_RETURN_IF_ERROR(CurrentLostError());
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  const auto a = static_cast<uintptr_t>(ptr);
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  for (size_t k = 0; k < count; ++k) {
    const CUmemAccessDesc& d = desc[k];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      return d.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ? CUDA_ERROR_NOT_SUPPORTED
                                                               : CUDA_ERROR_INVALID_VALUE;
    }
    if (FindDevice(st, d.location.id) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
    if (d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d.flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  // "The range must be a fully mapped address range containing all
  // allocations created by cuMemMap / cuMemCreate."
  Block* b = FindReservation(st, a, size);
  if (b == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto maps = ExactMappings(b, a, size);
  if (maps.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (auto it : maps) {
    for (size_t k = 0; k < count; ++k) {
      it->second.access[static_cast<size_t>(desc[k].location.id)] = desc[k].flags;
    }
  }
  return CUDA_SUCCESS;
}

// --- cuGetProcAddress -------------------------------------------------------------

namespace {

struct ProcEntry {
  const char* name;
  void* fn;
};

// The API names cuGetProcAddress resolves (to the entry points above,
// whatever the version asked for).
#define P(name) {#name, reinterpret_cast<void*>(&name)}
const ProcEntry kProcs[] = {
    P(cuGetErrorName), P(cuGetErrorString), P(cuInit), P(cuDriverGetVersion), P(cuDeviceGet),
    P(cuDeviceGetCount), P(cuDeviceGetName), P(cuDeviceTotalMem), P(cuDeviceGetAttribute),
    P(cuDevicePrimaryCtxRetain), P(cuDevicePrimaryCtxRelease), P(cuCtxSetCurrent),
    P(cuCtxGetCurrent), P(cuCtxGetDevice), P(cuCtxSynchronize), P(cuStreamCreate),
    P(cuStreamDestroy), P(cuStreamSynchronize), P(cuStreamQuery), P(cuStreamWaitEvent),
    P(cuEventCreate), P(cuEventRecord), P(cuEventQuery), P(cuEventSynchronize), P(cuEventDestroy),
    P(cuMemGetInfo), P(cuMemAlloc), P(cuMemAllocManaged), P(cuMemFree), P(cuMemGetAddressRange),
    P(cuMemAllocHost), P(cuMemFreeHost), P(cuMemHostRegister), P(cuMemHostUnregister),
    P(cuMemcpy), P(cuMemcpyHtoD), P(cuMemcpyDtoH), P(cuMemcpyDtoD), P(cuMemcpyAsync),
    P(cuMemcpyHtoDAsync), P(cuMemcpyDtoHAsync), P(cuMemcpyDtoDAsync), P(cuMemsetD8),
    P(cuMemsetD8Async), P(cuPointerGetAttribute), P(cuPointerGetAttributes),
    P(cuMemGetAllocationGranularity), P(cuMemAddressReserve), P(cuMemAddressFree),
    P(cuMemCreate), P(cuMemRelease), P(cuMemMap), P(cuMemUnmap), P(cuMemSetAccess),
    P(cuGetProcAddress),
};
#undef P

}  // namespace

CUresult cuGetProcAddress(const char* symbol, void** pfn, int /*cudaVersion*/,
                                     cuuint64_t /*flags*/, CUdriverProcAddressQueryResult* symbolStatus) {
  const Gate gate = Enter("cuGetProcAddress");
  if (gate.now != CUDA_SUCCESS) return gate.now;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const ProcEntry& e : kProcs) {
    if (std::strcmp(e.name, symbol) == 0) {
      *pfn = e.fn;
      if (symbolStatus != nullptr) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = nullptr;
  if (symbolStatus != nullptr) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

// ===========================================================================
// Control (fake_cuda_control.h)

extern "C" {

int cairn_fake_cuda_set_fail(const char* spec) {
  std::vector<Fault> faults;
  std::string why;
  if (spec != nullptr && !ParseFaults(spec, &faults, &why)) {
    std::fprintf(stderr, "fake CUDA driver: cairn_fake_cuda_set_fail: %s\n", why.c_str());
    return -1;
  }
  State& st = S();
  cairn::MutexLock lock(&g_knobs_mu);
  st.faults = std::move(faults);
  st.fault_calls.clear();
  return 0;
}

int cairn_fake_cuda_set_gbps(const char* knob, double gbps) {
  if (knob == nullptr) return -1;
  State& st = S();
  const std::string_view k = knob;
  std::atomic<double>* target = k == "copy"       ? &st.copy_gbps
                                : k == "map"      ? &st.map_gbps
                                : k == "create"   ? &st.create_gbps
                                : k == "alloc"    ? &st.alloc_gbps
                                : k == "register" ? &st.register_gbps
                                                  : nullptr;
  if (target == nullptr) return -1;
  target->store(gbps > 0 ? gbps : 0);
  return 0;
}

int cairn_fake_cuda_set_device_memory(unsigned long long bytes) {
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  for (auto& d : st.devices) {
    if (d->used > bytes) return -1;
  }
  st.config.memory = bytes;
  for (auto& d : st.devices) d->total = bytes;
  return 0;
}

unsigned long long cairn_fake_cuda_call_count(const char* api) {
  if (api == nullptr) return 0;
  State& st = S();
  cairn::MutexLock lock(&g_knobs_mu);
  auto it = st.calls.find(BaseName(api));
  return it == st.calls.end() ? 0 : it->second;
}

void cairn_fake_cuda_pause_streams(int paused) { SetPaused(paused != 0); }

unsigned long long cairn_fake_cuda_live(const char* what) {
  if (what == nullptr) return 0;
  State& st = S();
  cairn::MutexLock lock(&g_mu);
  const std::string_view w = what;
  auto count_blocks = [&](Kind k) CAIRN_REQUIRES(g_mu) {
    return static_cast<unsigned long long>(std::count_if(
        st.blocks.begin(), st.blocks.end(), [&](const auto& e) { return e.second->kind == k; }));
  };
  if (w == "device_allocs") return count_blocks(Kind::kDevice);
  if (w == "managed_allocs") return count_blocks(Kind::kManaged);
  if (w == "host_allocs") return count_blocks(Kind::kHostAlloc);
  if (w == "reservations") return count_blocks(Kind::kReservation);
  if (w == "registrations") return st.regs.size();
  if (w == "handles") return st.handles.size();
  if (w == "streams") return st.streams.size();
  if (w == "events") return st.events.size();
  if (w == "mappings") {
    unsigned long long n = 0;
    for (const auto& [start, b] : st.blocks) n += b->maps.size();
    return n;
  }
  if (w == "device_bytes") {
    unsigned long long n = 0;
    for (const auto& d : st.devices) n += d->used;
    return n;
  }
  if (w == "retained_contexts") {
    unsigned long long n = 0;
    for (const auto& d : st.devices) n += d->primary->refs > 0 ? 1 : 0;
    return n;
  }
  return 0;
}

int cairn_fake_cuda_reset(void) {
  State& st = S();
  st.Teardown();
  st.ReadEnvironment();
  return 0;
}

}  // extern "C"
