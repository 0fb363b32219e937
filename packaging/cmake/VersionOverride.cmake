# Included right after project() via -DCMAKE_PROJECT_INCLUDE=<this file>:
# -DFERROX_VERSION_OVERRIDE=X.Y.Z replaces the project version everywhere
# (binaries' --version, the core's SONAME version, package versions). Used by
# the upgrade test to build a 0.1.1 next to 0.1.0 without editing sources.
if(FERROX_VERSION_OVERRIDE)
  if(NOT FERROX_VERSION_OVERRIDE MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "FERROX_VERSION_OVERRIDE must be X.Y.Z, got '${FERROX_VERSION_OVERRIDE}'")
  endif()
  foreach(prefix PROJECT ${PROJECT_NAME} CMAKE_PROJECT)
    set(${prefix}_VERSION ${FERROX_VERSION_OVERRIDE})
    set(${prefix}_VERSION_MAJOR ${CMAKE_MATCH_1})
    set(${prefix}_VERSION_MINOR ${CMAKE_MATCH_2})
    set(${prefix}_VERSION_PATCH ${CMAKE_MATCH_3})
  endforeach()
  message(STATUS "ferrox: version overridden to ${FERROX_VERSION_OVERRIDE}")
endif()
