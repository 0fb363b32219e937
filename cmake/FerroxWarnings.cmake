# ferrox_target_warnings(<target>): the project's warning set, errors in CI.
function(ferrox_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
      -Wdouble-promotion -Wformat=2>)
  # GCC 12 at -O3 reports impossible memcpy overlaps inside std::string (GCC PR 105329).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
  endif()
  if(FERROX_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
  endif()
  if(FERROX_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer>)
    # ASan's instrumentation makes GCC 12 report uninitialised reads inside libstdc++
    # (std::function in <regex>) that are not there; the plain build keeps the warning.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:-Wno-maybe-uninitialized>)
    endif()
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
