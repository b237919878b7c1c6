! Module veloc: VELOC's Fortran interface (VELOC's src/fortran/interfaceVeloc.F90:
! `use veloc`, subroutines with an `err` out-argument, a generic
! VELOC_Mem_protect on POINTER scalars and arrays) over libcairn_veloc
! (docs/veloc.md, "Fortran"). It calls the C functions of VELOC's
! src/fortran/velocf.c by their names (src/compat/veloc/velocf.h), which
! libcairn_veloc exports.
!
! VELOC writes out one VELOC_Mem_protect procedure per type and rank 0-7;
! here each type has one, over an assumed-rank pointer (Fortran 2018,
! data(..)), which also takes ranks above 7. Its element size comes from
! storage_size, so COMPLEX regions are whole (VELOC's passed the kind, 4 or
! 8, as the size: half of each element). The per-type procedures are
! written by cairn_schema_gen (src/tools/schema_gen_compat_fortran.cpp)
! between the 'generated' markers: change the generator, then build
! cairn_regenerate.
module veloc
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: error_unit
  implicit none
  private

  integer, parameter, public :: VELOC_SCES = 0   !< success
  integer, parameter, public :: VELOC_NSCS = -1  !< failure
  !> Element sizes in bytes, for VELOC_Mem_protect(id, c_ptr, count, size, err).
  integer, parameter, public :: VELOC_CHARACTER1 = 1, VELOC_LOGICAL1 = 1, &
    VELOC_INTEGER1 = 1, VELOC_INTEGER2 = 2, VELOC_INTEGER4 = 4, VELOC_INTEGER8 = 8, &
    VELOC_REAL4 = 4, VELOC_REAL8 = 8, VELOC_COMPLEX4 = 8, VELOC_COMPLEX8 = 16

  !> VELOC_MAX_NAME (veloc/defs.h): the longest routed path, its NUL included.
  integer, parameter :: max_name = 1024

  public :: VELOC_Init, VELOC_Finalize, VELOC_Mem_protect, VELOC_Mem_unprotect, &
            VELOC_Checkpoint_begin, VELOC_Checkpoint_mem, VELOC_Checkpoint_end, &
            VELOC_Checkpoint_wait, VELOC_Checkpoint, VELOC_Restart_test, VELOC_Restart_begin, &
            VELOC_Recover_mem, VELOC_Restart_end, VELOC_Restart, VELOC_Route_file

  interface
    integer(c_int) function c_init(comm, cfg_file) bind(C, name="VELOC_Init_fort_wrapper")
      import :: c_int, c_char
      integer(c_int), intent(in) :: comm
      character(kind=c_char), intent(in) :: cfg_file(*)
    end function c_init
    integer(c_int) function c_finalize(drain) bind(C, name="VELOC_Finalize")
      import :: c_int
      integer(c_int), value :: drain
    end function c_finalize
    integer(c_int) function c_mem_protect(id, ptr, count, base_size) bind(C, name="VELOC_Mem_protect_wrapper")
      import :: c_int, c_ptr, c_long
      integer(c_int), value :: id
      type(c_ptr), value :: ptr
      integer(c_long), value :: count, base_size
    end function c_mem_protect
    integer(c_int) function c_mem_unprotect(id) bind(C, name="VELOC_Mem_unprotect")
      import :: c_int
      integer(c_int), value :: id
    end function c_mem_unprotect
    integer(c_int) function c_checkpoint_begin(name, version) bind(C, name="VELOC_Checkpoint_begin_wrapper")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: version
    end function c_checkpoint_begin
    integer(c_int) function c_checkpoint_mem() bind(C, name="VELOC_Checkpoint_mem")
      import :: c_int
    end function c_checkpoint_mem
    integer(c_int) function c_checkpoint_end(success) bind(C, name="VELOC_Checkpoint_end")
      import :: c_int
      integer(c_int), value :: success
    end function c_checkpoint_end
    integer(c_int) function c_checkpoint_wait() bind(C, name="VELOC_Checkpoint_wait")
      import :: c_int
    end function c_checkpoint_wait
    integer(c_int) function c_checkpoint(name, version) bind(C, name="VELOC_Checkpoint_wrapper")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: version
    end function c_checkpoint
    integer(c_int) function c_restart_test(name, needed_version) bind(C, name="VELOC_Restart_test_wrapper")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: needed_version
    end function c_restart_test
    integer(c_int) function c_restart_begin(name, version) bind(C, name="VELOC_Restart_begin_wrapper")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: version
    end function c_restart_begin
    integer(c_int) function c_recover_mem() bind(C, name="VELOC_Recover_mem")
      import :: c_int
    end function c_recover_mem
    integer(c_int) function c_restart_end(success) bind(C, name="VELOC_Restart_end")
      import :: c_int
      integer(c_int), value :: success
    end function c_restart_end
    integer(c_int) function c_restart(name, version) bind(C, name="VELOC_Restart_wrapper")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: version
    end function c_restart
    integer(c_int) function c_route_file(original, routed) bind(C, name="VELOC_Route_file_wrapper")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: original(*)
      character(kind=c_char), intent(out) :: routed(*)
    end function c_route_file
  end interface

  !> VELOC_Mem_protect(id, data, err): data a POINTER scalar or array of one
  !> of VELOC's types (CHARACTER, any length; LOGICAL(1); INTEGER(1, 2, 4,
  !> 8); REAL(4, 8); COMPLEX(4, 8)) whose elements are contiguous (its first
  !> element's address and its size are registered, as VELOC does; a
  !> non-contiguous one is refused); or VELOC_Mem_protect(id, c_ptr, count,
  !> base_size, err). A zero-size array drops region id (count 0, as VELOC).
  interface VELOC_Mem_protect
    module procedure VELOC_Mem_protect_Ptr
    ! BEGIN generated by cairn_schema_gen from schema_gen_compat_fortran.cpp: VELOC_Mem_protect interface
    module procedure protect_character
    module procedure protect_logical1
    module procedure protect_integer1
    module procedure protect_integer2
    module procedure protect_integer4
    module procedure protect_integer8
    module procedure protect_real4
    module procedure protect_real8
    module procedure protect_complex4
    module procedure protect_complex8
    ! END generated
  end interface VELOC_Mem_protect

  !> VELOC_Route_file(original, routed, err): routed (blank-padded) becomes
  !> the path to write or read original at (VELOC's current module and C
  !> API). VELOC_Route_file(file_name, err) (VELOC's older one-argument
  !> form): file_name is replaced by the path.
  interface VELOC_Route_file
    module procedure route_file, route_file_in_place
  end interface VELOC_Route_file

contains

  !> Collective over comm (an integer handle, as MPI_COMM_WORLD of `use mpi`).
  subroutine VELOC_Init(comm, config_file, err)
    integer, intent(in) :: comm
    character(len=*), intent(in) :: config_file
    integer, intent(out) :: err
    err = int(c_init(int(comm, c_int), c_string(config_file)))
  end subroutine VELOC_Init

  subroutine VELOC_Finalize(cleanup, err)
    integer, intent(in) :: cleanup
    integer, intent(out) :: err
    err = int(c_finalize(int(cleanup, c_int)))
  end subroutine VELOC_Finalize

  subroutine VELOC_Mem_protect_Ptr(id_F, ptr, count_F, base_size_F, err)
    integer, intent(in) :: id_F
    type(c_ptr), value :: ptr
    integer, intent(in) :: count_F, base_size_F
    integer, intent(out) :: err
    err = int(c_mem_protect(int(id_F, c_int), ptr, int(count_F, c_long), int(base_size_F, c_long)))
  end subroutine VELOC_Mem_protect_Ptr

  !> A pointer's region: its first element's address, its element count and
  !> storage_size of one element (bits).
  integer function protect_pointer(id_F, first, count, bits) result(err)
    integer, intent(in) :: id_F
    type(c_ptr), intent(in) :: first
    integer(8), intent(in) :: count, bits
    err = int(c_mem_protect(int(id_F, c_int), first, int(count, c_long), int(bits / 8, c_long)))
  end function protect_pointer

  !> A pointer that is not associated, or whose elements are not contiguous
  !> (an address and a size would not describe them), is refused with a
  !> message.
  logical function refused(id_F, is_associated, is_contig) result(r)
    integer, intent(in) :: id_F
    logical, intent(in) :: is_associated, is_contig
    r = .not. (is_associated .and. is_contig)
    if (.not. is_associated) then
      write (error_unit, '(a, i0, a)') 'VELOC (Cairn): VELOC_Mem_protect: region ', id_F, &
        ': the pointer is not associated'
    else if (.not. is_contig) then
      write (error_unit, '(a, i0, a)') 'VELOC (Cairn): VELOC_Mem_protect: region ', id_F, &
        ': the array is not contiguous (its first address and size would not describe it)'
    end if
  end function refused
  ! BEGIN generated by cairn_schema_gen from schema_gen_compat_fortran.cpp: VELOC specifics

  subroutine protect_character(id_F, data, err)
    integer, intent(in) :: id_F
    character(len=*), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_character

  subroutine protect_logical1(id_F, data, err)
    integer, intent(in) :: id_F
    logical(1), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_logical1

  subroutine protect_integer1(id_F, data, err)
    integer, intent(in) :: id_F
    integer(1), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_integer1

  subroutine protect_integer2(id_F, data, err)
    integer, intent(in) :: id_F
    integer(2), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_integer2

  subroutine protect_integer4(id_F, data, err)
    integer, intent(in) :: id_F
    integer(4), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_integer4

  subroutine protect_integer8(id_F, data, err)
    integer, intent(in) :: id_F
    integer(8), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_integer8

  subroutine protect_real4(id_F, data, err)
    integer, intent(in) :: id_F
    real(4), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_real4

  subroutine protect_real8(id_F, data, err)
    integer, intent(in) :: id_F
    real(8), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_real8

  subroutine protect_complex4(id_F, data, err)
    integer, intent(in) :: id_F
    complex(4), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_complex4

  subroutine protect_complex8(id_F, data, err)
    integer, intent(in) :: id_F
    complex(8), pointer, intent(in) :: data(..)
    integer, intent(out) :: err
    err = VELOC_NSCS
    if (refused(id_F, associated(data), is_contiguous(data))) return
    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, kind=8))
  end subroutine protect_complex8
  ! END generated

  subroutine VELOC_Mem_unprotect(id_F, err)
    integer, intent(in) :: id_F
    integer, intent(out) :: err
    err = int(c_mem_unprotect(int(id_F, c_int)))
  end subroutine VELOC_Mem_unprotect

  subroutine VELOC_Checkpoint_begin(name, version, err)
    character(len=*), intent(in) :: name
    integer, intent(in) :: version
    integer, intent(out) :: err
    err = int(c_checkpoint_begin(c_string(name), int(version, c_int)))
  end subroutine VELOC_Checkpoint_begin

  subroutine VELOC_Checkpoint_mem(err)
    integer, intent(out) :: err
    err = int(c_checkpoint_mem())
  end subroutine VELOC_Checkpoint_mem

  subroutine VELOC_Checkpoint_end(success, err)
    integer, intent(in) :: success
    integer, intent(out) :: err
    err = int(c_checkpoint_end(int(success, c_int)))
  end subroutine VELOC_Checkpoint_end

  subroutine VELOC_Checkpoint_wait(err)
    integer, intent(out) :: err
    err = int(c_checkpoint_wait())
  end subroutine VELOC_Checkpoint_wait

  subroutine VELOC_Checkpoint(name, version, err)
    character(len=*), intent(in) :: name
    integer, intent(in) :: version
    integer, intent(out) :: err
    err = int(c_checkpoint(c_string(name), int(version, c_int)))
  end subroutine VELOC_Checkpoint

  !> version: the newest version of name to restart from (bounded by
  !> needed_version when it is > 0), VELOC_NSCS if there is none.
  subroutine VELOC_Restart_test(name, needed_version, version)
    character(len=*), intent(in) :: name
    integer, intent(in) :: needed_version
    integer, intent(out) :: version
    version = int(c_restart_test(c_string(name), int(needed_version, c_int)))
  end subroutine VELOC_Restart_test

  subroutine VELOC_Restart_begin(name, version, err)
    character(len=*), intent(in) :: name
    integer, intent(in) :: version
    integer, intent(out) :: err
    err = int(c_restart_begin(c_string(name), int(version, c_int)))
  end subroutine VELOC_Restart_begin

  subroutine VELOC_Recover_mem(err)
    integer, intent(out) :: err
    err = int(c_recover_mem())
  end subroutine VELOC_Recover_mem

  subroutine VELOC_Restart_end(success, err)
    integer, intent(in) :: success
    integer, intent(out) :: err
    err = int(c_restart_end(int(success, c_int)))
  end subroutine VELOC_Restart_end

  subroutine VELOC_Restart(name, version, err)
    character(len=*), intent(in) :: name
    integer, intent(in) :: version
    integer, intent(out) :: err
    err = int(c_restart(c_string(name), int(version, c_int)))
  end subroutine VELOC_Restart

  subroutine route_file(original, routed, err)
    character(len=*), intent(in) :: original
    character(len=*), intent(out) :: routed
    integer, intent(out) :: err
    character(kind=c_char) :: path(max_name)
    integer :: n
    routed = ''
    path = c_null_char
    err = int(c_route_file(c_string(original), path))
    if (err /= VELOC_SCES) return
    n = findloc(path, c_null_char, dim=1) - 1
    if (n > len(routed)) then
      write (error_unit, '(a, i0, a, i0, a)') 'VELOC (Cairn): VELOC_Route_file: the routed path has ', n, &
        ' characters, the variable for it ', len(routed)
      err = VELOC_NSCS
      return
    end if
    routed = transfer(path(1:n), routed(1:n))
  end subroutine route_file

  subroutine route_file_in_place(file_name, err)
    character(len=*), intent(inout) :: file_name
    integer, intent(out) :: err
    character(len=len(file_name)) :: routed
    call route_file(file_name, routed, err)
    if (err == VELOC_SCES) file_name = routed
  end subroutine route_file_in_place

  !> s without its trailing blanks, NUL-terminated (as VELOC's module passes
  !> its strings).
  function c_string(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function c_string

end module veloc
