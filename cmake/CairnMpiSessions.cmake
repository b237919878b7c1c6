# cairn_isolate_mpi_sessions(): every test of the calling directory labelled
# "mpi" gets its own Open MPI session directory. Call it at the end of each
# CMakeLists.txt that adds mpirun tests (get_test_property sees only the
# current directory's tests before CMake 3.28).
#
# Why: mpirun creates <tmpdir>/ompi.<host>.<uid> on start and removes it when
# its job ends. Open MPI 4.1 fails ("orte_session_dir failed", "mkdir ...: File
# exists") when two mpiruns race to create it, which ctest -j2, or a second
# build on the machine, makes happen now and then. A directory per test and
# build tree leaves nothing to race for. The base is kept short: PMIx puts its
# sockets below it, and a socket's path is limited to 107 bytes.
function(cairn_isolate_mpi_sessions)
  string(MD5 _tree "${CMAKE_BINARY_DIR}")
  string(SUBSTRING "${_tree}" 0 10 _tree)
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _tests)
    get_test_property("${_t}" LABELS _labels)
    if("mpi" IN_LIST _labels)
      set_property(TEST "${_t}" APPEND PROPERTY ENVIRONMENT
                   "OMPI_MCA_orte_tmpdir_base=/tmp/cairn-ompi-${_tree}/${_t}")
    endif()
  endforeach()
endfunction()
