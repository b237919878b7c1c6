! The heat-distribution program of veloc_heatdis.c written in Fortran against
! VELOC's Fortran module (`use veloc`, src/compat/veloc/veloc.f90), with the same
! arguments and output, so that veloc_heatdis.sh drives it (docs/veloc.md,
! "Tests"):
!
!   veloc_fortran <cfg> <mem|file> <iterations> <every> <out>
!
! A grid split by rows over the ranks, Jacobi steps with halo exchange, a
! checkpoint every `every` iterations. Besides the grid, a state of every
! type the module's VELOC_Mem_protect takes (scalar and arrays of rank 1-4,
! one region through a c_ptr) is protected; it is a function of the
! iteration, so a restart from version v checks each region came back whole.
! mem:  the grid is a region too; VELOC_Checkpoint and VELOC_Restart;
! file: the grid goes to a routed file (VELOC_Route_file, two-argument form in
!       the checkpoint phase, the one-argument form in the restart phase);
!       VELOC_Checkpoint_begin / _mem / _end, VELOC_Restart_begin /
!       VELOC_Recover_mem / VELOC_Restart_end.
! HEATDIS_KILL_AT=K: after iteration K, VELOC_Checkpoint_wait, then every
! rank SIGKILLs itself.
program veloc_fortran
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: output_unit
  use mpi
  use veloc
  implicit none
  integer, parameter :: cols = 64, rows = 16
  character(len=*), parameter :: ckpt = 'heatdis'
  integer :: rank, nranks, ierr, err, iterations, every, kill_at, v, b, w, i
  integer :: success = 1  ! a variable: VELOC's module takes `success` intent(inout)
  character(len=4096) :: cfg, mode, arg, out
  logical :: file_mode
  real(8), pointer :: g(:, :), h(:, :)
  real(8), allocatable :: whole(:, :)
  integer(4), pointer :: iter
  ! The typed state: one region per type (check_state has the same shapes).
  character(len=1), pointer :: s_char(:)
  logical(1), pointer :: s_log(:)
  integer(1), pointer :: s_i1(:, :)
  integer(2), pointer :: s_i2(:)
  integer(8), pointer :: s_i8(:, :, :)
  real(4), pointer :: s_r4(:, :, :, :)
  complex(4), pointer :: s_c4(:)
  complex(8), pointer :: s_c8(:, :)
  real(8), target :: s_raw(5)

  interface
    integer(c_int) function c_raise(sig) bind(C, name="raise")
      import :: c_int
      integer(c_int), value :: sig
    end function c_raise
  end interface

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  if (command_argument_count() /= 5) then
    if (rank == 0) print '(a)', 'usage: veloc_fortran <cfg> <mem|file> <iterations> <every> <out>'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  call get_command_argument(1, cfg)
  call get_command_argument(2, mode)
  call get_command_argument(3, arg)
  read (arg, *) iterations
  call get_command_argument(4, arg)
  read (arg, *) every
  call get_command_argument(5, out)
  file_mode = mode == 'file'
  kill_at = -1
  call get_environment_variable('HEATDIS_KILL_AT', arg, status=ierr)
  if (ierr == 0) read (arg, *) kill_at

  call VELOC_Init(MPI_COMM_WORLD, cfg, err)
  call must(err == VELOC_SCES, 'VELOC_Init')
  allocate(g(cols, 0:rows + 1), h(cols, 0:rows + 1), iter)
  allocate(s_char(4), s_log(6), s_i1(3, 5), s_i2(7), s_i8(2, 3, 2), s_r4(2, 2, 3, 2), s_c4(5), s_c8(3, 4))
  call init_grid()
  iter = 0
  call protect_all()

  call VELOC_Restart_test(ckpt, 0, v)
  if (v >= 0) then
    if (rank == 0) print '(a, i0)', 'restart from ', v
    b = v - 1
    do while (b >= 0 .and. b >= v - 2 * every)
      call VELOC_Restart_test(ckpt, b, w)
      if (rank == 0) print '(a, i0, a, i0)', 'bound ', b, ' -> ', w
      b = b - max(every / 2, 1)
    end do
    g = -1
    iter = -1
    call set_state(-1)
    s_raw = -1
    if (file_mode) then
      call VELOC_Restart_begin(ckpt, v, err)
      call must(err == VELOC_SCES, 'VELOC_Restart_begin')
      call VELOC_Recover_mem(err)
      call must(err == VELOC_SCES, 'VELOC_Recover_mem')
      call load_file()
      call VELOC_Restart_end(success, err)
      call must(err == VELOC_SCES, 'VELOC_Restart_end')
    else
      call VELOC_Restart(ckpt, v, err)
      call must(err == VELOC_SCES, 'VELOC_Restart')
    end if
    call must(iter == v, 'the restored iteration is the version')
    call check_state(v)
  else if (rank == 0) then
    print '(a)', 'start fresh'
  end if

  do while (iter < iterations)
    call step()
    iter = iter + 1
    call set_state(iter)
    if (mod(iter, every) == 0) then
      if (file_mode) then
        call VELOC_Checkpoint_wait(err)
        call must(err == VELOC_SCES, 'VELOC_Checkpoint_wait')
        call VELOC_Checkpoint_begin(ckpt, iter, err)
        call must(err == VELOC_SCES, 'VELOC_Checkpoint_begin')
        call VELOC_Checkpoint_mem(err)
        call must(err == VELOC_SCES, 'VELOC_Checkpoint_mem')
        call save_file()
        call VELOC_Checkpoint_end(success, err)
        call must(err == VELOC_SCES, 'VELOC_Checkpoint_end')
      else
        call VELOC_Checkpoint(ckpt, iter, err)
        call must(err == VELOC_SCES, 'VELOC_Checkpoint')
      end if
    end if
    if (iter == kill_at) then
      call VELOC_Checkpoint_wait(err)
      call must(err == VELOC_SCES, 'VELOC_Checkpoint_wait before the kill')
      flush (output_unit)
      ierr = c_raise(9_c_int)  ! SIGKILL: a crash, no VELOC_Finalize
    end if
  end do

  if (rank == 0) allocate(whole(cols, rows * nranks))
  if (rank /= 0) allocate(whole(1, 1))
  call MPI_Gather(g(:, 1:rows), cols * rows, MPI_DOUBLE_PRECISION, whole, cols * rows, &
                  MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    open (newunit=i, file=trim(out), access='stream', form='unformatted', status='replace')
    write (i) whole
    close (i)
  end if
  call VELOC_Finalize(1, err)
  call must(err == VELOC_SCES, 'VELOC_Finalize')
  deallocate(g, h, iter, s_char, s_log, s_i1, s_i2, s_i8, s_r4, s_c4, s_c8, whole)
  call MPI_Finalize(ierr)

contains

  subroutine must(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (ok) return
    print '(a, i0, 2a)', 'FAIL (rank ', rank, '): ', what
    flush (output_unit)
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine must

  subroutine protect_all()
    integer :: e
    real(8), pointer :: section(:, :)
    if (.not. file_mode) then
      call VELOC_Mem_protect(1, g, e)
      call must(e == VELOC_SCES, 'VELOC_Mem_protect(grid)')
    end if
    call VELOC_Mem_protect(0, iter, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(iteration, a scalar)')
    call VELOC_Mem_protect(2, s_char, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(character)')
    call VELOC_Mem_protect(3, s_log, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(logical(1))')
    call VELOC_Mem_protect(4, s_i1, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(integer(1))')
    call VELOC_Mem_protect(5, s_i2, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(integer(2))')
    call VELOC_Mem_protect(6, s_i8, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(integer(8))')
    call VELOC_Mem_protect(7, s_r4, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(real(4))')
    call VELOC_Mem_protect(8, s_c4, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(complex(4))')
    call VELOC_Mem_protect(9, s_c8, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(complex(8))')
    call VELOC_Mem_protect(10, c_loc(s_raw), size(s_raw), VELOC_REAL8, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(c_ptr)')
    ! A region protected and unprotected again is in no version.
    call VELOC_Mem_protect(11, h, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_protect(decoy)')
    call VELOC_Mem_unprotect(11, e)
    call must(e == VELOC_SCES, 'VELOC_Mem_unprotect(decoy)')
    call VELOC_Mem_unprotect(11, e)
    call must(e == VELOC_NSCS, 'VELOC_Mem_unprotect of an unprotected region fails')
    section => g(1:2, :)
    call VELOC_Mem_protect(12, section, e)
    call must(e == VELOC_NSCS, 'VELOC_Mem_protect of a non-contiguous section fails')
  end subroutine protect_all

  ! The typed state at iteration it (-1: a poison the restart overwrites).
  subroutine set_state(it)
    integer, intent(in) :: it
    integer :: k
    s_char = [(achar(iachar('a') + modulo(it * k + rank, 26)), k = 1, size(s_char))]
    s_log = [(mod(it + k + rank, 2) == 0, k = 1, size(s_log))]
    s_i1 = int(mod(it + rank, 100), 1)
    s_i2 = int([(it * k + rank, k = 1, size(s_i2))], 2)
    s_i8 = int(it, 8) * 1000000007_8 + rank
    s_r4 = real(it, 4) * 0.5 + rank
    s_c4 = [(cmplx(it, -k - rank, 4), k = 1, size(s_c4))]
    s_c8 = cmplx(it * 0.25d0, rank - it, 8)
    s_raw = [(it * 1.5d0 + k + rank, k = 1, size(s_raw))]
  end subroutine set_state

  subroutine check_state(it)
    integer, intent(in) :: it
    character(len=1) :: c(4)
    logical(1) :: l(6)
    integer(1) :: i1(3, 5)
    integer(2) :: i2(7)
    integer(8) :: i8(2, 3, 2)
    real(4) :: r4(2, 2, 3, 2)
    complex(4) :: c4(5)
    complex(8) :: c8(3, 4)
    real(8) :: raw(5)
    c = s_char
    l = s_log
    i1 = s_i1
    i2 = s_i2
    i8 = s_i8
    r4 = s_r4
    c4 = s_c4
    c8 = s_c8
    raw = s_raw
    call set_state(it)
    call must(all(c == s_char), 'the character region came back')
    call must(logical(all(l .eqv. s_log)), 'the logical(1) region came back')
    call must(all(i1 == s_i1), 'the integer(1) region came back')
    call must(all(i2 == s_i2), 'the integer(2) region came back')
    call must(all(i8 == s_i8), 'the integer(8) region came back')
    call must(all(r4 == s_r4), 'the real(4) region came back')
    call must(all(c4 == s_c4), 'the complex(4) region came back')
    call must(all(c8 == s_c8), 'the complex(8) region came back')
    call must(all(raw == s_raw), 'the c_ptr region came back')
  end subroutine check_state

  subroutine init_grid()
    g = 0
    if (rank == 0) g(:, 0) = 100  ! the hot edge
  end subroutine init_grid

  subroutine step()
    integer :: up, down, r, st(MPI_STATUS_SIZE)
    up = rank - 1
    down = rank + 1
    if (up < 0) up = MPI_PROC_NULL
    if (down >= nranks) down = MPI_PROC_NULL
    call MPI_Sendrecv(g(:, 1), cols, MPI_DOUBLE_PRECISION, up, 0, g(:, rows + 1), cols, &
                      MPI_DOUBLE_PRECISION, down, 0, MPI_COMM_WORLD, st, ierr)
    call MPI_Sendrecv(g(:, rows), cols, MPI_DOUBLE_PRECISION, down, 1, g(:, 0), cols, &
                      MPI_DOUBLE_PRECISION, up, 1, MPI_COMM_WORLD, st, ierr)
    h = g
    do r = 1, rows
      h(2:cols - 1, r) = 0.25d0 * (g(1:cols - 2, r) + g(3:cols, r) + g(2:cols - 1, r - 1) + g(2:cols - 1, r + 1))
    end do
    g = h
  end subroutine step

  subroutine save_file()
    character(len=64) :: original
    character(len=1024) :: routed
    integer :: u, e
    write (original, '(a, i0, a)') 'heat.', rank, '.dat'
    call VELOC_Route_file(original, routed, e)
    call must(e == VELOC_SCES, 'VELOC_Route_file (checkpoint)')
    open (newunit=u, file=trim(routed), access='stream', form='unformatted', status='replace')
    write (u) g
    close (u)
  end subroutine save_file

  subroutine load_file()
    character(len=1024) :: name
    integer :: u, e
    write (name, '(a, i0, a)') 'heat.', rank, '.dat'
    call VELOC_Route_file(name, e)  ! VELOC's older form: name becomes the path
    call must(e == VELOC_SCES, 'VELOC_Route_file (restart)')
    open (newunit=u, file=trim(name), access='stream', form='unformatted', status='old')
    read (u) g
    close (u)
  end subroutine load_file

end program veloc_fortran
