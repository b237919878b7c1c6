// Clang thread-safety analysis attributes (-Wthread-safety), after leveldb's
// port/thread_annotations.h and abseil's base/thread_annotations.h.
//
// They document which mutex guards which data and which locks a function
// expects held; Clang checks them at compile time. On other compilers (GCC)
// every macro expands to nothing, so they cost nothing and change no code.
//
//   class Cache {
//     Mutex mu_;
//     uint64_t used_ CAIRN_GUARDED_BY(mu_);
//     void EvictLocked() CAIRN_REQUIRES(mu_);
//     void Insert() CAIRN_EXCLUDES(mu_);
//   };
#pragma once

#if defined(__clang__) && !defined(SWIG)
#define CAIRN_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define CAIRN_THREAD_ANNOTATION_(x)  // no-op
#endif

// The data member is only read or written with the given capability held.
#define CAIRN_GUARDED_BY(x) CAIRN_THREAD_ANNOTATION_(guarded_by(x))
// The data *pointed to* by the pointer member is guarded by the capability.
#define CAIRN_PT_GUARDED_BY(x) CAIRN_THREAD_ANNOTATION_(pt_guarded_by(x))

// Lock ordering: this mutex is acquired after / before the given ones.
#define CAIRN_ACQUIRED_AFTER(...) CAIRN_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define CAIRN_ACQUIRED_BEFORE(...) CAIRN_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))

// The caller must hold the capability exclusively / shared when calling.
#define CAIRN_REQUIRES(...) CAIRN_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define CAIRN_REQUIRES_SHARED(...) CAIRN_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))

// The function acquires / releases the capability (and does not release /
// acquire it before returning).
#define CAIRN_ACQUIRE(...) CAIRN_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define CAIRN_ACQUIRE_SHARED(...) CAIRN_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define CAIRN_RELEASE(...) CAIRN_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define CAIRN_RELEASE_SHARED(...) CAIRN_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define CAIRN_RELEASE_GENERIC(...) CAIRN_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))

// The function tries to acquire the capability; the first argument is the
// return value meaning success.
#define CAIRN_TRY_ACQUIRE(...) CAIRN_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define CAIRN_TRY_ACQUIRE_SHARED(...) \
  CAIRN_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))

// The caller must NOT hold the capability (the function acquires it itself;
// prevents self-deadlock on non-recursive mutexes).
#define CAIRN_EXCLUDES(...) CAIRN_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// Runtime assertion that the capability is held (tells the analysis so).
#define CAIRN_ASSERT_CAPABILITY(x) CAIRN_THREAD_ANNOTATION_(assert_capability(x))
#define CAIRN_ASSERT_SHARED_CAPABILITY(x) CAIRN_THREAD_ANNOTATION_(assert_shared_capability(x))

// The function returns a reference to the given capability.
#define CAIRN_RETURN_CAPABILITY(x) CAIRN_THREAD_ANNOTATION_(lock_returned(x))

// The class is a capability (a mutex) / an RAII holder of one.
#define CAIRN_CAPABILITY(x) CAIRN_THREAD_ANNOTATION_(capability(x))
#define CAIRN_SCOPED_CAPABILITY CAIRN_THREAD_ANNOTATION_(scoped_lockable)

// Turns the analysis off for one function (say why at the use site).
#define CAIRN_NO_THREAD_SAFETY_ANALYSIS CAIRN_THREAD_ANNOTATION_(no_thread_safety_analysis)
