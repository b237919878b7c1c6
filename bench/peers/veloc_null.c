/* A VELOC that checkpoints nothing: every call succeeds at once and a restart
 * finds no checkpoint. veloc_side_by_side.sh links the unchanged heat program
 * against it for the run "without checkpoints" that both peers' overheads are
 * measured against (same binary code, same MPI, only the library differs). */
#include <stddef.h>
#include <string.h>

#include "include/veloc.h"

int VELOC_Init(MPI_Comm comm, const char *cfg_file) { (void)comm; (void)cfg_file; return VELOC_SUCCESS; }
int VELOC_Init_single(unsigned int id, const char *cfg_file) { (void)id; (void)cfg_file; return VELOC_SUCCESS; }
int VELOC_Finalize(int drain) { (void)drain; return VELOC_SUCCESS; }
int VELOC_Mem_protect(int id, void *ptr, size_t count, size_t base_size) {
  (void)id; (void)ptr; (void)count; (void)base_size;
  return VELOC_SUCCESS;
}
int VELOC_Mem_unprotect(int id) { (void)id; return VELOC_SUCCESS; }
int VELOC_Mem_clear(void) { return VELOC_SUCCESS; }
int VELOC_Route_file(const char *original, char *routed) { strcpy(routed, original); return VELOC_SUCCESS; }
int VELOC_Cleanup(const char *name) { (void)name; return VELOC_SUCCESS; }
int VELOC_Checkpoint_begin(const char *name, int version) { (void)name; (void)version; return VELOC_SUCCESS; }
int VELOC_Checkpoint_mem(void) { return VELOC_SUCCESS; }
int VELOC_Checkpoint_end(int success) { (void)success; return VELOC_SUCCESS; }
int VELOC_Checkpoint_wait(void) { return VELOC_SUCCESS; }
int VELOC_Checkpoint_finished(void) { return VELOC_SUCCESS; }
int VELOC_Checkpoint(const char *name, int version) { (void)name; (void)version; return VELOC_SUCCESS; }
int VELOC_Restart_test(const char *name, int version) { (void)name; (void)version; return VELOC_FAILURE; }
int VELOC_Restart_begin(const char *name, int version) { (void)name; (void)version; return VELOC_FAILURE; }
int VELOC_Recover_mem(void) { return VELOC_FAILURE; }
int VELOC_Restart_end(int success) { (void)success; return VELOC_SUCCESS; }
int VELOC_Restart(const char *name, int version) { (void)name; (void)version; return VELOC_FAILURE; }
