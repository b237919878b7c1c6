# Warnings and sanitizers applied to every Cairn target through cairn_options.
add_library(cairn_options INTERFACE)
target_compile_options(cairn_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers>)
if(CAIRN_WERROR)
  target_compile_options(cairn_options INTERFACE -Werror)
endif()
if(CAIRN_SANITIZE)
  target_compile_options(cairn_options INTERFACE -fsanitize=${CAIRN_SANITIZE} -fno-omit-frame-pointer -g)
  target_link_options(cairn_options INTERFACE -fsanitize=${CAIRN_SANITIZE})
  if(CAIRN_SANITIZE MATCHES "undefined")
    target_compile_options(cairn_options INTERFACE -fno-sanitize-recover=undefined)
  endif()
endif()
