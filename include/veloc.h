/* VELOC's public C API (VELOC's include/veloc.h), implemented by
 * libcairn_veloc over Cairn: link with -lcairn_veloc instead of VELOC's
 * library. The declarations are VELOC's, unchanged; what each call does under
 * Cairn, and where it differs from VELOC, is in docs/veloc.md.
 *
 * Every function returns VELOC_SUCCESS or VELOC_FAILURE (VELOC_Restart_test:
 * a version, or VELOC_FAILURE; VELOC_Recover_size: a size, or -1); the reason
 * for a failure is printed on stderr, prefixed "VELOC (Cairn):". The calls
 * are not thread-safe (neither are VELOC's): call them from one thread.
 */
#ifndef __VELOC_H
#define __VELOC_H

#include "veloc/defs.h"

#include <string.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Init / Finalize. VELOC_Init is collective over comm; VELOC_Init_single
 * opens a process on its own, id naming it. cfg_file: VELOC's key = value
 * file (scratch, persistent, mode, max_versions, ...; docs/veloc.md). */
int VELOC_Init(MPI_Comm comm, const char *cfg_file);
int VELOC_Init_single(unsigned int id, const char *cfg_file);
int VELOC_Finalize(int cleanup);

/* Memory registration: region id = count * base_size bytes at ptr
 * (count = 0 unregisters it). The Region_ forms register in the group of
 * checkpoint `name`: a checkpoint (and restart) of a name that has regions of
 * its own uses those, any other the default group (the Mem_ forms).
 * Mem_clear / Region_clear drop every region of the group. */
int VELOC_Mem_protect(int id, void *ptr, size_t count, size_t base_size);
int VELOC_Region_protect(int id, void *ptr, size_t count, size_t base_size, const char *name);
int VELOC_Mem_unprotect(int id);
int VELOC_Region_unprotect(int id, const char *name);
int VELOC_Mem_clear();
int VELOC_Region_clear(const char *name);

/* File registration: within a checkpoint or restart phase, the path under
 * which to write (or read) the file `original` of the current checkpoint.
 * routed must hold VELOC_MAX_NAME characters. */
int VELOC_Route_file(const char *original, char *routed);

/* Deleting the scratch copies of checkpoint `name`: not supported (Cairn's
 * retention, max_versions, deletes old versions); returns VELOC_FAILURE. */
int VELOC_Cleanup(const char *name);

/* Checkpoint routines. */
int VELOC_Checkpoint_begin(const char *name, int version);
int VELOC_Checkpoint_selective(int mode, int *ids, int id_count);
int VELOC_Checkpoint_mem();
int VELOC_Checkpoint_end(int success);
int VELOC_Checkpoint_wait();
int VELOC_Checkpoint_finished();
int VELOC_Backend_ready();
int VELOC_Checkpoint(const char *name, int version);

/* Restart routines. */
int VELOC_Restart_test(const char *name, int version);
int VELOC_Restart_begin(const char *name, int version);
int VELOC_Recover_selective(int mode, int *ids, int id_count);
int VELOC_Recover_size(int id);
int VELOC_Recover_mem();
int VELOC_Restart_end(int success);
int VELOC_Restart(const char *name, int version);

#ifdef __cplusplus
}
#endif

#endif /* __VELOC_H */
