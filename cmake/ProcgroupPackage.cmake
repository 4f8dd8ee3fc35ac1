# Exported package. find_package(procgroup) gives procgroup::procgroup, procgroup::headers,
# procgroup::backend_headers and, when it was built, procgroup::ddp (component "ddp");
# pkg-config gets procgroup.pc (programs), procgroup-ddp.pc (ddp, when it was built) and
# procgroup-backend.pc (plugin authors).
include(CMakePackageConfigHelpers)
set(PROCGROUP_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/procgroup")
install(EXPORT procgroupTargets NAMESPACE procgroup::
        DESTINATION "${PROCGROUP_CMAKE_INSTALL_DIR}")
# The toolkit ddp was built with: the config's hint for find_dependency(CUDAToolkit).
set(PROCGROUP_CUDA_ROOT "")
if(PROCGROUP_HAVE_CUDA)
  get_filename_component(PROCGROUP_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/procgroupConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/procgroupConfig.cmake"
  INSTALL_DESTINATION "${PROCGROUP_CMAKE_INSTALL_DIR}"
  PATH_VARS PROCGROUP_PLUGIN_INSTALL_DIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/procgroupConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/procgroupConfig.cmake"
              "${PROJECT_BINARY_DIR}/procgroupConfigVersion.cmake"
        DESTINATION "${PROCGROUP_CMAKE_INSTALL_DIR}")
export(EXPORT procgroupTargets NAMESPACE procgroup::
       FILE "${PROJECT_BINARY_DIR}/procgroupTargets.cmake")

# pkg-config files, relocatable: every path is relative to ${pcfiledir}, so they stay
# right after `cmake --install --prefix <anywhere>` or a moved tree. An absolute
# CMAKE_INSTALL_<dir> is taken as it is.
set(PROCGROUP_PKGCONFIG_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${PROCGROUP_PKGCONFIG_INSTALL_DIR}")
  set(PROCGROUP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  # One ".." per component of lib/pkgconfig (or lib/<multiarch>/pkgconfig).
  string(REGEX REPLACE "[^/]+" ".." _pg_up "${PROCGROUP_PKGCONFIG_INSTALL_DIR}")
  set(PROCGROUP_PC_PREFIX "\${pcfiledir}/${_pg_up}")
endif()
foreach(_pg_kind LIBDIR INCLUDEDIR BINDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_pg_kind}}")
    set(PROCGROUP_PC_${_pg_kind} "${CMAKE_INSTALL_${_pg_kind}}")
  else()
    set(PROCGROUP_PC_${_pg_kind} "\${prefix}/${CMAKE_INSTALL_${_pg_kind}}")
  endif()
endforeach()
# The interface version plugins negotiate, read from the header that defines it.
file(STRINGS "${PROJECT_SOURCE_DIR}/api/include/procgroup/procgroup_backend.h" _pg_iface
     REGEX "^#define PG_BACKEND_INTERFACE_VERSION ")
string(REGEX MATCH "[0-9]+" PROCGROUP_BACKEND_INTERFACE_VERSION "${_pg_iface}")
set(_pg_pcs procgroup procgroup-backend)
if(TARGET procgroup_ddp)
  list(APPEND _pg_pcs procgroup-ddp)
  # The static CUDA runtime and what it needs (as CUDA::cudart_static gives CMake consumers).
  set(PROCGROUP_PC_DDP_CUDA_LIBS "")
  if(PROCGROUP_HAVE_CUDA)
    get_filename_component(_pg_cudart_dir "${CUDA_cudart_static_LIBRARY}" DIRECTORY)
    set(PROCGROUP_PC_DDP_CUDA_LIBS "-L${_pg_cudart_dir} -lcudart_static -ldl -lrt -pthread")
  endif()
endif()
foreach(_pg_pc IN LISTS _pg_pcs)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/${_pg_pc}.pc.in"
                 "${PROJECT_BINARY_DIR}/pkgconfig/${_pg_pc}.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/${_pg_pc}.pc"
          DESTINATION "${PROCGROUP_PKGCONFIG_INSTALL_DIR}")
endforeach()
