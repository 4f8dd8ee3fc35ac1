# The installed package, used only through what `cmake --install` laid out (ctest -P
# script, one STEP per test; tests/install/CMakeLists.txt chains them with fixtures):
#   install   install the build tree into WORK_DIR/prefix and check the layout
#   consumer  find_package(procgroup 1.0) consumers at C++17 (the package brings C++20), the
#             version checks, a C program and C++ programs with pkg-config; CPU-only ddp
#             programs must not NEED libcudart
#   plugin    the example plugin built from the installed sources, with CMake and with
#             make + pkg-config, then programs and the conformance kit run on it
#   cleanup   remove WORK_DIR
# Arguments: -DSTEP -DBUILD_DIR -DSOURCE_DIR (tests/install) -DWORK_DIR -DLIBDIR -DBINDIR
#            -DINCLUDEDIR -DDATADIR (the CMAKE_INSTALL_* values) -DSYMBOL_CHECK (script)
#            -DCC -DCXX -DREADELF -DNM (tools)
cmake_minimum_required(VERSION 3.25)
set(prefix "${WORK_DIR}/prefix")
set(libdir "${prefix}/${LIBDIR}")
set(bindir "${prefix}/${BINDIR}")
set(example "${prefix}/${DATADIR}/procgroup/examples/custom_backend")
# Every run gets a bound; a rank that hangs fails the test instead of ctest's timeout.
set(env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${libdir}/pkgconfig PROCGROUP_TIMEOUT=30)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 120)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# A command that must fail, with output matching `pattern`.
function(expect_failure pattern what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
                  TIMEOUT 120)
  if(rc EQUAL 0 OR NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}', got (${rc}):\n"
                        "${ARGN}\n${out}")
  endif()
endfunction()

# A CPU-only program must not NEED the CUDA runtime or driver.
function(expect_no_cuda_needed program)
  run(${READELF} -d "${program}")
  string(REGEX MATCHALL "NEEDED\\)[^\n]*" needed "${last_output}")
  if(needed MATCHES "libcuda")
    message(FATAL_ERROR "${program} NEEDs CUDA:\n${needed}")
  endif()
endfunction()

function(expect_count text pattern count what)
  string(REGEX MATCHALL "${pattern}" found "${text}")
  list(LENGTH found n)
  if(NOT n EQUAL count)
    message(FATAL_ERROR "${what}: expected ${count} lines matching '${pattern}', got ${n}:\n"
                        "${text}")
  endif()
endfunction()

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE "${WORK_DIR}")
  run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
  set(expected
    ${INCLUDEDIR}/procgroup/procgroup.h ${INCLUDEDIR}/procgroup/procgroup_backend.h
    ${INCLUDEDIR}/procgroup/procgroup.hpp ${INCLUDEDIR}/procgroup/procgroup_backend_kit.hpp
    ${INCLUDEDIR}/procgroup/backend_kit/status.hpp ${INCLUDEDIR}/procgroup/backend_kit/entry.hpp
    ${INCLUDEDIR}/procgroup/backend_kit/negotiate.hpp ${INCLUDEDIR}/procgroup/backend_kit/ops.hpp
    ${INCLUDEDIR}/procgroup/backend_kit/op_table.hpp ${INCLUDEDIR}/procgroup/backend_kit/dtype.hpp
    ${INCLUDEDIR}/procgroup/backend_kit/kernels.hpp ${INCLUDEDIR}/procgroup/backend_kit/store.hpp
    ${INCLUDEDIR}/procgroup/backend_kit/work.hpp
    ${LIBDIR}/libprocgroup.so ${LIBDIR}/procgroup/libprocgroup-loopback.so
    ${LIBDIR}/procgroup/libprocgroup-loopback_p2p.so
    ${LIBDIR}/cmake/procgroup/procgroupConfig.cmake
    ${LIBDIR}/cmake/procgroup/procgroupConfigVersion.cmake
    ${LIBDIR}/cmake/procgroup/procgroupTargets.cmake
    ${LIBDIR}/pkgconfig/procgroup.pc ${LIBDIR}/pkgconfig/procgroup-backend.pc
    ${LIBDIR}/pkgconfig/procgroup-ddp.pc ${LIBDIR}/libprocgroup_ddp.a
    ${BINDIR}/pgrun ${BINDIR}/allreduce_demo ${BINDIR}/conformance_test
    ${DATADIR}/procgroup/examples/custom_backend/CMakeLists.txt
    ${DATADIR}/procgroup/examples/custom_backend/Makefile
    ${DATADIR}/procgroup/examples/custom_backend/README.md
    ${DATADIR}/procgroup/examples/custom_backend/src/tcp_backend.c)
  foreach(file IN LISTS expected)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "the install lacks ${file}")
    endif()
  endforeach()
  # Test-only plugins (mocks, the frozen-v1 build, canaries) must never be installed.
  file(GLOB stray "${libdir}/procgroup/*mock*" "${libdir}/procgroup/*frozen*"
       "${libdir}/*canary*" "${libdir}/libprocgroup-*")
  if(stray)
    message(FATAL_ERROR "test-only files were installed: ${stray}")
  endif()
  # SOVERSION is the ABI major of the installed procgroup.h.
  file(STRINGS "${prefix}/${INCLUDEDIR}/procgroup/procgroup.h" major_line
       REGEX "^#define PG_ABI_VERSION_MAJOR ")
  string(REGEX MATCH "[0-9]+$" major "${major_line}")
  run(${READELF} -d "${libdir}/libprocgroup.so")
  if(NOT last_output MATCHES "SONAME\\)[^\n]*\\[libprocgroup\\.so\\.${major}\\]")
    message(FATAL_ERROR "libprocgroup's SONAME is not libprocgroup.so.${major} "
                        "(PG_ABI_VERSION_MAJOR):\n${last_output}")
  endif()
  if(NOT EXISTS "${libdir}/libprocgroup.so.${major}")
    message(FATAL_ERROR "no ${libdir}/libprocgroup.so.${major}")
  endif()
  # The package version is the header's ABI version, MAJOR.MINOR.0.
  file(STRINGS "${prefix}/${INCLUDEDIR}/procgroup/procgroup.h" minor_line
       REGEX "^#define PG_ABI_VERSION_MINOR ")
  string(REGEX MATCH "[0-9]+$" minor "${minor_line}")
  file(STRINGS "${libdir}/cmake/procgroup/procgroupConfigVersion.cmake" version_line
       REGEX "^set\\(PACKAGE_VERSION ")
  if(NOT version_line MATCHES "\"${major}\\.${minor}\\.0\"")
    message(FATAL_ERROR "the package version is not the ABI's ${major}.${minor}.0: ${version_line}")
  endif()

elseif(STEP STREQUAL "consumer")
  # At C++17, the compiler's default: procgroup::procgroup must raise it to C++20.
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/consumer" -B "${WORK_DIR}/consumer-build"
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17)
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer-build")
  run("${WORK_DIR}/consumer-build/consumer")
  expect_count("${last_output}" "consumer: loopback ok" 1 "consumer on loopback")
  if(EXISTS "${WORK_DIR}/consumer-build/ddp_consumer")
    run("${WORK_DIR}/consumer-build/ddp_consumer")
    expect_count("${last_output}" "ddp consumer: 5 samples, reducer ok" 1 "ddp consumer")
    expect_no_cuda_needed("${WORK_DIR}/consumer-build/ddp_consumer")
  endif()
  # Versions: SameMajorVersion, so 1.0 finds this 1.x (the consumer above) and 0.1 or 2.0
  # does not.
  file(WRITE "${WORK_DIR}/versions/CMakeLists.txt"
       "cmake_minimum_required(VERSION 3.25)\nproject(versions NONE)\n"
       "find_package(procgroup \${WANT} REQUIRED)\n")
  foreach(wrong 0.1 2.0)
    expect_failure("version: [0-9.]+" "find_package(procgroup ${wrong})"
                   ${CMAKE_COMMAND} -S "${WORK_DIR}/versions" -B "${WORK_DIR}/versions/build"
                   -DCMAKE_PREFIX_PATH=${prefix} -DWANT=${wrong})
  endforeach()
  # Components: a missing required one is a clean configure error that names it (the
  # consumer above asks for ddp as an optional one).
  file(WRITE "${WORK_DIR}/components/CMakeLists.txt"
       "cmake_minimum_required(VERSION 3.25)\nproject(components NONE)\n"
       "find_package(procgroup REQUIRED COMPONENTS \${WANT})\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK_DIR}/components"
                          -B "${WORK_DIR}/components/build" -DCMAKE_PREFIX_PATH=${prefix}
                          -DWANT=no_such_part
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "no component\\(s\\)[ \n]+no_such_part")
    message(FATAL_ERROR "a missing component was not reported (${rc}):\n${out}")
  endif()
  # A C program with nothing but pkg-config (rpath: the prefix is not on the loader path).
  run(${env} pkg-config --cflags --libs procgroup)
  string(STRIP "${last_output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(${env} pkg-config --variable=libdir procgroup)
  string(STRIP "${last_output}" pc_libdir)
  run(${CC} -std=c11 -Wall -Werror "${SOURCE_DIR}/consumer/c_consumer.c" ${flags}
      "-Wl,-rpath,${pc_libdir}" -o "${WORK_DIR}/c_consumer")
  run("${WORK_DIR}/c_consumer")
  expect_count("${last_output}" "allreduce ok" 1 "C consumer")
  run(${env} pkg-config --exists "procgroup >= 1.0" "procgroup < 2")
  # C++ with pkg-config: below C++20, procgroup.hpp's own message; ddp at C++20 with
  # procgroup-ddp.pc, built, run, and CPU-only without libcudart.
  file(WRITE "${WORK_DIR}/cxx17.cc" "#include <procgroup/procgroup.hpp>\nint main() {}\n")
  expect_failure("procgroup\\.hpp needs C\\+\\+20" "procgroup.hpp at C++17"
                 ${CXX} -std=c++17 -fsyntax-only ${flags} "${WORK_DIR}/cxx17.cc")
  # The backend kit from the installed headers alone (procgroup-backend.pc): a C++20
  # translation unit builds a table and negotiates; below C++20, the kit's own message.
  run(${env} pkg-config --cflags procgroup-backend)
  string(STRIP "${last_output}" kit_flags)
  separate_arguments(kit_flags UNIX_COMMAND "${kit_flags}")
  file(WRITE "${WORK_DIR}/kit.cc"
       "#include <procgroup/procgroup_backend_kit.hpp>\n"
       "int main() { return procgroup::kit::negotiate(nullptr, nullptr, {}) == PG_OK; }\n")
  run(${CXX} -std=c++20 -Wall -Werror -fsyntax-only ${kit_flags} "${WORK_DIR}/kit.cc")
  expect_failure("procgroup_backend_kit\\.hpp needs C\\+\\+20" "the backend kit at C++17"
                 ${CXX} -std=c++17 -fsyntax-only ${kit_flags} "${WORK_DIR}/kit.cc")
  run(${env} pkg-config --cflags --libs procgroup-ddp)
  string(STRIP "${last_output}" ddp_flags)
  separate_arguments(ddp_flags UNIX_COMMAND "${ddp_flags}")
  run(${CXX} -std=c++20 -O1 "${SOURCE_DIR}/consumer/ddp_main.cc" ${ddp_flags}
      "-Wl,-rpath,${pc_libdir}" -o "${WORK_DIR}/ddp_pkgconfig")
  run("${WORK_DIR}/ddp_pkgconfig")
  expect_count("${last_output}" "reducer ok" 1 "ddp consumer built with pkg-config")
  expect_no_cuda_needed("${WORK_DIR}/ddp_pkgconfig")

elseif(STEP STREQUAL "plugin")
  # The example exactly as an author gets it: the installed sources, the installed package.
  set(cmake_build "${WORK_DIR}/plugin-cmake")
  set(make_build "${WORK_DIR}/plugin-make")
  run(${CMAKE_COMMAND} -S "${example}" -B "${cmake_build}" -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  run(${CMAKE_COMMAND} --build "${cmake_build}")
  run(make -C "${example}" "OBJDIR=${make_build}" "PKG_CONFIG_PATH=${libdir}/pkgconfig")
  set(cmake_plugin "${cmake_build}/libprocgroup-example_tcp.so")
  set(make_plugin "${make_build}/libprocgroup-example_tcp.so")
  foreach(plugin "${cmake_plugin}" "${make_plugin}")
    run(${CMAKE_COMMAND} -DNM=${NM} -DLIBRARY=${plugin} -DEXPECTED_SYMBOLS=pg_backend_negotiate
        -P "${SYMBOL_CHECK}")
  endforeach()

  # The CMake consumer on the plugin by path, two ranks under the installed pgrun...
  run(${env} PROCGROUP_BACKEND=${cmake_plugin}
      "${bindir}/pgrun" --nproc-per-node 2 "${WORK_DIR}/consumer-build/consumer")
  expect_count("${last_output}" "consumer: example_tcp ok \\(rank [01] of 2, native ops 0x600\\)"
               2 "consumer on the plugin")
  # ...the installed demo on the make-built one by name, through PROCGROUP_PLUGIN_PATH...
  run(${env} PROCGROUP_BACKEND=example_tcp PROCGROUP_PLUGIN_PATH=${make_build}
      "${bindir}/pgrun" --nproc-per-node 3 "${bindir}/allreduce_demo" 4099)
  expect_count("${last_output}" "on example_tcp: allreduce of 4099 floats = 3 \\(correct\\)" 3
               "allreduce_demo on the plugin")
  # ...and the installed conformance kit, a slice of it (the whole kit is in the README).
  run(${env} "${bindir}/conformance_test" --backend ${cmake_plugin}
      "--gtest_filter=Plugin/PointToPoint.SendRecv/*:Plugin/Collectives.ReduceScatter/plugin_world3")
  expect_count("${last_output}" "\\[  PASSED  \\] [0-9]+ tests?\\." 1 "conformance slice")

elseif(STEP STREQUAL "cleanup")
  file(REMOVE_RECURSE "${WORK_DIR}")
else()
  message(FATAL_ERROR "unknown STEP '${STEP}'")
endif()
