# ctest cet.no_shstk_marking: every object in OBJECTS (compiled with
# -fcf-protection=full and goro::goro) must carry the x86 feature IBT and
# not SHSTK, so no binary that includes goro can have shadow stacks enabled
# (include/goro/detail/cet.hpp). Run as cmake -DREADELF=... -DOBJECTS=... -P.
cmake_minimum_required(VERSION 3.21)
foreach(obj IN LISTS OBJECTS)
  execute_process(COMMAND ${READELF} -n ${obj} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "readelf -n ${obj} failed (${rc})")
  endif()
  message(STATUS "${obj}:\n${out}")
  if(NOT out MATCHES "x86 feature: IBT")
    message(FATAL_ERROR "${obj}: no IBT marking (is -fcf-protection=branch applied?)")
  endif()
  if(out MATCHES "SHSTK")
    message(FATAL_ERROR "${obj}: marked SHSTK: a binary linking it may run with a shadow stack, which goro's context switch does not keep")
  endif()
endforeach()
