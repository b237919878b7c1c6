! Module FTI: FTI's Fortran interface (FTI's src/fortran/interface.F90.bpp:
! `use fti`, FTI_Init(config_file, global_comm, err) returning FTI_COMM_WORLD
! in global_comm, FTI_Protect(id, data, err) on POINTER scalars and arrays of
! rank 1-7) over libcairn_fti's C API (docs/fti.md, "Fortran").
!
! FTI generates one FTI_Protect procedure per type and rank with bpp; here
! each type has one, over an assumed-rank pointer (Fortran 2018, data(..):
! rank 0-15 in one procedure). Types: INTEGER4, INTEGER8, REAL4, REAL8 (FTI
! also has the 1- and 2-byte integers, LOGICAL, COMPLEX, REAL16 and
! CHARACTER1; FTI_Protect_Ptr with FTI_InitType covers those).
module fti
  use, intrinsic :: iso_c_binding
  implicit none
  private

  !> An FTI data type (FTI_InitType; the predefined ones below).
  type, public :: FTI_type
    integer(c_int), private :: id = -1
  end type FTI_type

  integer, parameter, public :: FTI_SCES = 0   !< success
  integer, parameter, public :: FTI_NSCS = -1  !< failure
  integer, parameter, public :: FTI_DONE = 1   !< a checkpoint was taken
  integer, parameter, public :: FTI_NREC = -2  !< recovery failed

  type(FTI_type), public, save :: FTI_INTEGER4
  type(FTI_type), public, save :: FTI_INTEGER8
  type(FTI_type), public, save :: FTI_REAL4
  type(FTI_type), public, save :: FTI_REAL8

  public :: FTI_Init, FTI_Status, FTI_InitType, FTI_Protect, FTI_Checkpoint, FTI_Recover, &
            FTI_Snapshot, FTI_Finalize, FTI_GetStoredSize, FTI_Realloc, FTI_RecoverVarInit, &
            FTI_RecoverVar, FTI_RecoverVarFinalize

  interface
    function c_init(config, comm) bind(C, name="FTI_Init_fort_wrapper") result(r)
      import :: c_char, c_int
      character(kind=c_char), intent(in) :: config(*)
      integer(c_int), intent(inout) :: comm
      integer(c_int) :: r
    end function c_init
    function c_status() bind(C, name="FTI_Status") result(r)
      import :: c_int
      integer(c_int) :: r
    end function c_status
    function c_init_type(t, bytes) bind(C, name="FTI_InitType") result(r)
      import :: c_int
      integer(c_int), intent(out) :: t
      integer(c_int), value :: bytes
      integer(c_int) :: r
    end function c_init_type
    function c_protect(id, ptr, count, t) bind(C, name="FTI_Protect") result(r)
      import :: c_int, c_ptr, c_int64_t
      integer(c_int), value :: id
      type(c_ptr), value :: ptr
      integer(c_int64_t), value :: count
      integer(c_int), value :: t
      integer(c_int) :: r
    end function c_protect
    function c_stored_size(id) bind(C, name="FTI_GetStoredSize") result(r)
      import :: c_int, c_int64_t
      integer(c_int), value :: id
      integer(c_int64_t) :: r
    end function c_stored_size
    function c_checkpoint(id, level) bind(C, name="FTI_Checkpoint") result(r)
      import :: c_int
      integer(c_int), value :: id, level
      integer(c_int) :: r
    end function c_checkpoint
    function c_recover() bind(C, name="FTI_Recover") result(r)
      import :: c_int
      integer(c_int) :: r
    end function c_recover
    function c_snapshot() bind(C, name="FTI_Snapshot") result(r)
      import :: c_int
      integer(c_int) :: r
    end function c_snapshot
    function c_finalize() bind(C, name="FTI_Finalize") result(r)
      import :: c_int
      integer(c_int) :: r
    end function c_finalize
    function c_realloc(id, ptr, bytes) bind(C, name="FTI_Realloc_fort_wrapper") result(r)
      import :: c_int, c_ptr, c_int64_t
      integer(c_int), value :: id
      type(c_ptr), intent(inout) :: ptr
      integer(c_int64_t), intent(out) :: bytes
      integer(c_int) :: r
    end function c_realloc
    function c_recover_var_init() bind(C, name="FTI_RecoverVarInit") result(r)
      import :: c_int
      integer(c_int) :: r
    end function c_recover_var_init
    function c_recover_var(id) bind(C, name="FTI_RecoverVar") result(r)
      import :: c_int
      integer(c_int), value :: id
      integer(c_int) :: r
    end function c_recover_var
    function c_recover_var_finalize() bind(C, name="FTI_RecoverVarFinalize") result(r)
      import :: c_int
      integer(c_int) :: r
    end function c_recover_var_finalize
  end interface

  !> FTI_Realloc(id, data, err) on a restart: data (a POINTER scalar or rank-1
  !> array allocated with ALLOCATE, protected as dataset id) is reallocated to
  !> the dataset's stored size and points to the new memory (a rank-1 array
  !> gets the stored element count); or FTI_Realloc(id, c_ptr, err).
  !> err = FTI_NSCS when nothing was reallocated (as FTI: not a restart, an
  !> unknown id, ...; data is unchanged then) or for arrays of rank >= 2 (use
  !> the c_ptr form).
  interface FTI_Realloc
    module procedure FTI_Realloc_Ptr
    module procedure FTI_Realloc_INTEGER4
    module procedure FTI_Realloc_INTEGER8
    module procedure FTI_Realloc_REAL4
    module procedure FTI_Realloc_REAL8
  end interface FTI_Realloc

  !> FTI_Protect(id, data, err): data a POINTER scalar or array (rank 1-7)
  !> whose elements are contiguous in memory (its first element's address and
  !> its size are registered, as FTI does); or FTI_Protect(id, c_ptr, count,
  !> type, err).
  interface FTI_Protect
    module procedure FTI_Protect_Ptr
    module procedure FTI_Protect_INTEGER4
    module procedure FTI_Protect_INTEGER8
    module procedure FTI_Protect_REAL4
    module procedure FTI_Protect_REAL8
  end interface FTI_Protect

contains

  !> Collective. global_comm (integer handle) becomes FTI_COMM_WORLD's.
  subroutine FTI_Init(config_file, global_comm, err)
    character(len=*), intent(in) :: config_file
    integer, intent(inout) :: global_comm
    integer, intent(out) :: err
    integer(c_int) :: comm
    comm = int(global_comm, c_int)
    err = int(c_init(trim(config_file) // c_null_char, comm))
    if (err /= FTI_SCES) return
    global_comm = int(comm)
    call FTI_InitType(FTI_INTEGER4, 4, err)
    if (err /= FTI_SCES) return
    call FTI_InitType(FTI_INTEGER8, 8, err)
    if (err /= FTI_SCES) return
    call FTI_InitType(FTI_REAL4, 4, err)
    if (err /= FTI_SCES) return
    call FTI_InitType(FTI_REAL8, 8, err)
    if (err /= FTI_SCES) return
  end subroutine FTI_Init

  subroutine FTI_Status(status)
    integer, intent(out) :: status
    status = int(c_status())
  end subroutine FTI_Status

  subroutine FTI_InitType(type_F, size_F, err)
    type(FTI_type), intent(out) :: type_F
    integer, intent(in) :: size_F
    integer, intent(out) :: err
    err = int(c_init_type(type_F%id, int(size_F, c_int)))
  end subroutine FTI_InitType

  subroutine FTI_GetStoredSize(id_F, size)
    integer, intent(in) :: id_F
    integer(8), intent(out) :: size
    size = int(c_stored_size(int(id_F, c_int)), 8)
  end subroutine FTI_GetStoredSize

  subroutine FTI_Protect_Ptr(id_F, ptr, count_F, type_F, err)
    integer, intent(in) :: id_F
    type(c_ptr), value :: ptr
    integer, intent(in) :: count_F
    type(FTI_type), intent(in) :: type_F
    integer, intent(out) :: err
    err = int(c_protect(int(id_F, c_int), ptr, int(count_F, c_int64_t), type_F%id))
  end subroutine FTI_Protect_Ptr

  !> The first element's address and the element count, as FTI registers
  !> them: the elements must be contiguous (FTI makes the same demand).
  integer function protect_contiguous(id_F, first, count, t) result(err)
    integer, intent(in) :: id_F
    type(c_ptr), intent(in) :: first
    integer(8), intent(in) :: count
    type(FTI_type), intent(in) :: t
    err = int(c_protect(int(id_F, c_int), first, int(count, c_int64_t), t%id))
  end function protect_contiguous

  subroutine FTI_Protect_INTEGER4(id_F, data, err)
    integer, intent(in) :: id_F
    integer(4), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = protect_contiguous(id_F, c_loc(data), size(data, kind=8), FTI_INTEGER4)
  end subroutine FTI_Protect_INTEGER4

  subroutine FTI_Protect_INTEGER8(id_F, data, err)
    integer, intent(in) :: id_F
    integer(8), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = protect_contiguous(id_F, c_loc(data), size(data, kind=8), FTI_INTEGER8)
  end subroutine FTI_Protect_INTEGER8

  subroutine FTI_Protect_REAL4(id_F, data, err)
    integer, intent(in) :: id_F
    real(4), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = protect_contiguous(id_F, c_loc(data), size(data, kind=8), FTI_REAL4)
  end subroutine FTI_Protect_REAL4

  subroutine FTI_Protect_REAL8(id_F, data, err)
    integer, intent(in) :: id_F
    real(8), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = protect_contiguous(id_F, c_loc(data), size(data, kind=8), FTI_REAL8)
  end subroutine FTI_Protect_REAL8

  subroutine FTI_Checkpoint(id_F, level, err)
    integer, intent(in) :: id_F, level
    integer, intent(out) :: err
    err = int(c_checkpoint(int(id_F, c_int), int(level, c_int)))
  end subroutine FTI_Checkpoint

  subroutine FTI_Recover(err)
    integer, intent(out) :: err
    err = int(c_recover())
  end subroutine FTI_Recover

  subroutine FTI_Snapshot(err)
    integer, intent(out) :: err
    err = int(c_snapshot())
  end subroutine FTI_Snapshot

  subroutine FTI_Finalize(err)
    integer, intent(out) :: err
    err = int(c_finalize())
  end subroutine FTI_Finalize

  !> err is optional (codes call it both ways).
  subroutine FTI_RecoverVarInit(err)
    integer, intent(out), optional :: err
    integer :: e
    e = int(c_recover_var_init())
    if (present(err)) err = e
  end subroutine FTI_RecoverVarInit

  subroutine FTI_RecoverVar(id_F, err)
    integer, intent(in) :: id_F
    integer, intent(out) :: err
    err = int(c_recover_var(int(id_F, c_int)))
  end subroutine FTI_RecoverVar

  subroutine FTI_RecoverVarFinalize(err)
    integer, intent(out), optional :: err
    integer :: e
    e = int(c_recover_var_finalize())
    if (present(err)) err = e
  end subroutine FTI_RecoverVarFinalize

  subroutine FTI_Realloc_Ptr(id_F, ptr, err)
    integer, intent(in) :: id_F
    type(c_ptr), intent(inout) :: ptr
    integer, intent(out) :: err
    integer(c_int64_t) :: bytes
    err = int(c_realloc(int(id_F, c_int), ptr, bytes))
  end subroutine FTI_Realloc_Ptr

  !> Reallocates the memory at `first` (holding elements of `each` bytes) when
  !> the stored size is a whole number of them, and `want` of them if want >=
  !> 0; returns their count (-1: nothing was done) and the new address.
  function realloc_first(id_F, first, each, want, moved) result(count)
    integer, intent(in) :: id_F
    type(c_ptr), intent(in) :: first
    integer, intent(in) :: each
    integer(8), intent(in) :: want
    type(c_ptr), intent(out) :: moved
    integer(8) :: count, stored
    integer(c_int64_t) :: bytes
    count = -1
    moved = first
    stored = int(c_stored_size(int(id_F, c_int)), 8)
    if (c_status() /= 1 .or. stored <= 0 .or. mod(stored, int(each, 8)) /= 0) return
    if (want >= 0 .and. stored / each /= want) return
    if (c_realloc(int(id_F, c_int), moved, bytes) /= FTI_SCES) return
    count = int(bytes, 8) / each
  end function realloc_first

  subroutine FTI_Realloc_INTEGER4(id_F, data, err)
    integer, intent(in) :: id_F
    integer(4), pointer, intent(inout) :: data(..)
    integer, intent(out) :: err
    type(c_ptr) :: moved
    integer(8) :: n
    err = FTI_NSCS
    select rank (data)
    rank (0)
      n = realloc_first(id_F, c_loc(data), 4, 1_8, moved)
      if (n == 1) call c_f_pointer(moved, data)
    rank (1)
      n = realloc_first(id_F, c_loc(data), 4, -1_8, moved)
      if (n >= 0) call c_f_pointer(moved, data, [n])
    rank default
      n = -1
    end select
    if (n >= 0) err = FTI_SCES
  end subroutine FTI_Realloc_INTEGER4

  subroutine FTI_Realloc_INTEGER8(id_F, data, err)
    integer, intent(in) :: id_F
    integer(8), pointer, intent(inout) :: data(..)
    integer, intent(out) :: err
    type(c_ptr) :: moved
    integer(8) :: n
    err = FTI_NSCS
    select rank (data)
    rank (0)
      n = realloc_first(id_F, c_loc(data), 8, 1_8, moved)
      if (n == 1) call c_f_pointer(moved, data)
    rank (1)
      n = realloc_first(id_F, c_loc(data), 8, -1_8, moved)
      if (n >= 0) call c_f_pointer(moved, data, [n])
    rank default
      n = -1
    end select
    if (n >= 0) err = FTI_SCES
  end subroutine FTI_Realloc_INTEGER8

  subroutine FTI_Realloc_REAL4(id_F, data, err)
    integer, intent(in) :: id_F
    real(4), pointer, intent(inout) :: data(..)
    integer, intent(out) :: err
    type(c_ptr) :: moved
    integer(8) :: n
    err = FTI_NSCS
    select rank (data)
    rank (0)
      n = realloc_first(id_F, c_loc(data), 4, 1_8, moved)
      if (n == 1) call c_f_pointer(moved, data)
    rank (1)
      n = realloc_first(id_F, c_loc(data), 4, -1_8, moved)
      if (n >= 0) call c_f_pointer(moved, data, [n])
    rank default
      n = -1
    end select
    if (n >= 0) err = FTI_SCES
  end subroutine FTI_Realloc_REAL4

  subroutine FTI_Realloc_REAL8(id_F, data, err)
    integer, intent(in) :: id_F
    real(8), pointer, intent(inout) :: data(..)
    integer, intent(out) :: err
    type(c_ptr) :: moved
    integer(8) :: n
    err = FTI_NSCS
    select rank (data)
    rank (0)
      n = realloc_first(id_F, c_loc(data), 8, 1_8, moved)
      if (n == 1) call c_f_pointer(moved, data)
    rank (1)
      n = realloc_first(id_F, c_loc(data), 8, -1_8, moved)
      if (n >= 0) call c_f_pointer(moved, data, [n])
    rank default
      n = -1
    end select
    if (n >= 0) err = FTI_SCES
  end subroutine FTI_Realloc_REAL8

end module fti
