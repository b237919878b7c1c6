# cmake -DPCH=<dir>/cmake_pch.hxx -P pch_sum.cmake: writes <PCH>.gch.sum, a
# digest of what the precompiled header was built from: the text of every
# file its compile read (the depfile <PCH>.gch.d lists them). ccache
# (CCACHE_PCH_EXTSUM, scripts/test.sh) hashes this file instead of the .gch,
# whose bytes differ at every build even from the same headers, so that the
# test objects compiled with it can come from the cache. The compiler and
# the flags are in ccache's hash of each test object already.
if(NOT EXISTS "${PCH}.gch.d")  # a generator that deletes depfiles (Ninja):
  file(REMOVE "${PCH}.gch.sum")  # no digest, ccache hashes the .gch itself
  return()
endif()
file(READ "${PCH}.gch.d" _deps)
string(REGEX REPLACE "\\\\\n" " " _deps "${_deps}")    # line continuations
string(REGEX REPLACE "^[^:]*:" "" _deps "${_deps}")     # the target
string(REGEX REPLACE "[ \t\n]+" ";" _deps "${_deps}")
set(_sums "")
foreach(_f IN LISTS _deps)
  if(_f STREQUAL "")
    continue()
  endif()
  get_filename_component(_name "${_f}" NAME)
  if(NOT IS_ABSOLUTE "${_f}")
    get_filename_component(_f "${_f}" ABSOLUTE BASE_DIR "${DIR}")
  endif()
  file(SHA256 "${_f}" _h)
  string(APPEND _sums "${_name} ${_h}\n")  # names, not paths: the same in every checkout
endforeach()
string(SHA256 _sum "${_sums}")
file(WRITE "${PCH}.gch.sum" "${_sum}\n")
