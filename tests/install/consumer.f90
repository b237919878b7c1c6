! The Fortran consumer of the install test (tests/install_test.sh), built
! against the installed cairn.mod: checkpoint an array, lose it, restore it,
! compare. The scratch directory comes from CAIRN_SCRATCH. Exit 0 on success.
program consumer_fortran
  use, intrinsic :: iso_c_binding, only: c_double, c_int64_t
  use cairn
  implicit none
  real(c_double), allocatable, target :: u(:)
  real(c_double), allocatable :: expect(:)
  type(cairn_client) :: c
  integer(c_int64_t) :: v
  integer :: ierr, i

  allocate (u(50000))
  u = [(0.25_c_double * i, i = 1, size(u))]
  expect = u
  ierr = cairn_open(c)
  if (ierr == CAIRN_OK) ierr = cairn_protect(c, 0, u)
  if (ierr == CAIRN_OK) ierr = cairn_checkpoint(c, "consumer_f", 3_c_int64_t)
  if (ierr == CAIRN_OK) ierr = cairn_wait(c, "consumer_f", 3_c_int64_t, CAIRN_LEVEL_LOCAL)
  u = 0
  if (ierr == CAIRN_OK) ierr = cairn_restore_latest(c, "consumer_f", v)
  if (ierr /= CAIRN_OK) then
    print *, "consumer_fortran: ", cairn_strerror(ierr), ": ", cairn_last_error()
    error stop 1
  end if
  if (v /= 3 .or. any(u /= expect)) then
    print *, "consumer_fortran: restored version", v, "or its data differ"
    error stop 1
  end if
  ierr = cairn_close(c)
  if (ierr /= CAIRN_OK) error stop 1
  print '(a)', "consumer_fortran: checkpoint/restore OK"
end program consumer_fortran
