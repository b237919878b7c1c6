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
