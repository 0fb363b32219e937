# ferrox_target_pch(<target> <header>...): with FERROX_PCH=ON, compile the
# heavy headers a target's files share (CLI11, nlohmann-json, fmt, the
# standard library) once per target instead of once per file. For a cold build
# on a fresh machine (ci/main-job.sh); off by default because ccache cannot
# reuse a precompiled header's objects, and CI's repeated builds live on ccache.
option(FERROX_PCH "Precompile the headers each target's files share (cold builds)" OFF)
function(ferrox_target_pch target)
  if(FERROX_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()
