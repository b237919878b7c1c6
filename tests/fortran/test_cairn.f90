!> End-to-end test of the Fortran binding (bindings/fortran/cairn.f90).
!>
!> Uses a private scratch directory (CAIRN_SCRATCH, a mkdtemp directory under
!> $TMPDIR or /tmp, removed at the end) and a 16 MiB host cache. Every failed
!> check prints its line and what went wrong; the program then ends with
!> `error stop 1`. Success prints "fortran: all N checks passed".
program test_cairn
  use, intrinsic :: iso_c_binding, only: c_double, c_int, c_int32_t, c_int64_t, &
      c_ptr, c_associated, c_sizeof, c_size_t, c_f_pointer
  use cairn
  use cairn_test_support
  implicit none


  integer, parameter :: NI = 1000, NJ = 50, NB = 3001, NSTEPS = 5, MAXH = 100 * NSTEPS + NSTEPS
  real(c_double), allocatable, target :: a(:, :)
  integer(c_int32_t), allocatable, target :: b(:)
  real(c_double), allocatable :: hbuf(:), want(:)
  integer :: checks = 0, failures = 0
  type(cairn_client) :: client
  type(cairn_history) :: history
  type(cairn_stats_t) :: stats
  character(len=:), allocatable :: scratch
  integer(c_int64_t) :: v, s, bytes
  integer(c_int) :: rc
  integer :: n

  scratch = make_temp_dir("cairn-fortran-test")
  call check(set_env("CAIRN_SCRATCH", scratch), &
             __LINE__, "setenv CAIRN_SCRATCH")
  call check(set_env("CAIRN_HOST_CACHE", "16MiB"), &
             __LINE__, "setenv CAIRN_HOST_CACHE")

  allocate (a(NI, NJ), b(NB), hbuf(MAXH), want(MAXH))

  ! Tracked memory (cairn_alloc / cairn_free) --------------------------------
  block
    type(c_ptr) :: tp
    real(c_double), pointer :: t(:)
    call check_rc(cairn_alloc(0_c_size_t, tp), CAIRN_ERR_INVALID_ARGUMENT, __LINE__, "cairn_alloc of 0 bytes")
    call check_rc(cairn_alloc(1000_c_size_t * 8, tp), CAIRN_OK, __LINE__, "cairn_alloc")
    call check(c_associated(tp), __LINE__, "cairn_alloc gives a non-null pointer")
    call c_f_pointer(tp, t, [1000])
    call check(all(t == 0), __LINE__, "cairn_alloc memory is zeroed")
    t = 1.5_c_double
    call check(t(1000) == 1.5_c_double, __LINE__, "cairn_alloc memory is writable")
    call check_rc(cairn_free(tp), CAIRN_OK, __LINE__, "cairn_free")
    call check(.not. c_associated(tp), __LINE__, "cairn_free nulls the pointer")
    call check_rc(cairn_free(tp), CAIRN_OK, __LINE__, "cairn_free of null")
  end block

  ! Client and regions ---------------------------------------------------------
  rc = cairn_open(client)
  call check_rc(rc, CAIRN_OK, __LINE__, "cairn_open")
  if (rc /= CAIRN_OK) call finish()
  call check(c_associated(client%ptr), __LINE__, "open gives a non-null client")
  call check_rc(cairn_protect(client, 0_c_int, a), CAIRN_OK, __LINE__, "protect real(8) a")
  call check_rc(cairn_protect(client, 1_c_int, b), CAIRN_OK, __LINE__, "protect integer b")
  ! A strided section is not contiguous: refused instead of protecting a copy.
  call check_rc(cairn_protect(client, 2_c_int, a(1, :)), CAIRN_ERR_INVALID_ARGUMENT, __LINE__, &
                "protect non-contiguous section")
  call check_rc(cairn_unprotect(client, 2_c_int), CAIRN_ERR_NOT_FOUND, __LINE__, "unprotect unknown id")

  ! Checkpoints 1..3 -----------------------------------------------------------
  do v = 1, 3
    call fill(int(v))
    call check_rc(cairn_checkpoint(client, "fsim", v), CAIRN_OK, __LINE__, "checkpoint")
  end do
  do v = 1, 3
    call check_rc(cairn_wait(client, "fsim", v, CAIRN_LEVEL_LOCAL), CAIRN_OK, __LINE__, "wait LOCAL")
  end do
  v = 0
  call check_rc(cairn_latest(client, "fsim", v), CAIRN_OK, __LINE__, "latest")
  call check(v == 3, __LINE__, "latest == 3")
  ! A blank-padded name is the same checkpoint.
  call check_rc(cairn_latest(client, "fsim      ", v), CAIRN_OK, __LINE__, "latest, padded name")
  call check(v == 3, __LINE__, "latest (padded name) == 3")
  call check_rc(cairn_latest(client, "nothing-here", v), CAIRN_ERR_NOT_FOUND, __LINE__, "latest unknown")
  call check(v == -1, __LINE__, "latest unknown gives -1")

  ! Scribble, restore 2, compare exactly -----------------------------------------
  a = -1.0_c_double
  b = -1
  call check_rc(cairn_restore(client, "fsim", 2_c_int64_t), CAIRN_OK, __LINE__, "restore 2")
  call check(matches(2), __LINE__, "restored contents == version 2")
  call check_rc(cairn_restore(client, "fsim", 3_c_int64_t), CAIRN_OK, __LINE__, "restore 3")
  call check(matches(3), __LINE__, "restored contents == version 3")
  call check_rc(cairn_restore(client, "fsim", 42_c_int64_t), CAIRN_ERR_NOT_FOUND, __LINE__, &
                "restore missing version")
  ! The restart in one call: the newest version, into the protected arrays.
  a = -1.0_c_double
  b = -1
  v = 0
  call check_rc(cairn_restore_latest(client, "fsim", v), CAIRN_OK, __LINE__, "restore_latest")
  call check(v == 3, __LINE__, "restore_latest gives 3")
  call check(matches(3), __LINE__, "restore_latest contents == version 3")
  call check_rc(cairn_restore_latest(client, "nothing-here", v), CAIRN_ERR_NOT_FOUND, __LINE__, &
                "restore_latest unknown")
  call check(v == -1, __LINE__, "restore_latest unknown gives -1")
  ! Placement: the restored version (3) recorded this thread's affinity.
  call check_rc(cairn_register_thread(client, -2_c_int), CAIRN_ERR_INVALID_ARGUMENT, __LINE__, &
                "register_thread with a negative index")
  call check_rc(cairn_register_thread(client, 0_c_int), CAIRN_OK, __LINE__, "register_thread 0")
  call check_rc(cairn_restore_affinity(client, CAIRN_CHECKPOINTING_THREAD), CAIRN_OK, __LINE__, &
                "restore_affinity of the checkpointing thread")
  call check_rc(cairn_restore_affinity(client, 9_c_int), CAIRN_ERR_NOT_FOUND, __LINE__, &
                "restore_affinity of an index not recorded")
  ! A restore made of several calls.
  call check_rc(cairn_restore_end(client), CAIRN_ERR_STATE, __LINE__, "restore_end with none begun")
  call check_rc(cairn_restore_begin(client), CAIRN_OK, __LINE__, "restore_begin")
  call check_rc(cairn_restore(client, "fsim", 3_c_int64_t), CAIRN_OK, __LINE__, "restore inside restore_begin")
  call check_rc(cairn_restore_end(client), CAIRN_OK, __LINE__, "restore_end")

  ! Errors -------------------------------------------------------------------
  call check_rc(cairn_checkpoint(client, "bad/name", 4_c_int64_t), CAIRN_ERR_INVALID_ARGUMENT, &
                __LINE__, "checkpoint with '/' in the name")
  call check(len(cairn_last_error()) > 0, __LINE__, "last_error non-empty after a failure")
  call check_rc(cairn_checkpoint(client, "", 4_c_int64_t), CAIRN_ERR_INVALID_ARGUMENT, __LINE__, &
                "checkpoint with an empty name")
  call check(len(cairn_strerror(CAIRN_ERR_INVALID_ARGUMENT)) > 0, __LINE__, "strerror non-empty")
  call check(len(cairn_strerror(CAIRN_OK)) > 0, __LINE__, "strerror(OK) non-empty")
  call check(cairn_strerror(CAIRN_ERR_NOT_FOUND) /= cairn_strerror(CAIRN_ERR_IO), __LINE__, &
             "strerror distinguishes codes")

  call check_rc(cairn_stats(client, stats), CAIRN_OK, __LINE__, "stats")
  call check(stats%capture_bytes >= 3 * (int(storage_size(a), c_int64_t) / 8 * size(a) + 4 * NB), &
             __LINE__, "stats: capture_bytes covers 3 checkpoints")
  call check(stats%cache_capacity_bytes == 16 * 1024 * 1024, __LINE__, "stats: 16 MiB cache")
  ! The same layout as C's cairn_stats_t (both from include/cairn/cairn_stats.def):
  ! the library filled exactly this type's bytes, so C's struct is no smaller.
  call check(stats%size == c_sizeof(stats), __LINE__, "stats: size = the bytes filled = the type's size")
  call check(c_sizeof(stats) == 864, __LINE__, "stats: cairn_stats_t is 864 bytes, as in C")
  call check(stats%init_strategy >= CAIRN_INIT_EAGER .and. stats%init_strategy <= CAIRN_INIT_ADAPTIVE, &
             __LINE__, "stats: init_strategy is a cairn_cache_init_t")
  ! The GPU tier: host arrays only, no device cache.
  call check(stats%device_gpu == 0 .or. stats%device_gpu == 1, __LINE__, "stats: device_gpu is a flag")
  call check(stats%device_init == CAIRN_DEVICE_CACHE_DIRECT .or. &
             stats%device_init == CAIRN_DEVICE_CACHE_INCREMENTAL, __LINE__, "stats: device_init")
  call check(stats%device_capacity_bytes == 0 .and. stats%device_mapped_bytes == 0 .and. &
             stats%device_used_bytes == 0, __LINE__, "stats: no device cache")
  call check(stats%device_fully_mapped_s < 0, __LINE__, "stats: no device cache, never mapped")
  call check(stats%device_capture_bytes == 0 .and. stats%device_drain_bytes == 0 .and. &
             stats%device_prefetch_bytes == 0 .and. stats%device_bounce_bytes == 0, __LINE__, &
             "stats: host arrays move nothing through the GPU tier")
  call check(stats%device_hits == 0 .and. stats%device_evictions == 0 .and. &
             stats%device_capture_blocked_s == 0, __LINE__, "stats: no device hits or evictions")
  call check(stats%device_map_failed == 0, __LINE__, "stats: no mapping failure")

  ! History: push 1..5 (sizes 101, 202, ...), pop in reverse -----------------------
  rc = cairn_history_open(client, "fadjoint", history)
  call check_rc(rc, CAIRN_OK, __LINE__, "history_open")
  if (rc == CAIRN_OK) then
    do s = 1, NSTEPS
      call step_data(int(s), want, n)
      call check_rc(cairn_history_push(history, s, want(1:n)), CAIRN_OK, __LINE__, "history_push")
    end do
    ! Too small a buffer: refused, step not consumed.
    call check_rc(cairn_history_pop(history, int(NSTEPS, c_int64_t), hbuf(1:10), bytes), &
                  CAIRN_ERR_SIZE_MISMATCH, __LINE__, "history_pop into a small buffer")
    do s = NSTEPS, 1, -1
      hbuf = -1.0_c_double
      bytes = -1
      call step_data(int(s), want, n)
      call check_rc(cairn_history_pop(history, s, hbuf, bytes), CAIRN_OK, __LINE__, "history_pop")
      call check(bytes == 8_c_int64_t * n, __LINE__, "history_pop byte count")
      call check(all(hbuf(1:n) == want(1:n)), __LINE__, "history_pop contents")
      call check(all(hbuf(n + 1:) == -1.0_c_double), __LINE__, "history_pop wrote past the step")
    end do
    call check_rc(cairn_history_pop(history, 1_c_int64_t, hbuf), CAIRN_ERR_NOT_FOUND, __LINE__, &
                  "history_pop of a consumed step")
    call check_rc(cairn_history_close(history), CAIRN_OK, __LINE__, "history_close")
    call check(.not. c_associated(history%ptr), __LINE__, "history_close nulls the handle")
  end if

  call check_rc(cairn_unprotect(client, 1_c_int), CAIRN_OK, __LINE__, "unprotect b")
  call check_rc(cairn_close(client), CAIRN_OK, __LINE__, "close")
  call check(.not. c_associated(client%ptr), __LINE__, "close nulls the handle")
  call check_rc(cairn_close(client), CAIRN_OK, __LINE__, "close of a null client")

  ! cairn_checkpoint_due: an error without an MTBF; with one (1e15 s: an
  ! interval >= 1400 s for any measured cost) due first, then not --------------
  block
    logical :: due
    due = .true.
    call check_rc(cairn_open(client), CAIRN_OK, __LINE__, "open without an MTBF")
    call check_rc(cairn_checkpoint_due(client, "fdue", due), CAIRN_ERR_CONFIG, __LINE__, &
                  "checkpoint_due without an MTBF")
    call check(.not. due, __LINE__, "no MTBF: due is .false.")
    call check_rc(cairn_close(client), CAIRN_OK, __LINE__, "close")
    call check(set_env("CAIRN_MTBF", "1e15"), __LINE__, "setenv CAIRN_MTBF")
    call check_rc(cairn_open(client), CAIRN_OK, __LINE__, "open with CAIRN_MTBF")
    call check(set_env("CAIRN_MTBF", "0"), __LINE__, "setenv CAIRN_MTBF=0")
    call check_rc(cairn_protect(client, 0_c_int, a), CAIRN_OK, __LINE__, "protect a")
    call check_rc(cairn_checkpoint_due(client, "fdue", due), CAIRN_OK, __LINE__, "checkpoint_due, first")
    call check(due, __LINE__, "due before the first checkpoint")
    call check_rc(cairn_checkpoint(client, "fdue", 1_c_int64_t), CAIRN_OK, __LINE__, "checkpoint fdue")
    call check_rc(cairn_checkpoint_due(client, "fdue", due), CAIRN_OK, __LINE__, "checkpoint_due, after")
    call check(.not. due, __LINE__, "not due right after a checkpoint")
    call check_rc(cairn_stats(client, stats), CAIRN_OK, __LINE__, "stats")
    call check(stats%interval_period_s >= 1400 .and. stats%interval_checkpoint_s > 0, __LINE__, &
               "stats: the interval in use and the measured cost")
    call check(stats%interval_waste > 0 .and. stats%interval_waste < 1.0e-3_c_double, __LINE__, &
               "stats: the expected waste")
    call check_rc(cairn_close(client), CAIRN_OK, __LINE__, "close")
  end block
  call finish()

contains

  ! Contents of version v: a(i, j) = ea(v, i, j), b(i) = eb(v, i).
  pure real(c_double) function ea(version, i, j)
    integer, intent(in) :: version, i, j
    ea = real(version, c_double) * 1000003.0_c_double + real(i, c_double) * 0.5_c_double &
         + real(j, c_double) * 1.0e-3_c_double
  end function ea

  pure integer(c_int32_t) function eb(version, i)
    integer, intent(in) :: version, i
    eb = int(version * 7919 + i * 3 - 1, c_int32_t)
  end function eb

  subroutine fill(version)
    integer, intent(in) :: version
    integer :: i, j
    do j = 1, NJ
      do i = 1, NI
        a(i, j) = ea(version, i, j)
      end do
    end do
    do i = 1, NB
      b(i) = eb(version, i)
    end do
  end subroutine fill

  ! Exact comparison (bit-for-bit restore) with version's contents.
  logical function matches(version)
    integer, intent(in) :: version
    integer :: i, j
    matches = .true.
    do j = 1, NJ
      do i = 1, NI
        if (a(i, j) /= ea(version, i, j)) matches = .false.
      end do
    end do
    do i = 1, NB
      if (b(i) /= eb(version, i)) matches = .false.
    end do
  end function matches

  subroutine step_data(step, x, n)
    integer, intent(in) :: step
    real(c_double), intent(out) :: x(:)
    integer, intent(out) :: n
    integer :: i
    n = 100 * step + step
    x = 0
    do i = 1, n
      x(i) = real(step, c_double) * 10000.0_c_double + real(i, c_double) / 8.0_c_double
    end do
  end subroutine step_data

  subroutine check(ok, line, what)
    logical, intent(in) :: ok
    integer, intent(in) :: line
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (.not. ok) then
      failures = failures + 1
      print '(a, i0, 2a)', "test_cairn.f90:", line, ": FAILED: ", what
    end if
  end subroutine check

  subroutine check_rc(got, want, line, what)
    integer(c_int), intent(in) :: got, want
    integer, intent(in) :: line
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (got /= want) then
      failures = failures + 1
      print '(a, i0, 3a, i0, 3a, i0, 3a)', "test_cairn.f90:", line, ": FAILED: ", what, &
          " returned ", got, " (", cairn_strerror(got), "), expected ", want, " (", &
          cairn_strerror(want), ")"
      if (got /= CAIRN_OK) print '(2a)', "    last error: ", cairn_last_error()
    end if
  end subroutine check_rc

  subroutine finish()
    integer :: st
    if (c_associated(client%ptr)) st = cairn_close(client)
    if (allocated(scratch)) then
      call execute_command_line("rm -rf '" // scratch // "'", exitstat=st)
    end if
    if (failures > 0) then
      print '(a, i0, a, i0, a)', "fortran: ", failures, " of ", checks, " checks FAILED"
      error stop 1
    end if
    print '(a, i0, a)', "fortran: all ", checks, " checks passed"
    stop
  end subroutine finish

end program test_cairn
