# Packaging: what `cmake --install` adds beyond the targets (config file, man
# page, Debian docs, CMake package config, pkg-config file) and the CPack DEB
# description of the three packages built from this one tree:
#   ferrox        component `ferrox`: CLI, libferrox_core.so.0, CPU plugin, config
#   ferrox-cuda   component `cuda`:   the CUDA plugin only
#   libferrox-dev component `dev`:    headers, .so link, CMake config, ferrox.pc
# docs/packaging.md explains the choices; packaging/test-debs.sh checks them.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(FERROX_PACKAGING_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(FERROX_PACKAGE_MAINTAINER "ferrox developers <ferrox-dev@example.org>" CACHE STRING
    "Maintainer field of the Debian packages")
set(FERROX_PACKAGE_RELEASE "1" CACHE STRING "Debian revision appended to the version (0.1.0-<this>)")
set(FERROX_DEB_VERSION "${PROJECT_VERSION}-${FERROX_PACKAGE_RELEASE}")

# ---- RPATH policy -----------------------------------------------------------
# A libdir the linker searches anyway (/usr/lib/x86_64-linux-gnu) needs no
# RPATH, and Debian policy forbids a useless one. Any other prefix (a tarball,
# /opt) keeps the top-level's $ORIGIN-relative RPATH so the tree can move.
if("${CMAKE_INSTALL_FULL_LIBDIR}" IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
  set_target_properties(ferrox ferrox_core PROPERTIES INSTALL_RPATH "")
endif()
# Plugins link nothing of ferrox (only the C ABI), so they need no RPATH at all.
foreach(plugin ferrox_cpu ferrox_cuda)
  if(TARGET ${plugin})
    set_target_properties(${plugin} PROPERTIES INSTALL_RPATH "")
  endif()
endforeach()

# ---- files installed beside the targets ------------------------------------
set(FERROX_DOC_PACKAGES ferrox)
if(TARGET ferrox_cuda)
  list(APPEND FERROX_DOC_PACKAGES ferrox-cuda)
endif()
list(APPEND FERROX_DOC_PACKAGES libferrox-dev)
set(FERROX_COMPONENT_ferrox ferrox)
set(FERROX_COMPONENT_ferrox-cuda cuda)
set(FERROX_COMPONENT_libferrox-dev dev)

# The default configuration. With prefix /usr, GNUInstallDirs maps sysconfdir
# to /etc (a conffile there); any other prefix keeps it inside the prefix
# (<prefix>/etc/ferrox), so a relocatable tree never writes outside itself.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(ferrox_config_destination "${CMAKE_INSTALL_FULL_SYSCONFDIR}/ferrox")
else()
  set(ferrox_config_destination "${CMAKE_INSTALL_SYSCONFDIR}/ferrox")
endif()
install(FILES "${PROJECT_SOURCE_DIR}/config/ferrox.yaml"
        DESTINATION "${ferrox_config_destination}" COMPONENT ferrox)

# The systemd unit of `ferrox serve` (not enabled: no maintainer script touches
# it), and, in ferrox-cuda, the drop-in that opens /dev/nvidia* to it. Only for
# prefix /usr: the unit names /usr/bin/ferrox and /etc/ferrox/ferrox.yaml, and
# a relocatable tree must not write outside itself. /lib, not /usr/lib: where
# Debian 12 packages put units (lintian warns about /usr/lib/systemd/system).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  install(FILES "${FERROX_PACKAGING_DIR}/systemd/ferrox-server.service"
          DESTINATION /lib/systemd/system COMPONENT ferrox)
  if(TARGET ferrox_cuda)
    install(FILES "${FERROX_PACKAGING_DIR}/systemd/ferrox-server.service.d/cuda.conf"
            DESTINATION /lib/systemd/system/ferrox-server.service.d COMPONENT cuda)
  endif()
endif()

# gzip -n: no name or time stamp in the header, so the .gz is reproducible.
find_program(FERROX_GZIP gzip REQUIRED)
set(ferrox_gz_outputs "")
function(ferrox_gzip_file source output)
  add_custom_command(OUTPUT "${output}"
    COMMAND "${FERROX_GZIP}" -9n -c "${source}" > "${output}"
    DEPENDS "${source}" VERBATIM)
endfunction()

set(ferrox_pkg_build "${PROJECT_BINARY_DIR}/packaging")
ferrox_gzip_file("${FERROX_PACKAGING_DIR}/man/ferrox.1" "${ferrox_pkg_build}/ferrox.1.gz")
list(APPEND ferrox_gz_outputs "${ferrox_pkg_build}/ferrox.1.gz")
install(FILES "${ferrox_pkg_build}/ferrox.1.gz"
        DESTINATION "${CMAKE_INSTALL_MANDIR}/man1" COMPONENT ferrox)

# Each package carries its own copyright and changelog.Debian.gz (policy 12.5,
# 12.7); the changelog's newest entry is this build's version.
string(TIMESTAMP FERROX_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(pkg IN LISTS FERROX_DOC_PACKAGES)
  set(FERROX_CHANGELOG_PACKAGE ${pkg})
  configure_file("${FERROX_PACKAGING_DIR}/debian/changelog.in"
                 "${ferrox_pkg_build}/${pkg}/changelog.Debian" @ONLY)
  ferrox_gzip_file("${ferrox_pkg_build}/${pkg}/changelog.Debian"
                   "${ferrox_pkg_build}/${pkg}/changelog.Debian.gz")
  list(APPEND ferrox_gz_outputs "${ferrox_pkg_build}/${pkg}/changelog.Debian.gz")
  install(FILES "${FERROX_PACKAGING_DIR}/debian/copyright"
                "${ferrox_pkg_build}/${pkg}/changelog.Debian.gz"
          DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg}"
          COMPONENT ${FERROX_COMPONENT_${pkg}})
endforeach()
add_custom_target(ferrox_packaging_files ALL DEPENDS ${ferrox_gz_outputs})

# ---- find_package(ferrox): ferrox::core and ferrox::abi ---------------------
set(FERROX_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/ferrox")
install(EXPORT ferroxTargets NAMESPACE ferrox:: DESTINATION "${FERROX_CMAKE_INSTALL_DIR}"
        COMPONENT dev)
configure_package_config_file("${FERROX_PACKAGING_DIR}/cmake/ferroxConfig.cmake.in"
  "${ferrox_pkg_build}/ferroxConfig.cmake" INSTALL_DESTINATION "${FERROX_CMAKE_INSTALL_DIR}")
# 0.x: a minor release may break the C++ API, so only the same minor matches.
write_basic_package_version_file("${ferrox_pkg_build}/ferroxConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${ferrox_pkg_build}/ferroxConfig.cmake" "${ferrox_pkg_build}/ferroxConfigVersion.cmake"
        DESTINATION "${FERROX_CMAKE_INSTALL_DIR}" COMPONENT dev)

configure_file("${FERROX_PACKAGING_DIR}/pkgconfig/ferrox.pc.in" "${ferrox_pkg_build}/ferrox.pc" @ONLY)
install(FILES "${ferrox_pkg_build}/ferrox.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig" COMPONENT dev)

# ---- CPack: three .deb packages ---------------------------------------------
set(CPACK_PACKAGE_NAME ferrox)
set(CPACK_PACKAGE_VENDOR "ferrox developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${FERROX_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/ferrox-project/ferrox")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")

set(CPACK_COMPONENTS_ALL ferrox dev)
if(TARGET ferrox_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
endif()
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE ${FERROX_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${FERROX_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

# ferrox
set(CPACK_DEBIAN_FERROX_PACKAGE_NAME ferrox)
set(CPACK_DEBIAN_FERROX_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FERROX_PACKAGE_SHLIBDEPS ON)
# shlibs control file for libferrox_core.so.0 (policy 8.6; CPack's switch is
# global, and only ferrox ships a versioned library). The ldconfig trigger comes
# from debian/ferrox/triggers.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_FERROX_PACKAGE_SUGGESTS ferrox-cuda)
set(CPACK_DEBIAN_FERROX_PACKAGE_CONTROL_EXTRA
    "${FERROX_PACKAGING_DIR}/debian/ferrox/conffiles" "${FERROX_PACKAGING_DIR}/debian/ferrox/triggers")
set(CPACK_DEBIAN_FERROX_DESCRIPTION
"GGUF language-model inference engine with backend plugins
ferrox runs GGUF-quantized language models on whatever compute a host has.
Each compute backend is a plugin loaded at run time; a YAML file
(/etc/ferrox/ferrox.yaml) says which backends to use and in which order.

This package contains the ferrox command, the libferrox_core shared library
and the CPU backend plugin. Install ferrox-cuda for NVIDIA GPUs.")

# ferrox-cuda
set(CPACK_DEBIAN_CUDA_PACKAGE_NAME ferrox-cuda)
set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION science)
set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "ferrox (= ${FERROX_DEB_VERSION})")
# The plugin links CUDA 13's runtime statically; that runtime needs a driver of
# branch 580 or newer. Without one the plugin reports "no-driver" and ferrox
# carries on with the next backend.
set(CPACK_DEBIAN_CUDA_PACKAGE_RECOMMENDS "libcuda1 (>= 580) | libcuda.so.1")
set(CPACK_DEBIAN_CUDA_DESCRIPTION
"NVIDIA CUDA backend plugin for the ferrox inference engine
ferrox runs GGUF-quantized language models with backend plugins.
This package adds the CUDA backend (libferrox_cuda.so) to the ferrox plugin
folder. List cuda in backends.order of /etc/ferrox/ferrox.yaml to use it.

The plugin carries the CUDA 13 runtime and needs an NVIDIA driver of
branch 580 or newer (libcuda.so.1). Without one it reports a no-driver
state and ferrox uses the next backend.")

# libferrox-dev
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libferrox-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "ferrox (= ${FERROX_DEB_VERSION}), libspdlog-dev, libfmt-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
"development files for libferrox_core and ferrox backend plugins
ferrox runs GGUF-quantized language models with backend plugins.
This package contains the C++ headers of libferrox_core, the C ABI header
for third-party backend plugins (ferrox/backend_abi.h), a CMake package
(find_package(ferrox): ferrox::core, ferrox::abi) and ferrox.pc.")

include(CPack)
