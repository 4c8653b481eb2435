# Warnings on for every SERF target; call serf_target_defaults(tgt) once per target.
# No target sees the source root: a room's headers reach only the targets that link its library
# (serf_room_headers below), so an include across the layering fails to build.
# SERF_WERROR makes every warning an error, the CUDA target's (nvcc and its host compiler) too.
# SERF_SANITIZE (e.g. address,undefined) and SERF_SANITIZE_THREAD instrument every SERF target.
function(serf_target_defaults tgt)
  target_compile_options(${tgt} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  if(SERF_WERROR)
    target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                           $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
  endif()
  if(SERF_SANITIZE_THREAD)
    target_compile_options(${tgt} PRIVATE -fsanitize=thread -g)
    target_link_options(${tgt} PUBLIC -fsanitize=thread)
  endif()
  if(SERF_SANITIZE)
    # C++ only: nvcc does not take -fsanitize (the CUDA backend is off in a sanitizer build).
    target_compile_options(${tgt} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${SERF_SANITIZE} -fno-omit-frame-pointer -g>)
    target_link_options(${tgt} PUBLIC -fsanitize=${SERF_SANITIZE})
  endif()
endfunction()

# A Catch2 test executable registered with CTest.
#   serf_add_test(NAME name SOURCES a.cc ... LIBS lib ... [MPI_RANKS n] [LABELS l ...])
# MPI_RANKS runs it under mpiexec with n ranks (oversubscribed, allowed as root). Catch2 runs with
# -w NoAssertions: a test case that asserts nothing fails. A case that cannot run on this machine
# uses SERF_SKIP (tests/test_skip.h) and gets its own entry: serf_add_test_run(... SKIPPABLE).
function(serf_add_test)
  cmake_parse_arguments(T "" "NAME;MPI_RANKS;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  serf_target_defaults(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE serf_test_main ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  if(T_MPI_RANKS)
    add_test(NAME ${T_NAME}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_MPI_RANKS}
                     --oversubscribe --allow-run-as-root $<TARGET_FILE:${T_NAME}>
                     -w NoAssertions ${T_ARGS})
    list(APPEND T_LABELS mpi)
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} -w NoAssertions ${T_ARGS})
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
  if(T_MPI_RANKS)
    serf_mpi_test_properties(${T_NAME} ${T_MPI_RANKS})
  endif()
endfunction()

# Another CTest entry for the test cases of an existing Catch2 executable that a tag selects.
#   serf_add_test_run(NAME name TEST executable ARGS "[tag]" [SKIPPABLE] [TIMEOUT s] [LABELS l ...])
# SKIPPABLE: the cases may SERF_SKIP (tests/test_skip.h); CTest then reports the entry as skipped.
# Keep such cases out of the executable's main entry (ARGS "~[tag]" there), or a skip would fail it.
function(serf_add_test_run)
  cmake_parse_arguments(T "SKIPPABLE" "NAME;TEST;TIMEOUT" "LABELS;ARGS" ${ARGN})
  add_test(NAME ${T_NAME} COMMAND ${T_TEST} -w NoAssertions ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
  if(T_SKIPPABLE)
    set_tests_properties(${T_NAME} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED \\(")
  endif()
endfunction()

# Multiplies the TIMEOUT of every test of the calling directory by SERF_TEST_TIME_SCALE and gives
# each the variable SERF_TEST_TIME_SCALE in its environment (tests/cli/expect.sh and bad_inputs.py
# scale their per-command hang limits by it). Call it once, after the directory's last add_test.
function(serf_scale_test_timeouts)
  get_directory_property(tests TESTS)
  foreach(t ${tests})
    get_test_property(${t} TIMEOUT limit)
    if(limit AND NOT SERF_TEST_TIME_SCALE EQUAL 1)
      math(EXPR limit "${limit} * ${SERF_TEST_TIME_SCALE}")
      set_tests_properties(${t} PROPERTIES TIMEOUT ${limit})
    endif()
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "SERF_TEST_TIME_SCALE=${SERF_TEST_TIME_SCALE}")
  endforeach()
endfunction()

# A test that runs `ranks` MPI processes, oversubscribed on a small machine. Under `ctest -j N`
# it claims min(ranks, N) of the N slots (PROCESSORS) and the lock `serf_mpi`, so two MPI jobs
# never share the cores (on 2 cores, ctest -j8 ran bad_input and validate beside three other
# jobs and their time bounds failed in 2 of 3 runs). SERIAL: the test compares times it measured
# at different moments (a profile against a later measurement), so it runs with nothing beside it.
#   serf_mpi_test_properties(test ranks [SERIAL])
function(serf_mpi_test_properties test ranks)
  set_tests_properties(${test} PROPERTIES PROCESSORS ${ranks} RESOURCE_LOCK serf_mpi)
  if("SERIAL" IN_LIST ARGN)
    set_tests_properties(${test} PROPERTIES RUN_SERIAL ON)
  endif()
endfunction()

# The public headers of a room's library: `tgt` exports them, and only them, under their path
# from the source root (`#include "serf/core/status.h"`). They are linked into
# build/include/<tgt>/, so a target that does not link `tgt` cannot include them.
#   serf_room_headers(tgt [HEADERS h ...])   default: every *.h beside the CMakeLists.txt
function(serf_room_headers tgt)
  cmake_parse_arguments(R "" "" "HEADERS" ${ARGN})
  if(NOT R_HEADERS)
    file(GLOB R_HEADERS CONFIGURE_DEPENDS RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}
         ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  endif()
  set(root ${CMAKE_BINARY_DIR}/include/${tgt})
  file(RELATIVE_PATH room ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  file(REMOVE_RECURSE ${root})
  foreach(h ${R_HEADERS})
    get_filename_component(dir ${root}/${room}/${h} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${h} ${root}/${room}/${h} SYMBOLIC)
  endforeach()
  target_include_directories(${tgt} PUBLIC $<BUILD_INTERFACE:${root}>)
endfunction()
