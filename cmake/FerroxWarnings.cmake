# ferrox_target_warnings(<target>): the project's warning set, errors in CI.
function(ferrox_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
      -Wdouble-promotion -Wformat=2>)
  if(FERROX_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
  endif()
  if(FERROX_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
