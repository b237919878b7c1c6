!> The Fortran MPI binding (module cairn_mpi, bindings/fortran/cairn_mpi.f90)
!> under mpirun -np 2 (ctest: fortran_mpi_np2). With `use mpi_f08`, the
!> communicator goes in as comm%MPI_VAL. Checks: a handle that names no
!> communicator is CAIRN_ERR_INVALID_ARGUMENT; each rank checkpoints
!> versions 1-3 (different data per rank) with collective waits; version 4,
!> which only rank 0 checkpoints, fails the collective wait on every rank;
!> after reopening, the collective latest is 3 and restore_latest restores
!> version 3 bit-for-bit on every rank. Failures are summed over the ranks;
!> the program then ends with `error stop 1` on every rank.
program test_cairn_mpi
  use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int, c_int64_t
  use mpi_f08
  use cairn
  use cairn_test_support
  use cairn_mpi
  implicit none


  integer, parameter :: N = 70001  ! several 64 KiB blocks, the last one partial
  real(c_double), allocatable, target :: x(:)
  type(cairn_client) :: client
  character(len=4096) :: root
  integer :: rank, nranks, failures = 0, total, ierr
  integer(c_int64_t) :: v
  integer(c_int) :: rc

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  if (rank == 0) root = make_temp_dir("cairn-fortran-mpi-test")
  call MPI_Bcast(root, len(root), MPI_CHARACTER, 0, MPI_COMM_WORLD)
  call check(set_env("CAIRN_SCRATCH", trim(root)), &
             __LINE__, "setenv CAIRN_SCRATCH")
  call check(set_env("CAIRN_HOST_CACHE", "4MiB"), &
             __LINE__, "setenv CAIRN_HOST_CACHE")
  call check(set_env("CAIRN_BLOCK_SIZE", "64KiB"), &
             __LINE__, "setenv CAIRN_BLOCK_SIZE")
  allocate (x(N))

  ! A handle that names no communicator: an error, not a crash (local).
  rc = cairn_open_mpi(client, -12345)
  call check(rc == CAIRN_ERR_INVALID_ARGUMENT, __LINE__, "cairn_open_mpi of a bad handle")
  call check(.not. c_associated(client%ptr), __LINE__, "the client stays null after a failed open")

  ! Run 1: versions 1-3 committed on every rank; 4 on rank 0 only.
  call check_rc(cairn_open_mpi(client, MPI_COMM_WORLD%MPI_VAL), CAIRN_OK, __LINE__, "cairn_open_mpi")
  call check_rc(cairn_protect(client, 1, x), CAIRN_OK, __LINE__, "cairn_protect")
  do v = 1, 3
    call fill(int(v))
    call check_rc(cairn_checkpoint(client, "state", v), CAIRN_OK, __LINE__, "cairn_checkpoint")
    call check_rc(cairn_wait(client, "state", v, CAIRN_LEVEL_LOCAL), CAIRN_OK, __LINE__, "collective wait")
  end do
  if (rank == 0) then
    call fill(4)
    call check_rc(cairn_checkpoint(client, "state", 4_c_int64_t), CAIRN_OK, __LINE__, "cairn_checkpoint 4")
  end if
  rc = cairn_wait(client, "state", 4_c_int64_t, CAIRN_LEVEL_LOCAL)
  call check(rc /= CAIRN_OK, __LINE__, "the collective wait for version 4, which rank 1 lacks, fails")
  call check_rc(cairn_close(client), CAIRN_OK, __LINE__, "cairn_close")

  ! Run 2: the restart finds version 3 on every rank.
  call check_rc(cairn_open_mpi(client, MPI_COMM_WORLD%MPI_VAL), CAIRN_OK, __LINE__, "cairn_open_mpi again")
  call check_rc(cairn_protect(client, 1, x), CAIRN_OK, __LINE__, "cairn_protect again")
  x = 0
  v = -1
  call check_rc(cairn_latest(client, "state", v), CAIRN_OK, __LINE__, "collective latest")
  call check(v == 3, __LINE__, "collective latest is version 3")
  v = -1
  call check_rc(cairn_restore_latest(client, "state", v), CAIRN_OK, __LINE__, "collective restore_latest")
  call check(v == 3, __LINE__, "restore_latest restores version 3")
  call check(matches(3), __LINE__, "the restored array is this rank's version 3, bit for bit")
  call check_rc(cairn_close(client), CAIRN_OK, __LINE__, "cairn_close again")
  deallocate (x)  ! a main program's arrays are not freed at its end: LeakSanitizer would report x

  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) call execute_command_line("rm -rf '" // trim(root) // "'")
  call MPI_Finalize(ierr)
  if (total /= 0) error stop 1
  if (rank == 0) print '(a, i0, a)', "fortran_mpi: all checks passed on ", nranks, " ranks"

contains

  pure real(c_double) function expected(version, i)
    integer, intent(in) :: version, i
    expected = real(version, c_double) * 1000.0_c_double + real(i, c_double) * 0.25_c_double &
               + real(rank, c_double) * 1.0e6_c_double
  end function expected

  subroutine fill(version)
    integer, intent(in) :: version
    integer :: i
    do i = 1, N
      x(i) = expected(version, i)
    end do
  end subroutine fill

  logical function matches(version)
    integer, intent(in) :: version
    integer :: i
    matches = .true.
    do i = 1, N
      if (x(i) /= expected(version, i)) matches = .false.
    end do
  end function matches

  subroutine check(ok, line, what)
    logical, intent(in) :: ok
    integer, intent(in) :: line
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      print '(a, i0, a, i0, 2a, a, a)', "rank ", rank, ": test_cairn_mpi.f90:", line, ": ", what, &
          " [cairn: ", cairn_last_error() // "]"
    end if
  end subroutine check

  subroutine check_rc(rc0, want, line, what)
    integer(c_int), intent(in) :: rc0, want
    integer, intent(in) :: line
    character(len=*), intent(in) :: what
    call check(rc0 == want, line, what // ": got " // cairn_strerror(rc0))
  end subroutine check_rc
end program test_cairn_mpi
