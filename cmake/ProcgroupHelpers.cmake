# procgroup_tristate_option(NAME doc): AUTO (build when the dependency is found), ON
# (required) or OFF.
function(procgroup_tristate_option name doc)
  set(${name} AUTO CACHE STRING "${doc}: AUTO, ON or OFF")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
endfunction()

# procgroup_dependency_decision(OPTION FOUND WHAT RESULT_VAR): applies the tristate to a
# dependency check, says the outcome in the configure output, fails when ON but missing.
function(procgroup_dependency_decision option found what result_var)
  if(${option} STREQUAL "OFF")
    message(STATUS "procgroup: ${option}=OFF: not building it")
    set(${result_var} FALSE PARENT_SCOPE)
  elseif(found)
    message(STATUS "procgroup: ${option}=${${option}}: building it (${what} found)")
    set(${result_var} TRUE PARENT_SCOPE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "procgroup: ${option}=ON but ${what} was not found")
  else()
    message(STATUS "procgroup: ${option}=AUTO: not building it (${what} not found)")
    set(${result_var} FALSE PARENT_SCOPE)
  endif()
endfunction()

# procgroup_add_backend(NAME SOURCES ... [LIBRARIES ...]): a plugin MODULE named
# libprocgroup-<NAME>.so in lib/procgroup/ of the build tree and of the install tree.
# It sees procgroup_backend.h only, and exports only pg_backend_negotiate.
function(procgroup_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;DEFINITIONS" ${ARGN})
  set(target procgroup_backend_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "procgroup-${name}"
    LIBRARY_OUTPUT_DIRECTORY "${PROCGROUP_PLUGIN_OUTPUT_DIR}")
  target_link_libraries(${target} PRIVATE procgroup_backend_headers procgroup_warnings
                        ${ARG_LIBRARIES})
  target_compile_definitions(${target} PRIVATE ${ARG_DEFINITIONS})
  target_link_options(${target} PRIVATE
    "-Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/backend.map" "-Wl,--no-undefined")
  install(TARGETS ${target} LIBRARY DESTINATION "${PROCGROUP_PLUGIN_INSTALL_DIR}")
endfunction()

# procgroup_add_gtest(NAME SOURCES ... LIBRARIES ... LABELS ... [TIMEOUT s]): one gtest
# binary whose tests ctest runs one by one (parallel-safe), each bounded by TIMEOUT.
function(procgroup_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 60)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main procgroup_warnings
                        ${ARG_LIBRARIES})
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
