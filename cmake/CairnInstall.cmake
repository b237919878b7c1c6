# Installation and packaging: libraries, headers, tools, CMake package and
# pkg-config file. Included at the end of the top-level CMakeLists.txt.
#
#   find_package(Cairn 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE cairn::cairn)         # shared
#   target_link_libraries(app PRIVATE cairn::cairn_static)  # static
#
#   cc app.c $(pkg-config --cflags --libs cairn)
#
# With MPI (libcairn_mpi, docs/mpi.md):
#   find_package(Cairn 0.1 REQUIRED COMPONENTS mpi)
#   target_link_libraries(app PRIVATE Cairn::cairn_mpi)
#   mpicc app.c $(pkg-config --cflags --libs cairn_mpi)
include(CMakePackageConfigHelpers)

set(CAIRN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Cairn"
    CACHE STRING "Where CairnConfig.cmake is installed (relative to the prefix)")
set(CAIRN_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where cairn.pc is installed (relative to the prefix)")

# Libraries (exported) ------------------------------------------------------
install(TARGETS cairn cairn_static
  EXPORT CairnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
          NAMELINK_COMPONENT devel
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# Public headers: include/cairn/*.h and *.hpp --------------------------------
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cairn
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.def")

# Tools (not exported: they are programs, not link targets) -----------------
install(TARGETS cairn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/cairn-plot DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
if(CAIRN_BUILD_BENCH AND TARGET cairn_bench)
  install(TARGETS cairn_bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()

# CMake package -------------------------------------------------------------
install(EXPORT CairnTargets
  NAMESPACE cairn::
  FILE CairnTargets.cmake
  DESTINATION ${CAIRN_INSTALL_CMAKEDIR} COMPONENT devel)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/CairnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/CairnConfig.cmake
  INSTALL_DESTINATION ${CAIRN_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/CairnConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)  # 0.x: minor versions may break the API
install(FILES ${PROJECT_BINARY_DIR}/CairnConfig.cmake ${PROJECT_BINARY_DIR}/CairnConfigVersion.cmake
  DESTINATION ${CAIRN_INSTALL_CMAKEDIR} COMPONENT devel)

# pkg-config ----------------------------------------------------------------
# Relocatable: the prefix is derived from the .pc file's own location, so
# `cmake --install build --prefix /anywhere` yields a working cairn.pc.
if(IS_ABSOLUTE "${CAIRN_INSTALL_PKGCONFIGDIR}")
  set(CAIRN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _cairn_pc_up "/prefix/${CAIRN_INSTALL_PKGCONFIGDIR}" "/prefix")
  string(REGEX REPLACE "/$" "" _cairn_pc_up "${_cairn_pc_up}")
  set(CAIRN_PC_PREFIX "\${pcfiledir}/${_cairn_pc_up}")
endif()
foreach(_d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_d}}")
    set(CAIRN_PC_${_d} "${CMAKE_INSTALL_${_d}}")
  else()
    set(CAIRN_PC_${_d} "\${prefix}/${CMAKE_INSTALL_${_d}}")
  endif()
endforeach()
# libcairn links hwloc when built with it: a static link must name it too.
# -lhwloc rather than Requires.private: hwloc, whose --static closure asks for
# hwloc's own static dependencies (libudev, ...), which a shared libhwloc
# does not need.
set(CAIRN_PC_LIBS_PRIVATE "")
if(CAIRN_HAVE_HWLOC)
  string(APPEND CAIRN_PC_LIBS_PRIVATE " -lhwloc")
endif()
if(CAIRN_HAVE_ISAL)
  string(APPEND CAIRN_PC_LIBS_PRIVATE " -lisal")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/cairn.pc.in ${PROJECT_BINARY_DIR}/cairn.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cairn.pc
  DESTINATION ${CAIRN_INSTALL_PKGCONFIGDIR} COMPONENT devel)

# The Fortran module cairn (bindings/fortran, docs/fortran.md): its static
# library and the directory of cairn.mod, over libcairn.
if(TARGET cairn_fortran)
  set(CAIRN_PC_NAME cairn_fortran)
  set(CAIRN_PC_DESCRIPTION "Cairn's Fortran module cairn")
  set(CAIRN_PC_DOC docs/fortran.md)
  set(CAIRN_PC_REQUIRES cairn)
  set(CAIRN_PC_LINK -lcairn_fortran)
  set(CAIRN_PC_CFLAGS " -I\${prefix}/${CAIRN_INSTALL_FORTRAN_MODDIR}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/cairn_library.pc.in ${PROJECT_BINARY_DIR}/cairn_fortran.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cairn_fortran.pc
    DESTINATION ${CAIRN_INSTALL_PKGCONFIGDIR} COMPONENT devel)
endif()

# libcairn_mpi (only when built): its own export set, so that CairnConfig.cmake
# looks for MPI only when the consumer asks for the mpi component or MPI is
# there (cmake/CairnConfig.cmake.in).
if(CAIRN_HAVE_MPI)
  install(TARGETS cairn_mpi
    EXPORT CairnMpiTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
            NAMELINK_COMPONENT devel)
  if(TARGET cairn_fortran_mpi)  # the Fortran module cairn_mpi (bindings/fortran)
    install(TARGETS cairn_fortran_mpi
      EXPORT CairnMpiTargets
      ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel)
  endif()
  # libcairn_fti (src/compat, docs/fti.md): FTI's API, with FTI's header name
  # (<prefix>/include/fti.h), so that an FTI program builds unchanged.
  if(TARGET cairn_fti)
    install(TARGETS cairn_fti
      EXPORT CairnMpiTargets
      LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
              NAMELINK_COMPONENT devel)
    install(FILES ${PROJECT_SOURCE_DIR}/include/fti.h
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel)
  endif()
  # The drop-in APIs' pkg-config files (cairn_veloc.pc, cairn_fti.pc), from
  # one template: name, description, link line.
  foreach(_api veloc fti)
    if(TARGET cairn_${_api})
      set(CAIRN_PC_NAME cairn_${_api})
      string(TOUPPER ${_api} _API)
      set(CAIRN_PC_DESCRIPTION "${_API}'s API over Cairn")
      set(CAIRN_PC_DOC docs/${_api}.md)
      set(CAIRN_PC_REQUIRES cairn_mpi)
      set(CAIRN_PC_LINK -lcairn_${_api})
      set(CAIRN_PC_CFLAGS "")
      configure_file(${PROJECT_SOURCE_DIR}/cmake/cairn_library.pc.in ${PROJECT_BINARY_DIR}/cairn_${_api}.pc @ONLY)
      install(FILES ${PROJECT_BINARY_DIR}/cairn_${_api}.pc
        DESTINATION ${CAIRN_INSTALL_PKGCONFIGDIR} COMPONENT devel)
    endif()
  endforeach()
  install(EXPORT CairnMpiTargets
    NAMESPACE Cairn::
    FILE CairnMpiTargets.cmake
    DESTINATION ${CAIRN_INSTALL_CMAKEDIR} COMPONENT devel)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/cairn_mpi.pc.in ${PROJECT_BINARY_DIR}/cairn_mpi.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cairn_mpi.pc
    DESTINATION ${CAIRN_INSTALL_PKGCONFIGDIR} COMPONENT devel)
endif()
