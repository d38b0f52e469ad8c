# Runs a command and checks how it ends, as told by the first line of a file.
#
#   cmake -DSPEC=<file> -DKEY=<key> [-DTIMEOUT=<s>] -P expect_failure.cmake -- <command> <args>...
#
# When SPEC's first line is `// <KEY>: <regex>` the command must FAIL (non-zero
# exit or killed by a signal) and its stdout+stderr must match <regex> (a CMake
# regular expression). Any other first line means the command must succeed.
# Used for tests/compile_fail (KEY expect-error: the command is the compiler)
# and tests/noexcept (KEY expect-abort: the command is the program).
cmake_minimum_required(VERSION 3.21)

foreach(var SPEC KEY)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "expect_failure.cmake: -D${var}=... is required")
  endif()
endforeach()

set(cmd)
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "expect_failure.cmake: no command after --")
endif()

file(STRINGS "${SPEC}" first_line LIMIT_COUNT 1)
set(expect_failure FALSE)
if(first_line MATCHES "^//[ \t]*${KEY}:[ \t]*(.*[^ \t])[ \t]*$")
  set(expect_failure TRUE)
  set(regex "${CMAKE_MATCH_1}")
endif()

if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 240)
endif()
# C locale: plain ASCII quotes in compiler diagnostics, whatever the user's LANG.
set(ENV{LC_ALL} C)
list(JOIN cmd " " cmd_text)
message(STATUS "running: ${cmd_text}")
execute_process(COMMAND ${cmd}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output
  TIMEOUT ${TIMEOUT})
message("${output}")
message(STATUS "exit: ${rc}")

if(NOT expect_failure)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "FAIL: expected success, got exit '${rc}'")
  endif()
  message(STATUS "PASS: succeeded as expected")
  return()
endif()

if(rc STREQUAL "0")
  message(FATAL_ERROR "FAIL: expected a failure matching '${regex}', but the command succeeded")
endif()
if(rc MATCHES "timeout")
  message(FATAL_ERROR "FAIL: timed out after ${TIMEOUT} s")
endif()
# The regex is matched against the output with SPEC's name taken out: a file
# named after the error it expects must not pass by its own name.
get_filename_component(spec_name "${SPEC}" NAME)
string(REPLACE "${SPEC}" "<source>" checked "${output}")
string(REPLACE "${spec_name}" "<source>" checked "${checked}")
if(NOT checked MATCHES "${regex}")
  message(FATAL_ERROR "FAIL: failed (exit '${rc}') as expected, but the output does not match '${regex}'")
endif()
message(STATUS "PASS: failed as expected and the output matches '${regex}'")
