/* FTI_Protect of CUDA device and managed memory, through the fake CUDA driver
 * (testing/fake_cuda; CAIRN_CUDA_DRIVER names it for Cairn, and this program
 * loads the same library to allocate and fill the memory):
 *   fti_device <fake driver> <config.fti>
 * checkpoints both at level 1, finalizes, overwrites them, initializes FTI
 * again (a restart: FTI_Status() == 1), recovers and checks every byte. */
#include <dlfcn.h>
#include <fti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*init_fn)(unsigned);
typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*managed_fn)(unsigned long long *, size_t, unsigned);
typedef int (*htod_fn)(unsigned long long, const void *, size_t);
typedef int (*dtoh_fn)(void *, unsigned long long, size_t);

/* dlsym's object pointer into a function pointer (memcpy: ISO C has no cast). */
#define LOAD(var, v2, name)                                  \
  do {                                                       \
    void *f_ = dlsym(lib, v2);                               \
    if (f_ == NULL) f_ = dlsym(lib, name);                   \
    memcpy(&(var), &f_, sizeof f_);                          \
  } while (0)

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      MPI_Abort(MPI_COMM_WORLD, 1);                        \
    }                                                      \
  } while (0)

enum { kCount = 100000 }; /* doubles: several blocks */

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  CHECK(argc == 3, "usage: fti_device <fake driver> <config.fti>");
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  CHECK(lib != NULL, "dlopen %s: %s", argv[1], dlerror());
  init_fn cu_init = NULL;
  LOAD(cu_init, "cuInit", "cuInit");
  retain_fn retain = NULL;
  LOAD(retain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain");
  set_fn set_current = NULL;
  LOAD(set_current, "cuCtxSetCurrent", "cuCtxSetCurrent");
  alloc_fn mem_alloc = NULL;
  LOAD(mem_alloc, "cuMemAlloc_v2", "cuMemAlloc");
  managed_fn mem_managed = NULL;
  LOAD(mem_managed, "cuMemAllocManaged", "cuMemAllocManaged");
  htod_fn htod = NULL;
  LOAD(htod, "cuMemcpyHtoD_v2", "cuMemcpyHtoD");
  dtoh_fn dtoh = NULL;
  LOAD(dtoh, "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
  CHECK(cu_init && retain && set_current && mem_alloc && mem_managed && htod && dtoh, "driver entry points");
  void *ctx = NULL;
  CHECK(cu_init(0) == 0 && retain(&ctx, 0) == 0 && set_current(ctx) == 0, "context");

  const size_t bytes = sizeof(double) * kCount;
  unsigned long long dev = 0, man = 0;
  CHECK(mem_alloc(&dev, bytes) == 0, "cuMemAlloc");
  CHECK(mem_managed(&man, bytes, 1 /* CU_MEM_ATTACH_GLOBAL */) == 0, "cuMemAllocManaged");
  double *host = malloc(bytes), *back = malloc(bytes), *managed = (double *)(uintptr_t)man;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 0; i < kCount; ++i) host[i] = rank * 1e6 + i * 0.5;
  CHECK(htod(dev, host, bytes) == 0, "cuMemcpyHtoD");
  for (int i = 0; i < kCount; ++i) managed[i] = -host[i];

  CHECK(FTI_Init(argv[2], MPI_COMM_WORLD) == FTI_SCES, "FTI_Init");
  CHECK(FTI_Status() == 0, "a fresh job has nothing to recover");
  CHECK(FTI_Protect(0, (void *)(uintptr_t)dev, kCount, FTI_DBLE) == FTI_SCES, "FTI_Protect (device)");
  CHECK(FTI_Protect(1, managed, kCount, FTI_DBLE) == FTI_SCES, "FTI_Protect (managed)");
  CHECK(FTI_Checkpoint(1, FTI_L1) == FTI_DONE, "FTI_Checkpoint");
  CHECK(FTI_Finalize() == FTI_SCES, "FTI_Finalize");

  memset(back, 0, bytes);
  CHECK(htod(dev, back, bytes) == 0, "clobbering the device memory");
  memset(managed, 0, bytes);

  CHECK(FTI_Init(argv[2], MPI_COMM_WORLD) == FTI_SCES, "FTI_Init (restart)");
  CHECK(FTI_Status() == 1, "the restart finds the checkpoint");
  CHECK(FTI_Protect(0, (void *)(uintptr_t)dev, kCount, FTI_DBLE) == FTI_SCES, "FTI_Protect (device)");
  CHECK(FTI_Protect(1, managed, kCount, FTI_DBLE) == FTI_SCES, "FTI_Protect (managed)");
  CHECK(FTI_GetStoredSize(0) == (int64_t)bytes, "FTI_GetStoredSize");
  CHECK(FTI_Recover() == FTI_SCES, "FTI_Recover");
  CHECK(dtoh(back, dev, bytes) == 0, "cuMemcpyDtoH");
  CHECK(memcmp(back, host, bytes) == 0, "the device memory came back");
  for (int i = 0; i < kCount; ++i) CHECK(managed[i] == -host[i], "managed element %d", i);
  CHECK(FTI_Finalize() == FTI_SCES, "FTI_Finalize");
  if (rank == 0) printf("PASS fti_device\n");
  free(host);
  free(back);
  MPI_Finalize();
  return 0;
}
