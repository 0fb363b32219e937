# ctest script: the CUDA plugin's dynamic section must not NEED libcuda or
# libcudart (the runtime is static, the driver is opened only by create()),
# and the plugin must export its two entries and no other function.
# Usage: cmake -DPLUGIN=<path to libferrox_cuda.so> -P check_plugin_links.cmake
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -d -W ${PLUGIN}
  OUTPUT_VARIABLE dynamic RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "readelf -d ${PLUGIN} failed (${status})")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*" needed "${dynamic}")
message(STATUS "NEEDED of ${PLUGIN}:")
foreach(line IN LISTS needed)
  message(STATUS "  ${line}")
endforeach()
if(NOT needed)
  message(FATAL_ERROR "no NEEDED entries at all: is ${PLUGIN} a shared object?")
endif()
if(dynamic MATCHES "\\(NEEDED\\)[^\n]*libcuda")
  message(FATAL_ERROR "${PLUGIN} NEEDS a CUDA driver or runtime library: a CPU-only host could not load it")
endif()

execute_process(COMMAND ${READELF} --dyn-syms -W ${PLUGIN}
  OUTPUT_VARIABLE symbols RESULT_VARIABLE status)
string(REGEX MATCHALL "FUNC +GLOBAL +DEFAULT +[0-9]+ [^\n]*" exported "${symbols}")
set(names "")
foreach(line IN LISTS exported)
  string(REGEX REPLACE ".* ([^ ]+)$" "\\1" name "${line}")
  list(APPEND names ${name})
endforeach()
list(SORT names)
message(STATUS "exported functions: ${names}")
if(NOT names STREQUAL "ferrox_plugin_create;ferrox_plugin_describe")
  message(FATAL_ERROR "the plugin must export exactly ferrox_plugin_describe and ferrox_plugin_create")
endif()
