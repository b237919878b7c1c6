!> Cairn for MPI jobs in Fortran: module `cairn_mpi` (`use cairn_mpi`, with
!> `use cairn` for everything else; docs/fortran.md, docs/mpi.md).
!>
!> A separate module and library (cairn_fortran_mpi, over libcairn_mpi), so
!> that programs without MPI link the `cairn` module alone. It takes the
!> communicator as its Fortran integer handle and does not `use mpi` itself:
!> a compiled MPI module (.mod) is specific to the compiler and to the MPI
!> build, and an integer handle serves both MPI Fortran interfaces:
!>   use mpi      -> pass the communicator itself (an integer),
!>   use mpi_f08  -> pass comm%MPI_VAL.
!> libcairn_mpi converts it with MPI_Comm_f2c (cairn_open_mpi_f).
module cairn_mpi
  use, intrinsic :: iso_c_binding, only: c_char, c_int, c_loc, c_null_ptr, c_ptr
  use cairn, only: cairn_client, cairn_c_chars, CAIRN_OK
  implicit none
  private

  public :: cairn_open_mpi

  interface
    function c_cairn_open_mpi_f(comm, config_path, out) bind(C, name="cairn_open_mpi_f") result(ierr)
      import :: c_int, c_ptr
      integer(c_int), value :: comm  ! MPI_Fint: the default integer of MPI's Fortran interfaces
      type(c_ptr), value :: config_path
      type(c_ptr), intent(out) :: out
      integer(c_int) :: ierr
    end function c_cairn_open_mpi_f
  end interface

contains

  !> cairn_open_mpi - open a client on every rank of comm (collective;
  !> cairn_open_mpi in docs/mpi.md). comm: the integer handle (`use mpi`) or
  !> comm%MPI_VAL (`use mpi_f08`). config_path (optional) as for cairn_open.
  !> Afterwards cairn_latest, cairn_restore, cairn_restore_latest and
  !> cairn_wait of module `cairn` are collective over comm; close the client
  !> with cairn_close before MPI_Finalize. On error client is null.
  function cairn_open_mpi(client, comm, config_path) result(ierr)
    type(cairn_client), intent(out) :: client
    integer, intent(in) :: comm
    character(len=*), intent(in), optional :: config_path
    integer(c_int) :: ierr
    character(kind=c_char), allocatable, target :: path(:)
    if (present(config_path)) then
      path = cairn_c_chars(config_path)
      ierr = c_cairn_open_mpi_f(int(comm, c_int), c_loc(path), client%ptr)
    else
      ierr = c_cairn_open_mpi_f(int(comm, c_int), c_null_ptr, client%ptr)
    end if
    if (ierr /= CAIRN_OK) client%ptr = c_null_ptr
  end function cairn_open_mpi
end module cairn_mpi
