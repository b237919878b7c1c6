/* The C functions under VELOC's Fortran module (module veloc,
 * src/compat/veloc/veloc.f90), with the names and arguments of VELOC's own
 * src/fortran/velocf.h: libcairn_veloc exports them (veloc.map), so that
 * Cairn's module and VELOC's own module source both link against it. Not
 * installed: a Fortran program reaches them only through a module. */
#ifndef CAIRN_COMPAT_VELOCF_H_
#define CAIRN_COMPAT_VELOCF_H_

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

int VELOC_Init_fort_wrapper(MPI_Fint *comm, const char *cfg_file);
int VELOC_Mem_protect_wrapper(int id, void *ptr, long count, long base_size);
int VELOC_Checkpoint_begin_wrapper(const char *name, int version);
int VELOC_Checkpoint_wrapper(const char *name, int version);
int VELOC_Restart_test_wrapper(const char *name, int needed_version);
int VELOC_Restart_begin_wrapper(const char *name, int version);
int VELOC_Restart_wrapper(const char *name, int version);
int VELOC_Route_file_wrapper(const char *original, char *routed);

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_COMPAT_VELOCF_H_ */
