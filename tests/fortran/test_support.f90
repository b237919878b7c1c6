!> What the Fortran tests share (test_cairn.f90, test_cairn_mpi.f90): setenv
!> and a fresh scratch directory through the C library.
module cairn_test_support
  use, intrinsic :: iso_c_binding, only: c_associated, c_char, c_int, c_null_char, c_ptr
  use cairn, only: cairn_c_chars
  implicit none
  private
  public :: set_env, make_temp_dir

  interface
    function c_setenv(name, value, overwrite) bind(C, name="setenv") result(rc)
      import :: c_char, c_int
      character(kind=c_char), dimension(*), intent(in) :: name, value
      integer(c_int), value :: overwrite
      integer(c_int) :: rc
    end function c_setenv
    function c_mkdtemp(template) bind(C, name="mkdtemp") result(p)
      import :: c_char, c_ptr
      character(kind=c_char), dimension(*), intent(inout) :: template
      type(c_ptr) :: p
    end function c_mkdtemp
  end interface

contains

  !> setenv(name, value, 1); .true. when it worked.
  logical function set_env(name, value)
    character(len=*), intent(in) :: name, value
    set_env = c_setenv(name // c_null_char, value // c_null_char, 1_c_int) == 0
  end function set_env

  !> A new directory $TMPDIR/<prefix>.XXXXXX (or under /tmp); stops the
  !> program when mkdtemp fails.
  function make_temp_dir(prefix) result(dir)
    character(len=*), intent(in) :: prefix
    character(len=:), allocatable :: dir
    character(len=4096) :: tmp
    character(kind=c_char), allocatable :: template(:)
    integer :: i, n, st
    call get_environment_variable("TMPDIR", tmp, status=st)
    if (st /= 0 .or. len_trim(tmp) == 0) tmp = "/tmp"
    dir = trim(tmp) // "/" // prefix // ".XXXXXX"
    n = len(dir)
    template = cairn_c_chars(dir)
    if (.not. c_associated(c_mkdtemp(template))) then
      print '(a)', "mkdtemp failed for " // dir
      error stop 2
    end if
    do i = 1, n
      dir(i:i) = template(i)
    end do
  end function make_temp_dir

end module cairn_test_support
