# Compares a shared library's ABI with a baseline using the Debian tools abi-dumper and
# abi-compliance-checker (binary and source compatibility). Run with cmake -P:
#   -DLIBRARY=<new .so> -DHEADERS=<public header dir> -DWORK_DIR=<scratch dir>
#   -DBASELINE=<stored .dump> | -DOLD_LIBRARY=<old .so, dumped first>
#   [-DNAME=<library name>] [-DEXPECT_BREAK=ON]   (ON: pass only if a break is reported)
#   -DUPDATE=<.dump to write>                      (dump LIBRARY there and stop)
# "ABI check skipped: ..." is printed (the tests' SKIP_REGULAR_EXPRESSION) when a tool is
# missing or a library has no DWARF, which abi-dumper needs (build RelWithDebInfo or Debug).
# Debian packages: abi-dumper, abi-compliance-checker, universal-ctags, binutils.
cmake_minimum_required(VERSION 3.25)
if(NOT NAME)
  set(NAME library)
endif()
find_program(ABI_DUMPER abi-dumper)
find_program(ABI_CHECKER abi-compliance-checker)
find_program(READELF readelf)
find_program(CTAGS ctags)  # abi-dumper -public-headers runs it
if(NOT ABI_DUMPER OR NOT ABI_CHECKER OR NOT READELF OR NOT CTAGS)
  message("ABI check skipped: install the Debian packages abi-dumper, "
          "abi-compliance-checker, universal-ctags and binutils")
  return()
endif()

function(require_dwarf library)
  execute_process(COMMAND "${READELF}" -S --wide "${library}" OUTPUT_VARIABLE sections
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT sections MATCHES "\\.debug_info")
    message("ABI check skipped: ${library} has no debug information; abi-dumper needs a -g "
            "build (CMAKE_BUILD_TYPE=RelWithDebInfo or Debug)")
    set(have_dwarf FALSE PARENT_SCOPE)
  else()
    set(have_dwarf TRUE PARENT_SCOPE)
  endif()
endfunction()

# Public headers only: types and functions of the ABI, not the library's internals.
function(dump library version out)
  execute_process(COMMAND "${ABI_DUMPER}" "${library}" -o "${out}" -lver "${version}"
                          -public-headers "${HEADERS}" -sort
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE text)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${out}")
    message(FATAL_ERROR "abi-dumper failed on ${library} (${rc}):\n${text}")
  endif()
endfunction()

require_dwarf("${LIBRARY}")
if(NOT have_dwarf)
  return()
endif()
if(UPDATE)
  dump("${LIBRARY}" "${VERSION}" "${UPDATE}")
  message(STATUS "wrote ${UPDATE}")
  return()
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
if(OLD_LIBRARY)
  require_dwarf("${OLD_LIBRARY}")
  if(NOT have_dwarf)
    return()
  endif()
  set(BASELINE "${WORK_DIR}/old.dump")
  dump("${OLD_LIBRARY}" old "${BASELINE}")
endif()
if(NOT EXISTS "${BASELINE}")
  message(FATAL_ERROR "no baseline ABI dump at ${BASELINE}")
endif()
dump("${LIBRARY}" new "${WORK_DIR}/new.dump")

set(report "${WORK_DIR}/compat_report.html")
execute_process(COMMAND "${ABI_CHECKER}" -l "${NAME}" -old "${BASELINE}" -new "${WORK_DIR}/new.dump"
                        -report-path "${report}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE text)
message("${text}")
# 0: compatible; 1: incompatible; anything else: the tool itself failed.
if(NOT rc EQUAL 0 AND NOT rc EQUAL 1)
  message(FATAL_ERROR "abi-compliance-checker failed (${rc})")
endif()
if(EXPECT_BREAK)
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected an ABI break between ${OLD_LIBRARY} and ${LIBRARY}, but "
                        "abi-compliance-checker reported none")
  endif()
  message(STATUS "the deliberate break was detected, as it must be")
  file(REMOVE_RECURSE "${WORK_DIR}")
  return()
endif()
if(rc EQUAL 1)
  # Name the problems here; the HTML report stays for the details.
  file(READ "${report}" html)
  string(REGEX MATCHALL "class=.iname[^>]*>[A-Za-z_0-9:]+" symbols "${html}")
  string(REGEX REPLACE "class=.iname[^>]*>" "" symbols "${symbols}")
  string(REGEX MATCHALL "class='ttype'>[a-z]+</span> [A-Za-z_0-9:]+" types "${html}")
  string(REGEX REPLACE "class='ttype'>([a-z]+)</span> " "\\1 " types "${types}")
  list(REMOVE_DUPLICATES symbols)
  list(REMOVE_DUPLICATES types)
  list(JOIN symbols ", " symbols)
  list(JOIN types ", " types)
  message(FATAL_ERROR "${LIBRARY} is not ABI-compatible with ${BASELINE}.\n"
                      "Functions affected: ${symbols}\nTypes affected: ${types}\n"
                      "Report: ${report}\n"
                      "If the break is intended, it needs a new ABI major (docs/backend-interface.md)")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
