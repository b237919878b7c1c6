/* Cairn for MPI jobs (libcairn_mpi; docs/mpi.md).
 *
 * cairn_open_mpi opens one client per rank of a communicator. The client is an
 * ordinary cairn_client_t: use the C API of cairn.h on it and close it with
 * cairn_close (before MPI_Finalize). What changes on such a client:
 *   - each rank uses its own subdirectory of the scratch and persistent
 *     directories (<scratch>/rank<r>; docs/format.md, 3.5);
 *   - cairn_checkpoint stays local: it never waits for other ranks;
 *   - cairn_latest, cairn_restore, cairn_restore_latest and cairn_wait are
 *     collective: every rank of the communicator calls them, in the same
 *     order, with the same name (and version, level). cairn_latest returns
 *     the newest version that every rank has committed and whose files check
 *     out on every rank; cairn_restore_latest restores it and, when it turns
 *     out damaged on any rank, all ranks fall back together to the next
 *     common version; cairn_wait returns once every rank has the version at
 *     that level. An error on one rank is an error on every rank (the others'
 *     message names the rank that failed).
 * Collective calls must not be made from two threads at once (MPI needs at
 * least MPI_THREAD_SERIALIZED for calls from several threads).
 */
#ifndef CAIRN_CAIRN_MPI_H_
#define CAIRN_CAIRN_MPI_H_

/* libcairn_mpi uses MPI's C API only: keep Open MPI's and MPICH's C++
 * bindings (removed from the standard in MPI 3.0) out of C++ translation
 * units, so that linking MPI's C library suffices. */
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "cairn/cairn.h"
#include "cairn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cairn_open_mpi - open a client on every rank of comm (collective).
 * config_path as for cairn_open (NULL: defaults, CAIRN_* environment on top);
 * each rank loads its own. comm is duplicated: Cairn's messages never mix
 * with the application's. CAIRN_MPI_RANKS_PER_NODE=k simulates nodes of k
 * ranks (node = rank / k, local directory $CAIRN_SCRATCH/node<n>); without it
 * the node comes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
 * CAIRN_ERR_CONFIG on every rank when a rank's configuration does not load or
 * the keys that must agree (docs/mpi.md) differ across ranks, naming them;
 * CAIRN_ERR_INVALID_ARGUMENT for MPI_COMM_NULL or MPI not initialized. */
CAIRN_EXPORT int cairn_open_mpi(MPI_Comm comm, const char *config_path, cairn_client_t **out);

/* cairn_open_mpi_f - cairn_open_mpi for a communicator given by its Fortran
 * handle (MPI_Fint), converted with MPI_Comm_f2c: the integer communicator of
 * `use mpi`, MPI_Comm%MPI_VAL of `use mpi_f08`, mpi4py's Comm.py2f(). For
 * bindings that do not compile against mpi.h (the Fortran module cairn_mpi,
 * Python's cairn.Client(comm=...)). CAIRN_ERR_INVALID_ARGUMENT when MPI is not
 * initialized or the handle is MPI_COMM_NULL's. */
CAIRN_EXPORT int cairn_open_mpi_f(MPI_Fint comm, const char *config_path, cairn_client_t **out);

/* For bindings that bring their own copy of the core (Python's extension
 * links it statically, docs/python.md): the communicator as a plain C object,
 * which such a binding wraps as its cairn::Group (cairn/group.hpp) and opens
 * its client in with cairn::OpenInGroup. Applications use cairn_open_mpi.
 * Errors are CAIRN_ERR_* codes with the message in cairn_last_error().
 *
 * cairn_mpi_group_open_nodes_f - collective: duplicates the communicator
 * (Fortran handle, as cairn_open_mpi_f) and finds each rank's node, real
 * (ranks_per_node 0) or simulated: the binding's mpi.ranks_per_node; -1 when
 * the binding's configuration did not load (its error is the one to agree
 * on). Before 2026-11-27 cairn_mpi_group_open_f, which read
 * CAIRN_MPI_RANKS_PER_NODE itself.
 * cairn_mpi_group_setup_error - ranks that disagree on ranks_per_node
 * (CAIRN_OK if none), for the ranks to agree on when they open.
 * cairn_mpi_group_info - info[] = {rank, size, node, simulated nodes (0/1),
 * ranks per node (0: real nodes)}, as cairn::Group's accessors.
 * cairn_mpi_group_allreduce - collective: element-wise MIN (max = 0) or MAX of
 * values[0..n), in place.
 * cairn_mpi_group_exchange - cairn::Group::Exchange: sends data[i] (bytes[i])
 * to rank to[i], receives one message from each from[j], in that order, into
 * the buffer receive(ctx, j, size) returns.
 * cairn_mpi_group_free - frees the communicator (NULL: nothing). */
typedef struct cairn_mpi_group cairn_mpi_group_t;
CAIRN_EXPORT int cairn_mpi_group_open_nodes_f(MPI_Fint comm, int ranks_per_node, cairn_mpi_group_t **out);
CAIRN_EXPORT int cairn_mpi_group_setup_error(const cairn_mpi_group_t *g);
CAIRN_EXPORT void cairn_mpi_group_info(const cairn_mpi_group_t *g, int info[5]);
CAIRN_EXPORT int cairn_mpi_group_allreduce(cairn_mpi_group_t *g, int max, int64_t *values, size_t n);
CAIRN_EXPORT int cairn_mpi_group_exchange(cairn_mpi_group_t *g, size_t nsends, const int *to,
                                          const void *const *data, const size_t *bytes, size_t nfrom,
                                          const int *from,
                                          void *(*receive)(void *ctx, size_t i, size_t bytes),
                                          void *ctx);
CAIRN_EXPORT void cairn_mpi_group_free(cairn_mpi_group_t *g);

/* Restarting on another number of ranks (docs/mpi.md; docs/format.md 3.7).
 * A job of any size (or a lone process with cairn_open) reads the files of
 * the job that saved `name` under the same storage roots: any rank can read
 * any saved rank's regions of a version that was globally committed.
 *
 * cairn_saved_ranks - collective on an MPI client: checks that every saved
 * rank 0 .. N-1 has `version` globally committed and its file intact
 * (structure; data is verified when read), and stores N in *nranks.
 * CAIRN_ERR_NOT_FOUND naming the first saved rank that lacks it, or when no
 * job saved `name`.
 * cairn_saved_latest - collective: the newest version cairn_saved_ranks
 * accepts (*version) and N (*nranks). CAIRN_ERR_NOT_FOUND when there is none.
 * cairn_saved_region_size - local: the size in bytes of region `region` of
 * saved rank `saved_rank`'s version.
 * cairn_read_saved_region - local: copies bytes [offset, offset + bytes) of
 * that region into host memory dst, verifying every block's CRC (falling back
 * from the local to the persistent directory on damage). A 1-D redistribution
 * reads, from each old rank whose slice overlaps its new one, the overlap.
 * Errors of both: CAIRN_ERR_INVALID_ARGUMENT for saved_rank outside 0 .. N-1,
 * a region id the version lacks or a range past the region's end;
 * CAIRN_ERR_NOT_FOUND for a version that is not globally committed (or not
 * there); CAIRN_ERR_CORRUPT when no copy verifies. */
CAIRN_EXPORT int cairn_saved_ranks(cairn_client_t *c, const char *name, int64_t version,
                                   int *nranks);
CAIRN_EXPORT int cairn_saved_latest(cairn_client_t *c, const char *name, int64_t *version,
                                    int *nranks);
CAIRN_EXPORT int cairn_saved_region_size(cairn_client_t *c, const char *name, int64_t version,
                                         int saved_rank, int region, size_t *bytes);
CAIRN_EXPORT int cairn_read_saved_region(cairn_client_t *c, const char *name, int64_t version,
                                         int saved_rank, int region, size_t offset, void *dst,
                                         size_t bytes);

#ifdef __cplusplus
}  /* extern "C" */

#include <memory>

#include "cairn/cairn.hpp"

namespace cairn {

/* The C++ form of cairn_open_mpi: a Client whose Latest, Restore,
 * RestoreLatest and Wait (and SavedRanks, SavedLatest) are collective over
 * comm. Collective. The saved-job calls are Client methods (cairn.hpp). */
CAIRN_EXPORT Result<std::unique_ptr<Client>> OpenMpi(MPI_Comm comm, const char* config_path);
/* The same with a configuration the caller built (libcairn_veloc reads
 * VELOC's configuration file into one): each rank's own Config, or the error
 * building it gave, which then fails the open on every rank. Collective. */
CAIRN_EXPORT Result<std::unique_ptr<Client>> OpenMpi(MPI_Comm comm, Result<Config> config);

}  // namespace cairn
#endif

#endif /* CAIRN_CAIRN_MPI_H_ */
