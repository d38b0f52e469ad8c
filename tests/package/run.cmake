# Builds and runs the consumer project in this folder against goro.
#   MODE=find_package:     configure goro alone, `cmake --install` it into
#                          WORK_DIR/prefix, consumer does find_package(goro).
#   MODE=add_subdirectory: consumer does add_subdirectory(GORO_SOURCE_DIR).
# CXX, CXX_FLAGS, BUILD_TYPE, GENERATOR, TOOLCHAIN and EMULATOR come from the
# build that registered the test, so sanitizer and cross builds check the same
# way. Run by ctest as `cmake -D... -P run.cmake`.
cmake_minimum_required(VERSION 3.21)

function(step)
  list(JOIN ARGN " " text)
  message(STATUS "+ ${text}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "FAIL (${rc}): ${text}")
  endif()
endfunction()

set(common -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
           -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
if(BUILD_TYPE)
  list(APPEND common -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()
if(TOOLCHAIN)
  list(APPEND common -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN})
endif()

file(REMOVE_RECURSE ${WORK_DIR})
set(consumer_args)
if(MODE STREQUAL "find_package")
  # No per-file install lines: a failure further on must not be cut off
  # from the log by ctest's output limit.
  step(${CMAKE_COMMAND} -S ${GORO_SOURCE_DIR} -B ${WORK_DIR}/goro-build ${common} -DCMAKE_INSTALL_MESSAGE=NEVER
       -DGORO_BUILD_TESTS=OFF -DGORO_BUILD_EXAMPLES=OFF -DGORO_BUILD_BENCHMARKS=OFF)
  step(${CMAKE_COMMAND} --install ${WORK_DIR}/goro-build --prefix ${WORK_DIR}/prefix)
  set(consumer_args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DGORO_EXPECT_PREFIX=${WORK_DIR}/prefix)
elseif(MODE STREQUAL "add_subdirectory")
  set(consumer_args -DGORO_SOURCE_DIR=${GORO_SOURCE_DIR})
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()

step(${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${WORK_DIR}/consumer ${common} ${consumer_args})
step(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
step(${EMULATOR} ${WORK_DIR}/consumer/goro_consumer)
message(STATUS "PASS: goro consumed via ${MODE}")
