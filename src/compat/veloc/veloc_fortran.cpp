// The C side of VELOC's Fortran module (src/compat/veloc/velocf.h, docs/veloc.md
// "Fortran"): VELOC's wrapper names over veloc.h's functions. The module
// passes the communicator as its Fortran handle, and counts as C long (a
// negative one is refused here, before it would become a huge size_t).
#include <cstdio>

#pragma GCC visibility push(default)
#include "compat/veloc/velocf.h"
#include "veloc.h"
#pragma GCC visibility pop

int VELOC_Init_fort_wrapper(MPI_Fint* comm, const char* cfg_file) {
  if (comm == nullptr) {
    std::fprintf(stderr, "VELOC (Cairn): VELOC_Init: the communicator is NULL\n");
    return VELOC_FAILURE;
  }
  return VELOC_Init(MPI_Comm_f2c(*comm), cfg_file);
}

int VELOC_Mem_protect_wrapper(int id, void* ptr, long count, long base_size) {
  if (count < 0 || base_size < 0) {
    std::fprintf(stderr, "VELOC (Cairn): VELOC_Mem_protect: region %d: negative %s (%ld)\n", id,
                 count < 0 ? "count" : "base size", count < 0 ? count : base_size);
    return VELOC_FAILURE;
  }
  return VELOC_Mem_protect(id, ptr, static_cast<size_t>(count), static_cast<size_t>(base_size));
}

int VELOC_Checkpoint_begin_wrapper(const char* name, int version) { return VELOC_Checkpoint_begin(name, version); }

int VELOC_Checkpoint_wrapper(const char* name, int version) { return VELOC_Checkpoint(name, version); }

int VELOC_Restart_test_wrapper(const char* name, int needed_version) { return VELOC_Restart_test(name, needed_version); }

int VELOC_Restart_begin_wrapper(const char* name, int version) { return VELOC_Restart_begin(name, version); }

int VELOC_Restart_wrapper(const char* name, int version) { return VELOC_Restart(name, version); }

// routed: VELOC_MAX_NAME characters, as for VELOC_Route_file.
int VELOC_Route_file_wrapper(const char* original, char* routed) { return VELOC_Route_file(original, routed); }
