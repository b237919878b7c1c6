! Module fti (src/compat/fti/fti.f90) from Fortran, as FTI's Fortran examples use
! it: POINTER data protected, checkpointed at level 1, finalized, overwritten,
! FTI initialized again (a restart), recovered and checked. Then a third
! launch: a history array allocated with 1 element is given its stored size (3)
! by FTI_Realloc, and FTI_RecoverVar restores datasets 0 and 2 but not 1.
!   fti_fortran <config.fti>
program fti_fortran
  use mpi
  use fti
  implicit none
  integer :: ierr, comm, rank, status, i, j
  integer(8) :: stored
  character(len=4096) :: cfg
  real(8), pointer :: field(:, :), hist(:)
  integer(4), pointer :: step

  call MPI_Init(ierr)
  call get_command_argument(1, cfg)
  allocate(field(50, 30), step, hist(3))
  hist = [1.5d0, 2.5d0, 3.5d0]
  comm = MPI_COMM_WORLD
  call FTI_Init(cfg, comm, ierr)
  call check(ierr == FTI_SCES, 'FTI_Init')
  call MPI_Comm_rank(comm, rank, ierr)  ! comm is FTI_COMM_WORLD now
  do j = 1, 30
    do i = 1, 50
      field(i, j) = rank * 1.0d4 + i + j * 0.5d0
    end do
  end do
  step = 7
  call FTI_Protect(0, step, ierr)
  call check(ierr == FTI_SCES, 'FTI_Protect (scalar)')
  call FTI_Protect(1, field, ierr)
  call check(ierr == FTI_SCES, 'FTI_Protect (array)')
  call FTI_Protect(2, hist, ierr)
  call FTI_Status(status)
  call check(status == 0, 'a fresh job has nothing to recover')
  call FTI_Checkpoint(1, 1, ierr)
  call check(ierr == FTI_DONE, 'FTI_Checkpoint')
  call FTI_Finalize(ierr)
  call check(ierr == FTI_SCES, 'FTI_Finalize')

  field = 0
  step = 0
  comm = MPI_COMM_WORLD
  call FTI_Init(cfg, comm, ierr)
  call check(ierr == FTI_SCES, 'FTI_Init (restart)')
  call FTI_Protect(0, step, ierr)
  call FTI_Protect(1, field, ierr)
  call FTI_Status(status)
  call check(status == 1, 'the restart finds the checkpoint')
  call FTI_GetStoredSize(1, stored)
  call check(stored == 50 * 30 * 8, 'FTI_GetStoredSize')
  call FTI_Recover(ierr)
  call check(ierr == FTI_SCES, 'FTI_Recover')
  call check(step == 7, 'the scalar came back')
  do j = 1, 30
    do i = 1, 50
      call check(field(i, j) == rank * 1.0d4 + i + j * 0.5d0, 'the array came back')
    end do
  end do
  call FTI_Finalize(ierr)

  ! The third launch: FTI_Realloc, then FTI_RecoverVar of 0 and 2 only.
  field = 0
  step = 0
  deallocate(hist)
  allocate(hist(1))
  hist = 0
  comm = MPI_COMM_WORLD
  call FTI_Init(cfg, comm, ierr)
  call check(ierr == FTI_SCES, 'FTI_Init (third launch)')
  call FTI_Protect(0, step, ierr)
  call FTI_Protect(1, field, ierr)
  call FTI_Protect(2, hist, ierr)
  call FTI_Status(status)
  call check(status == 1, 'the third launch finds the checkpoint')
  call FTI_Realloc(2, hist, ierr)
  call check(ierr == FTI_SCES, 'FTI_Realloc')
  call check(size(hist) == 3, 'FTI_Realloc gave the history its stored size')
  call FTI_RecoverVarInit(ierr)
  call check(ierr == FTI_SCES, 'FTI_RecoverVarInit')
  call FTI_RecoverVar(2, ierr)
  call check(ierr == FTI_SCES, 'FTI_RecoverVar(2)')
  call FTI_RecoverVar(0, ierr)
  call check(ierr == FTI_SCES, 'FTI_RecoverVar(0)')
  call FTI_RecoverVarFinalize()
  call FTI_Status(status)
  call check(status == 0, 'FTI_RecoverVarFinalize ends the recovery')
  call check(step == 7, 'dataset 0 came back')
  call check(all(hist == [1.5d0, 2.5d0, 3.5d0]), 'the reallocated history came back')
  call check(all(field == 0), 'dataset 1, not asked for, was left alone')
  call FTI_Realloc(2, hist, ierr)
  call check(ierr == FTI_NSCS .and. size(hist) == 3, 'FTI_Realloc after the recovery does nothing')
  call FTI_Finalize(ierr)
  if (rank == 0) print '(a)', 'PASS fti_fortran'
  deallocate(field, step, hist)
  call MPI_Finalize(ierr)

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(2a)', 'FAIL: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check

end program fti_fortran
