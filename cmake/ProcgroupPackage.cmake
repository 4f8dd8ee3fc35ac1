# Exported package: find_package(procgroup) gives procgroup::procgroup and
# procgroup::backend_headers.
include(CMakePackageConfigHelpers)
install(EXPORT procgroupTargets NAMESPACE procgroup::
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/procgroup")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/procgroupConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/procgroupConfig.cmake"
  INSTALL_DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/procgroup")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/procgroupConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/procgroupConfig.cmake"
              "${PROJECT_BINARY_DIR}/procgroupConfigVersion.cmake"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/procgroup")
export(EXPORT procgroupTargets NAMESPACE procgroup::
       FILE "${PROJECT_BINARY_DIR}/procgroupTargets.cmake")
