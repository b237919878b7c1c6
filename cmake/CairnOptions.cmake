# Warnings and sanitizers applied to every Cairn target through cairn_options.
# The warning flags are C/C++ only (bindings/fortran sets its own); -Werror and
# the sanitizer compile and link flags apply to every language, Fortran
# included: gfortran accepts them, and a Fortran program linked against a
# sanitized libcairn needs -fsanitize= on its link line.
add_library(cairn_options INTERFACE)
target_compile_options(cairn_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers>)
if(CAIRN_WERROR)
  target_compile_options(cairn_options INTERFACE -Werror)
endif()
# Clang's thread-safety analysis (util/thread_annotations.hpp): GUARDED_BY,
# REQUIRES and EXCLUDES are checked, and a violation fails the build. The
# "tsa" preset and scripts/test.sh ("thread-safety (clang)") turn it on in a
# clang++-14 tree, build-tsa/, that is compiled but not run.
option(CAIRN_THREAD_SAFETY "Compile with clang -Wthread-safety -Werror=thread-safety" OFF)
if(CAIRN_THREAD_SAFETY)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CAIRN_THREAD_SAFETY=ON needs clang (CMAKE_CXX_COMPILER=clang++-14); "
                        "got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  target_compile_options(cairn_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety -Werror=thread-safety>)
endif()
# libFuzzer targets (fuzz/, docs/design.md "Fuzzing"): bin/fuzz_* in this
# tree, with ASan and UBSan. The "fuzz" preset makes a clang++-14 tree in
# build-fuzz/ that builds only them; scripts/fuzz.sh runs them.
option(CAIRN_FUZZ "Build the libFuzzer targets bin/fuzz_* (clang only)" OFF)
if(CAIRN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CAIRN_FUZZ=ON needs clang's libFuzzer (-fsanitize=fuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 "
                        "(or cmake --preset fuzz); got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(CAIRN_SANITIZE AND NOT CAIRN_SANITIZE STREQUAL "address,undefined")
    message(FATAL_ERROR "CAIRN_FUZZ=ON builds with ASan and UBSan; CAIRN_SANITIZE must be empty "
                        "or 'address,undefined', not '${CAIRN_SANITIZE}'")
  endif()
endif()
if(CAIRN_SANITIZE)
  # Line tables for symbolized reports. Builds with debug info (Debug,
  # RelWithDebInfo) keep what their flags give: a full -g here would double the
  # compile time of the sanitizer builds (scripts/test.sh uses -O1 -g1).
  target_compile_options(cairn_options INTERFACE -fsanitize=${CAIRN_SANITIZE} -fno-omit-frame-pointer
                         $<$<CONFIG:Release,MinSizeRel>:-g1>)
  target_link_options(cairn_options INTERFACE -fsanitize=${CAIRN_SANITIZE})
  if(CAIRN_SANITIZE MATCHES "undefined")
    target_compile_options(cairn_options INTERFACE -fno-sanitize-recover=undefined)
  endif()
endif()

# --- GPU tier (src/gpu, testing/fake_cuda, docs/gpu.md) ----------------------
# CAIRN_WITH_CUDA: AUTO builds the CUDA backend when the toolkit's cuda.h is
# found, ON requires it, OFF leaves it out (src/gpu compiles to a stub whose
# loader returns kUnsupported). Only the header is needed at build time: the
# driver (libcuda.so.1) is loaded at run time, never linked.
set(CAIRN_WITH_CUDA AUTO CACHE STRING "CUDA backend: AUTO (if cuda.h is found), ON or OFF")
set_property(CACHE CAIRN_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set(CAIRN_HAVE_CUDA OFF)
if(NOT CAIRN_WITH_CUDA STREQUAL "AUTO" AND NOT CAIRN_WITH_CUDA)
  message(STATUS "Cairn: CUDA backend disabled (CAIRN_WITH_CUDA=${CAIRN_WITH_CUDA})")
else()
  find_package(CUDAToolkit QUIET)
  find_path(CAIRN_CUDA_INCLUDE_DIR cuda.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDA_HOME ENV CUDA_PATH
            PATHS /usr/local/cuda PATH_SUFFIXES include)
  set(_cairn_cuda_version 0)
  if(CAIRN_CUDA_INCLUDE_DIR)
    file(STRINGS "${CAIRN_CUDA_INCLUDE_DIR}/cuda.h" _cairn_cuda_line
         REGEX "^#define CUDA_VERSION [0-9]+")
    string(REGEX MATCH "[0-9]+" _cairn_cuda_version "${_cairn_cuda_line}")
  endif()
  if(CAIRN_CUDA_INCLUDE_DIR AND _cairn_cuda_version GREATER_EQUAL 12000)
    set(CAIRN_HAVE_CUDA ON)
    message(STATUS "Cairn: CUDA backend on (cuda.h ${_cairn_cuda_version} in ${CAIRN_CUDA_INCLUDE_DIR})")
  elseif(CAIRN_CUDA_INCLUDE_DIR AND CAIRN_WITH_CUDA STREQUAL "AUTO")
    message(STATUS "Cairn: CUDA backend off (cuda.h ${_cairn_cuda_version} is older than 12.0)")
  elseif(CAIRN_CUDA_INCLUDE_DIR)
    message(FATAL_ERROR "CAIRN_WITH_CUDA=${CAIRN_WITH_CUDA}: cuda.h ${_cairn_cuda_version} in "
                        "${CAIRN_CUDA_INCLUDE_DIR} is older than CUDA 12.0")
  elseif(CAIRN_WITH_CUDA STREQUAL "AUTO")
    message(STATUS "Cairn: CUDA backend off (cuda.h not found; set CUDAToolkit_ROOT)")
  else()
    message(FATAL_ERROR "CAIRN_WITH_CUDA=${CAIRN_WITH_CUDA} but cuda.h was not found "
                        "(set CUDAToolkit_ROOT or CUDA_HOME)")
  endif()
endif()

# --- MPI (libcairn_mpi, src/mpi, docs/mpi.md) ---------------------------------
# CAIRN_WITH_MPI: AUTO builds libcairn_mpi (target Cairn::cairn_mpi) when an
# MPI C library is found, ON requires one (CI: a missing MPI fails the
# configure), OFF leaves it out. libcairn itself never links MPI.
set(CAIRN_WITH_MPI AUTO CACHE STRING "libcairn_mpi: AUTO (if MPI is found), ON or OFF")
set_property(CACHE CAIRN_WITH_MPI PROPERTY STRINGS AUTO ON OFF)
set(CAIRN_HAVE_MPI OFF)
if(NOT CAIRN_WITH_MPI STREQUAL "AUTO" AND NOT CAIRN_WITH_MPI)
  message(STATUS "Cairn: MPI library disabled (CAIRN_WITH_MPI=${CAIRN_WITH_MPI})")
else()
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(CAIRN_HAVE_MPI ON)
    message(STATUS "Cairn: libcairn_mpi on (MPI ${MPI_C_VERSION}, ${MPIEXEC_EXECUTABLE})")
  elseif(CAIRN_WITH_MPI STREQUAL "AUTO")
    message(STATUS "Cairn: libcairn_mpi off (no MPI C library found; Debian: libopenmpi-dev)")
  else()
    message(FATAL_ERROR "CAIRN_WITH_MPI=${CAIRN_WITH_MPI} but no MPI C library was found "
                        "(install Debian's libopenmpi-dev openmpi-bin: scripts/deps.sh)")
  endif()
endif()

# --- Chunk hashing for change detection (src/util/hash128.*) ------------------
# CAIRN_WITH_XXHASH: AUTO uses XXH3-128 when xxhash.h (Debian's libxxhash-dev,
# xxHash >= 0.8) is found, ON requires it, OFF leaves it out. Header-only
# (XXH_INLINE_ALL): nothing is linked, libcairn gains no run-time dependency.
# Without it `checkpoint.changes = hash` uses a built-in 128-bit hash
# (docs/design.md, "Change detection").
set(CAIRN_WITH_XXHASH AUTO CACHE STRING "XXH3-128 for change detection: AUTO (if xxhash.h is found), ON or OFF")
set_property(CACHE CAIRN_WITH_XXHASH PROPERTY STRINGS AUTO ON OFF)
set(CAIRN_HAVE_XXHASH OFF)
if(NOT CAIRN_WITH_XXHASH STREQUAL "AUTO" AND NOT CAIRN_WITH_XXHASH)
  message(STATUS "Cairn: XXH3 disabled (CAIRN_WITH_XXHASH=${CAIRN_WITH_XXHASH}); the built-in hash is used")
else()
  find_path(CAIRN_XXHASH_INCLUDE_DIR xxhash.h)
  set(_cairn_xxh_minor 0)
  if(CAIRN_XXHASH_INCLUDE_DIR)
    file(STRINGS "${CAIRN_XXHASH_INCLUDE_DIR}/xxhash.h" _cairn_xxh_line
         REGEX "^#define XXH_VERSION_MINOR +[0-9]+")
    string(REGEX MATCH "[0-9]+$" _cairn_xxh_minor "${_cairn_xxh_line}")
  endif()
  if(CAIRN_XXHASH_INCLUDE_DIR AND _cairn_xxh_minor GREATER_EQUAL 8)
    set(CAIRN_HAVE_XXHASH ON)
    message(STATUS "Cairn: XXH3-128 for change detection (xxhash.h in ${CAIRN_XXHASH_INCLUDE_DIR})")
  elseif(CAIRN_WITH_XXHASH STREQUAL "AUTO")
    message(STATUS "Cairn: xxhash.h >= 0.8 not found; change detection uses the built-in hash")
  else()
    message(FATAL_ERROR "CAIRN_WITH_XXHASH=${CAIRN_WITH_XXHASH} but xxhash.h (0.8 or newer) was not "
                        "found: install libxxhash-dev")
  endif()
endif()

# --- Optional libraries found with pkg-config ---------------------------------
# cairn_optional_pkg(NAME MODULE WHAT WITHOUT DEBIAN): the cache option
# CAIRN_WITH_<NAME> (AUTO uses the library when pkg-config finds MODULE, ON
# requires it, OFF leaves it out) and, when used, CAIRN_HAVE_<NAME> ON and
# pkg-config's CAIRN_<NAME>_INCLUDE_DIRS, _LINK_LIBRARIES and _VERSION (src/
# CMakeLists.txt compiles and links libcairn with them). WHAT: what it
# gives; WITHOUT: what Cairn does without it; DEBIAN: the package. A macro,
# so that pkg-config's variables land in the caller's scope.
macro(cairn_optional_pkg name module what without debian)
  set(CAIRN_WITH_${name} AUTO CACHE STRING "${what}: AUTO (if pkg-config finds ${module}), ON or OFF")
  set_property(CACHE CAIRN_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  set(CAIRN_HAVE_${name} OFF)
  if(NOT CAIRN_WITH_${name} STREQUAL "AUTO" AND NOT CAIRN_WITH_${name})
    message(STATUS "Cairn: ${module} disabled (CAIRN_WITH_${name}=${CAIRN_WITH_${name}}); ${without}")
  else()
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(CAIRN_${name} QUIET ${module})
    endif()
    if(CAIRN_${name}_FOUND)
      set(CAIRN_HAVE_${name} ON)
      message(STATUS "Cairn: ${what} (${module}, ${CAIRN_${name}_VERSION})")
    elseif(CAIRN_WITH_${name} STREQUAL "AUTO")
      message(STATUS "Cairn: ${module} not found (pkg-config); ${without}")
    else()
      message(FATAL_ERROR "CAIRN_WITH_${name}=${CAIRN_WITH_${name}} but pkg-config found no ${module}: "
                          "install ${debian}")
    endif()
  endif()
endmacro()

# Topology through hwloc (src/os/mem/numa.cpp): with it the NUMA topology
# comes from hwloc, so HWLOC_XMLFILE can stand in another machine's layout
# (tests/data/topology-2pkg-4numa.xml); without it from
# /sys/devices/system/node (docs/design.md, "Placement").
cairn_optional_pkg(HWLOC "hwloc>=2.0" "NUMA topology through hwloc" "topology from sysfs" libhwloc-dev)

# Reed-Solomon sets through Intel's ISA-L (src/redundancy/parity/rs_code.cpp):
# without it `mpi.l3_code = rs` is a configuration error naming the missing
# library; the XOR sets need nothing (docs/mpi.md, "Parity (L3)").
cairn_optional_pkg(ISAL "libisal>=2.20" "Reed-Solomon L3 sets through ISA-L" "L3 sets are XOR only" libisal-dev)

# What every fuzz-tree target is compiled with: libFuzzer's coverage
# instrumentation, ASan and UBSan (CAIRN_SANITIZE adds the same when set),
# line tables for the reports. The fuzz_* executables link -fsanitize=fuzzer.
if(CAIRN_FUZZ)
  add_library(cairn_fuzz_options INTERFACE)
  target_compile_options(cairn_fuzz_options INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer -g1)
  target_link_options(cairn_fuzz_options INTERFACE -fsanitize=address,undefined)
endif()

# cairn_mpi_library(<target> MAP <version script> EXPORT_NAME <name>
#                   [DEFINE <private definitions>...] SOURCES <sources>...)
# One of the MPI-side shared libraries (libcairn_mpi, libcairn_veloc,
# libcairn_fti): linked to MPI's C library, versioned like libcairn, hidden
# visibility with the version script naming what it exports, alias
# Cairn::<name>. Its install rules are the caller's (cmake/CairnInstall.cmake).
function(cairn_mpi_library target)
  cmake_parse_arguments(ARG "" "MAP;EXPORT_NAME" "DEFINE;SOURCES" ${ARGN})
  add_library(${target} SHARED ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC MPI::MPI_C PRIVATE $<BUILD_INTERFACE:cairn_options>)
  target_compile_definitions(${target} PRIVATE ${ARG_DEFINE})
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR} EXPORT_NAME ${ARG_EXPORT_NAME}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${ARG_MAP})
  target_link_options(${target} PRIVATE -Wl,--version-script=${ARG_MAP})
  add_library(Cairn::${ARG_EXPORT_NAME} ALIAS ${target})
endfunction()
