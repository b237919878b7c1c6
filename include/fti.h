/* fti.h - FTI's public C API (FTI 1.6, include/fti.h) over Cairn: libcairn_fti.
 *
 * A program written for FTI compiles unchanged against this header and links
 * with -lcairn_fti (CMake: Cairn::fti). What maps to what, what differs and
 * what is not provided: docs/fti.md. Only the functions declared here exist;
 * FTI's HDF5 datasets, staging, incremental checkpoints (ICP), FTI_RecoverVar*
 * and failure injection are not provided (a program using them does not
 * link, rather than running with a silent no-op).
 *
 * Return codes are FTI's: FTI_SCES (0) success, FTI_NSCS (-1) failure,
 * FTI_DONE (1) a checkpoint was taken, FTI_NREC (-2) recovery failed. Failures
 * print a message naming what is wrong (Cairn's own message included).
 */
#ifndef FTI_INCLUDE_FTI_H_
#define FTI_INCLUDE_FTI_H_

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(FTI_EXPORT)
#if defined(CAIRN_BUILDING_FTI) && (defined(__GNUC__) || defined(__clang__))
#define FTI_EXPORT __attribute__((visibility("default")))
#else
#define FTI_EXPORT
#endif
#endif

/** Standard size of buffer and max node size. */
#define FTI_BUFS 256
/** Word size used during RS encoding (kept for source compatibility). */
#define FTI_WORD 16
/** Token returned when FTI performs a checkpoint. */
#define FTI_DONE 1
/** Token returned if a FTI function succeeds. */
#define FTI_SCES 0
/** Token returned if a FTI function fails. */
#define FTI_NSCS -1
/** Token returned if recovery fails. */
#define FTI_NREC -2
/** Token that indicates a head process in user space (never returned here:
 * head = 1 is rejected, docs/fti.md). */
#define FTI_HEAD 2

/** Verbosity levels of the configuration's `verbosity` key. */
#define FTI_EROR 4
#define FTI_WARN 3
#define FTI_INFO 2
#define FTI_DBUG 1

/** Checkpoint levels of FTI_Checkpoint (FTIT_level). */
typedef enum {
  FTI_L1 = 1,
  FTI_L2,
  FTI_L3,
  FTI_L4,
  FTI_L1_DCP,
  FTI_L2_DCP,
  FTI_L3_DCP,
  FTI_L4_DCP,
  FTI_MIN_LEVEL_ID = FTI_L1,
  FTI_MAX_LEVEL_ID = FTI_L4_DCP
} FTIT_level;

/** Identifier of an FTI data type. */
typedef int fti_id_t;
/** FTI v1.4 and earlier data type handling compatibility. */
#define FTIT_type fti_id_t

/** HDF5 group (opaque here: the HDF5 layout is not provided). */
typedef struct FTIT_H5Group FTIT_H5Group;

#ifdef __cplusplus
extern "C" {
#endif

/** The application's communicator: a duplicate of FTI_Init's globalComm (no
 * dedicated head ranks are split off). */
FTI_EXPORT extern MPI_Comm FTI_COMM_WORLD;

/** Predefined data types. */
FTI_EXPORT extern fti_id_t FTI_CHAR;
FTI_EXPORT extern fti_id_t FTI_SHRT;
FTI_EXPORT extern fti_id_t FTI_INTG;
FTI_EXPORT extern fti_id_t FTI_LONG;
FTI_EXPORT extern fti_id_t FTI_UCHR;
FTI_EXPORT extern fti_id_t FTI_USHT;
FTI_EXPORT extern fti_id_t FTI_UINT;
FTI_EXPORT extern fti_id_t FTI_ULNG;
FTI_EXPORT extern fti_id_t FTI_SFLT;
FTI_EXPORT extern fti_id_t FTI_DBLE;
FTI_EXPORT extern fti_id_t FTI_LDBE;

/** Collective: reads the configuration file, duplicates globalComm into
 * FTI_COMM_WORLD, opens Cairn on every rank and finds out whether this is a
 * restart (a checkpoint every rank has). FTI_NSCS on a bad configuration. */
FTI_EXPORT int FTI_Init(const char *configFile, MPI_Comm globalComm);
/** 1 when FTI_Init found a checkpoint to recover and FTI_Recover has not
 * restored it yet, else 0. */
FTI_EXPORT int FTI_Status(void);
/** Registers a type of `size` bytes (treated as opaque bytes). */
FTI_EXPORT int FTI_InitType(fti_id_t *type, int size);
/** A composite type of `size` bytes (its fields only matter to HDF5, which is
 * not provided: it is stored as bytes); FTI_NSCS on error. */
FTI_EXPORT fti_id_t FTI_InitCompositeType(const char *name, size_t size, FTIT_H5Group *h5g);
FTI_EXPORT int FTI_AddScalarField(fti_id_t id, const char *name, fti_id_t fid, size_t offset);
FTI_EXPORT int FTI_AddVectorField(fti_id_t id, const char *name, fti_id_t tid, size_t offset,
                                  int ndims, int *dim_sizes);
/** Protects count elements of type tid at ptr (host, CUDA device or managed
 * memory) as dataset id; protecting an id again replaces it. */
FTI_EXPORT int FTI_Protect(int id, void *ptr, int64_t count, fti_id_t tid);
/** Bytes of dataset id in the checkpoint being recovered (after FTI_Init on a
 * restart), else its protected size; 0 if unknown. */
FTI_EXPORT int64_t FTI_GetStoredSize(int id);
/** Collective: checkpoint id of the protected datasets at level 1-4 (5-8:
 * the same levels with differential checkpointing). FTI_DONE on success. */
FTI_EXPORT int FTI_Checkpoint(int id, int level);
/** Collective: restores the newest checkpoint every rank has into the
 * protected datasets. FTI_SCES, or FTI_NREC when none can be restored. */
FTI_EXPORT int FTI_Recover(void);
/** Collective: on a restart, FTI_Recover; otherwise takes a checkpoint when
 * the configuration's interval of a level (ckpt_l1..ckpt_l4) is due.
 * FTI_DONE when it checkpointed, FTI_SCES when not due. */
FTI_EXPORT int FTI_Snapshot(void);
/** Collective: completes the checkpoints, closes Cairn (before
 * MPI_Finalize). FTI_COMM_WORLD stays valid until MPI_Finalize. */
FTI_EXPORT int FTI_Finalize(void);

#ifdef __cplusplus
}
#endif

#endif /* FTI_INCLUDE_FTI_H_ */
