!> Cairn Fortran binding: module `cairn` (`use cairn`).
!>
!> A thin layer over the C API in include/cairn/cairn.h, written with
!> iso_c_binding (Fortran 2008; gfortran >= 9 for is_contiguous).
!> Every routine but cairn_strerror and cairn_last_error is a function
!> returning an integer(c_int) error code: CAIRN_OK (0) on success or a
!> negative CAIRN_ERR_* value. Nothing stops the program; cairn_strerror(ierr) names a code and cairn_last_error() gives the
!> detailed message of this thread's last failed call.
!>
!> Conventions:
!>  * handles are the derived types cairn_client and cairn_history (a type(c_ptr)
!>    inside; null until opened and again after closing);
!>  * region ids are integer(c_int); versions and steps are integer(c_int64_t)
!>    (write 3_c_int64_t or int(n, c_int64_t));
!>  * checkpoint and history names are Fortran strings; trailing blanks are
!>    removed before the name is passed to C (so a blank-padded character
!>    variable works);
!>  * arrays: cairn_protect, cairn_history_push and cairn_history_pop are
!>    generic over real(c_float), real(c_double), integer(c_int32_t) and
!>    integer(c_int64_t) arrays of rank 1 to 3. The array must be contiguous
!>    (CAIRN_ERR_INVALID_ARGUMENT otherwise: a non-contiguous section would be
!>    copied into a temporary). Anything else (other types, derived types,
!>    rank > 3, scalars) goes through the *_ptr variants, which take a
!>    type(c_ptr) and a byte count (c_loc(x), c_sizeof(x) or
!>    size(x, kind=c_size_t) * storage_size(x) / 8).
!>  * a protected array must keep its storage until cairn_unprotect or
!>    cairn_close, and should have the TARGET attribute (or be a pointer or an
!>    allocatable target): cairn_restore writes into it behind the compiler's
!>    back.
module cairn
  use, intrinsic :: iso_c_binding, only: c_associated, c_char, c_double, c_f_pointer, c_float, &
      c_int, c_int32_t, c_int64_t, c_loc, c_null_char, c_null_ptr, c_ptr, c_size_t, c_sizeof
  implicit none
  private

  ! Error codes (CAIRN_OK, CAIRN_ERR_*) and type(cairn_stats_t), generated from
  ! include/cairn/cairn_errors.def and cairn_stats.def.
  include 'cairn_generated.inc'

  ! Durability levels for cairn_wait (cairn_level_t).
  integer(c_int), parameter, public :: CAIRN_LEVEL_CACHE = 0      !< captured into the host cache
  integer(c_int), parameter, public :: CAIRN_LEVEL_LOCAL = 1      !< committed to the local (scratch) directory
  integer(c_int), parameter, public :: CAIRN_LEVEL_PERSISTENT = 2 !< committed to the persistent directory

  !> The index under which the thread that called cairn_checkpoint is recorded
  !> (cairn_restore_affinity).
  integer(c_int), parameter, public :: CAIRN_CHECKPOINTING_THREAD = -1

  !> A client (cairn_client_t *). Null until cairn_open, and after cairn_close.
  type, public :: cairn_client
    type(c_ptr) :: ptr = c_null_ptr
  end type cairn_client

  !> An adjoint history (cairn_history_t *). Null until cairn_history_open,
  !> and after cairn_history_close.
  type, public :: cairn_history
    type(c_ptr) :: ptr = c_null_ptr
  end type cairn_history

  public :: cairn_open, cairn_close, cairn_protect, cairn_protect_ptr, cairn_unprotect
  public :: cairn_checkpoint, cairn_wait, cairn_latest, cairn_restore, cairn_stats
  public :: cairn_restore_latest, cairn_register_thread, cairn_restore_affinity
  public :: cairn_restore_begin, cairn_restore_end
  public :: cairn_checkpoint_due
  public :: cairn_history_open, cairn_history_push, cairn_history_push_ptr
  public :: cairn_history_pop, cairn_history_pop_ptr, cairn_history_close
  public :: cairn_strerror, cairn_last_error
  public :: cairn_alloc, cairn_free
  public :: cairn_c_chars

  ! The C API (include/cairn/cairn.h): the bind(C) interfaces the wrappers
  ! below call.
  include 'cairn_c_api.inc'

  !> cairn_protect(client, id, array) - register the contiguous array as region
  !> id (re-registering an id replaces it). Generic over real(c_float),
  !> real(c_double), integer(c_int32_t), integer(c_int64_t), ranks 1 to 3.
  !> The array must stay allocated until cairn_unprotect or cairn_close.
  !> CAIRN_ERR_INVALID_ARGUMENT if the array is not contiguous.
  !>
  !> cairn_history_push(history, step, array) - copy the contiguous array as
  !> step (>= 0) of the history; returns once copied. Same kinds and ranks as
  !> cairn_protect.
  !>
  !> cairn_history_pop(history, step, array [, bytes]) - copy step into the
  !> contiguous array (its size is the capacity), consume it and return its
  !> size in bytes (optional integer(c_int64_t)). Prefetches the next lower
  !> steps. CAIRN_ERR_SIZE_MISMATCH if the array is too small (the step is then
  !> not consumed). Same kinds and ranks as cairn_protect.
  !> (The interface blocks, one specific per kind and rank, are generated.)
  include 'cairn_array_interfaces.inc'

contains

  ! Helpers ------------------------------------------------------------------

  !> Fortran string -> NUL-terminated C string (trailing blanks removed).
  pure function to_c(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=:), allocatable :: c
    c = trim(s) // c_null_char
  end function to_c

  !> Fortran string -> NUL-terminated array of C characters (trailing blanks
  !> removed), for C arguments passed with c_loc: a deferred-length scalar
  !> cannot be a c_loc target portably, an array with the TARGET attribute can.
  pure function cairn_c_chars(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char), allocatable :: c(:)
    integer :: i, n
    n = len_trim(s)
    allocate (c(n + 1))
    do i = 1, n
      c(i) = s(i:i)
    end do
    c(n + 1) = c_null_char
  end function cairn_c_chars

  !> NUL-terminated C string -> Fortran string ("" for a null pointer).
  function from_c(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = c_strlen(p)
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function from_c

  ! Client -------------------------------------------------------------------

  !> cairn_open - open a client.
  !> config_path (optional): a TOML file; absent means built-in defaults.
  !> CAIRN_* environment variables override both (docs/config.md).
  !> On success client holds the new client; on error it is null.
  function cairn_open(client, config_path) result(ierr)
    type(cairn_client), intent(out) :: client
    character(len=*), intent(in), optional :: config_path
    integer(c_int) :: ierr
    character(kind=c_char), allocatable, target :: path(:)
    if (present(config_path)) then
      path = cairn_c_chars(config_path)
      ierr = c_cairn_open(c_loc(path), client%ptr)
    else
      ierr = c_cairn_open(c_null_ptr, client%ptr)
    end if
    if (ierr /= CAIRN_OK) client%ptr = c_null_ptr
  end function cairn_open

  !> cairn_close - drain pending flushes, join background threads and free
  !> the client. Returns the first unreported flush error. The client is freed
  !> (and set to null) even on error; closing a null client is a no-op.
  !> Close every history of the client first.
  function cairn_close(client) result(ierr)
    type(cairn_client), intent(inout) :: client
    integer(c_int) :: ierr
    ierr = c_cairn_close(client%ptr)
    client%ptr = c_null_ptr
  end function cairn_close

  !> cairn_protect_ptr - register region id at [ptr, ptr+bytes): the
  !> escape hatch for data the generic cairn_protect does not cover, e.g.
  !> cairn_protect_ptr(client, 7, c_loc(state), c_sizeof(state)).
  function cairn_protect_ptr(client, id, ptr, bytes) result(ierr)
    type(cairn_client), intent(in) :: client
    integer(c_int), intent(in) :: id
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: bytes
    integer(c_int) :: ierr
    ierr = c_cairn_protect(client%ptr, id, ptr, bytes)
  end function cairn_protect_ptr

  !> cairn_unprotect - forget region id. CAIRN_ERR_NOT_FOUND if unknown.
  function cairn_unprotect(client, id) result(ierr)
    type(cairn_client), intent(in) :: client
    integer(c_int), intent(in) :: id
    integer(c_int) :: ierr
    ierr = c_cairn_unprotect(client%ptr, id)
  end function cairn_unprotect

  !> cairn_checkpoint - capture all protected regions as version (>= 0) of
  !> name. Returns once the data is in the host cache; flushing continues in
  !> the background. Names: 1-128 characters, no '/', no "..", no control
  !> characters (CAIRN_ERR_INVALID_ARGUMENT otherwise).
  function cairn_checkpoint(client, name, version) result(ierr)
    type(cairn_client), intent(in) :: client
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: version
    integer(c_int) :: ierr
    ierr = c_cairn_checkpoint(client%ptr, to_c(name), version)
  end function cairn_checkpoint

  !> cairn_wait - block until version of name is durable at level
  !> (CAIRN_LEVEL_CACHE, CAIRN_LEVEL_LOCAL or CAIRN_LEVEL_PERSISTENT); reports
  !> a failed flush as its error code.
  function cairn_wait(client, name, version, level) result(ierr)
    type(cairn_client), intent(in) :: client
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: version
    integer(c_int), intent(in) :: level
    integer(c_int) :: ierr
    ierr = c_cairn_wait(client%ptr, to_c(name), version, level)
  end function cairn_wait

  !> cairn_checkpoint_due - due is .true. if a checkpoint of name is due
  !> under the optimal interval sqrt(2 C (MTBF - R)) (docs/design.md, "When
  !> to checkpoint"): before the client's first checkpoint of name, then once
  !> the interval has passed since the last one. CAIRN_ERR_CONFIG (due =
  !> .false.) when checkpoint.mtbf_s (CAIRN_MTBF) is not set. Collective on a
  !> client opened with cairn_open_mpi.
  function cairn_checkpoint_due(client, name, due) result(ierr)
    type(cairn_client), intent(in) :: client
    character(len=*), intent(in) :: name
    logical, intent(out) :: due
    integer(c_int) :: ierr
    integer(c_int) :: d
    d = 0
    ierr = c_cairn_checkpoint_due(client%ptr, to_c(name), d)
    due = ierr == CAIRN_OK .and. d /= 0
  end function cairn_checkpoint_due

  !> cairn_latest - newest committed version of name whose file's structure
  !> checks out (header, footer, tables and their CRCs; such damage is
  !> skipped). The data is not read: the restore verifies it.
  !> CAIRN_ERR_NOT_FOUND if none; version is then -1.
  function cairn_latest(client, name, version) result(ierr)
    type(cairn_client), intent(in) :: client
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(out) :: version
    integer(c_int) :: ierr
    integer(c_int64_t) :: v
    v = -1
    ierr = c_cairn_latest(client%ptr, to_c(name), v)
    version = -1
    if (ierr == CAIRN_OK) version = v
  end function cairn_latest

  !> cairn_restore - copy version of name into the protected regions,
  !> verifying checksums. CAIRN_ERR_CORRUPT if damaged (fall back with
  !> cairn_latest), CAIRN_ERR_SIZE_MISMATCH if a region's size differs.
  function cairn_restore(client, name, version) result(ierr)
    type(cairn_client), intent(in) :: client
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: version
    integer(c_int) :: ierr
    ierr = c_cairn_restore(client%ptr, to_c(name), version)
  end function cairn_restore

  !> cairn_restore_latest - the restart in one pass: restore the newest
  !> committed version of name that verifies into the protected regions and
  !> return its number in version (-1 on error), reading each byte once. A
  !> version found damaged part-way has already overwritten part of the
  !> regions: the next older one is restored into them, and so on; on success
  !> they hold exactly that version. CAIRN_ERR_NOT_FOUND when there is no
  !> committed version or none verifies (regions then hold partial data).
  function cairn_restore_latest(client, name, version) result(ierr)
    type(cairn_client), intent(in) :: client
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(out) :: version
    integer(c_int) :: ierr
    integer(c_int64_t) :: v
    v = -1
    ierr = c_cairn_restore_latest(client%ptr, to_c(name), v)
    version = -1
    if (ierr == CAIRN_OK) version = v
  end function cairn_restore_latest

  !> cairn_register_thread - remember the calling thread under index (>= 0,
  !> e.g. omp_get_thread_num()) so that later checkpoints record its CPU
  !> affinity (docs/design.md, "Placement"); registering an index again
  !> replaces its thread. CAIRN_ERR_INVALID_ARGUMENT for a negative index.
  function cairn_register_thread(client, index) result(ierr)
    type(cairn_client), intent(in) :: client
    integer(c_int), intent(in) :: index
    integer(c_int) :: ierr
    ierr = c_cairn_register_thread(client%ptr, index)
  end function cairn_register_thread

  !> cairn_restore_affinity - set the calling thread's CPU affinity to the one
  !> recorded under index (CAIRN_CHECKPOINTING_THREAD or a registered index)
  !> in the version last restored by this client; CPUs this machine lacks
  !> are wrapped around its CPUs. A no-op with restart.placement = keep.
  !> CAIRN_ERR_STATE if no version with a placement record was restored,
  !> CAIRN_ERR_NOT_FOUND if the version recorded no such index.
  function cairn_restore_affinity(client, index) result(ierr)
    type(cairn_client), intent(in) :: client
    integer(c_int), intent(in) :: index
    integer(c_int) :: ierr
    ierr = c_cairn_restore_affinity(client%ptr, index)
  end function cairn_restore_affinity

  !> cairn_restore_begin / cairn_restore_end - bracket a restore made of
  !> several calls: in between, the host cache's background preparation
  !> pauses, as inside each cairn_restore. They nest. cairn_restore_end with
  !> none begun is CAIRN_ERR_STATE; cairn_close ends those left open.
  function cairn_restore_begin(client) result(ierr)
    type(cairn_client), intent(in) :: client
    integer(c_int) :: ierr
    ierr = c_cairn_restore_begin(client%ptr)
  end function cairn_restore_begin

  function cairn_restore_end(client) result(ierr)
    type(cairn_client), intent(in) :: client
    integer(c_int) :: ierr
    ierr = c_cairn_restore_end(client%ptr)
  end function cairn_restore_end

  !> cairn_stats - snapshot of the client's pipeline statistics.
  function cairn_stats(client, stats) result(ierr)
    type(cairn_client), intent(in) :: client
    type(cairn_stats_t), intent(out) :: stats
    integer(c_int) :: ierr
    stats%size = c_sizeof(stats)
    ierr = c_cairn_stats(client%ptr, stats)
  end function cairn_stats

  ! History ------------------------------------------------------------------

  !> cairn_history_open - open the adjoint history name of client
  !> (ephemeral by default). On error history is null.
  function cairn_history_open(client, name, history) result(ierr)
    type(cairn_client), intent(in) :: client
    character(len=*), intent(in) :: name
    type(cairn_history), intent(out) :: history
    integer(c_int) :: ierr
    ierr = c_cairn_history_open(client%ptr, to_c(name), history%ptr)
    if (ierr /= CAIRN_OK) history%ptr = c_null_ptr
  end function cairn_history_open

  !> cairn_history_push_ptr - copy bytes at ptr as step (>= 0); returns once
  !> copied. The generic cairn_history_push covers ordinary arrays.
  function cairn_history_push_ptr(history, step, ptr, bytes) result(ierr)
    type(cairn_history), intent(in) :: history
    integer(c_int64_t), intent(in) :: step
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: bytes
    integer(c_int) :: ierr
    ierr = c_cairn_history_push(history%ptr, step, ptr, bytes)
  end function cairn_history_push_ptr

  !> cairn_history_pop_ptr - copy step into [ptr, ptr+capacity), consume it
  !> and return its size in bytes (optional). Prefetches the next lower steps.
  !> CAIRN_ERR_SIZE_MISMATCH if capacity is too small (the step is then not
  !> consumed). The generic cairn_history_pop covers ordinary arrays.
  function cairn_history_pop_ptr(history, step, ptr, capacity, bytes) result(ierr)
    type(cairn_history), intent(in) :: history
    integer(c_int64_t), intent(in) :: step
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: capacity
    integer(c_int64_t), intent(out), optional :: bytes
    integer(c_int) :: ierr
    integer(c_size_t) :: got
    got = 0
    ierr = c_cairn_history_pop(history%ptr, step, ptr, capacity, got)
    if (present(bytes)) bytes = int(got, c_int64_t)
  end function cairn_history_pop_ptr

  !> cairn_history_close - drop the remaining steps and free the history
  !> (set to null, even on error). Closing a null history is a no-op.
  function cairn_history_close(history) result(ierr)
    type(cairn_history), intent(inout) :: history
    integer(c_int) :: ierr
    ierr = c_cairn_history_close(history%ptr)
    history%ptr = c_null_ptr
  end function cairn_history_close

  ! Tracked memory -----------------------------------------------------------

  !> cairn_alloc - page-aligned, zero-filled memory that
  !> checkpoint.changes = pages can track (cairn.h has the contract). Use it
  !> through c_f_pointer, e.g.
  !>   ierr = cairn_alloc(int(n, c_size_t) * 8, p); call c_f_pointer(p, u, [n])
  !> and protect u as usual. ptr is null on error.
  function cairn_alloc(bytes, ptr) result(ierr)
    integer(c_size_t), intent(in) :: bytes
    type(c_ptr), intent(out) :: ptr
    integer(c_int) :: ierr
    ierr = c_cairn_alloc(bytes, ptr)
  end function cairn_alloc

  !> cairn_free - release memory from cairn_alloc (ptr becomes null; a null
  !> ptr is a no-op). CAIRN_ERR_INVALID_ARGUMENT for any other pointer.
  function cairn_free(ptr) result(ierr)
    type(c_ptr), intent(inout) :: ptr
    integer(c_int) :: ierr
    ierr = c_cairn_free(ptr)
    if (ierr == CAIRN_OK) ptr = c_null_ptr
  end function cairn_free

  ! Errors -------------------------------------------------------------------

  !> cairn_strerror - description of an error code (never empty).
  function cairn_strerror(ierr) result(msg)
    integer(c_int), intent(in) :: ierr
    character(len=:), allocatable :: msg
    msg = from_c(c_cairn_strerror(ierr))
  end function cairn_strerror

  !> cairn_last_error - detailed message of this thread's last failed Cairn
  !> call ("" if none).
  function cairn_last_error() result(msg)
    character(len=:), allocatable :: msg
    msg = from_c(c_cairn_last_error())
  end function cairn_last_error

  ! The generic array procedures' specifics, one per kind and rank
  ! (generated from one template each by cairn_schema_gen).
  include 'cairn_arrays.inc'

end module cairn
