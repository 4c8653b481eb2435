# Warnings on for every SERF target; call serf_target_defaults(tgt) once per target.
function(serf_target_defaults tgt)
  target_compile_options(${tgt} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
  target_include_directories(${tgt} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  if(SERF_SANITIZE_THREAD)
    target_compile_options(${tgt} PRIVATE -fsanitize=thread -g)
    target_link_options(${tgt} PUBLIC -fsanitize=thread)
  endif()
endfunction()

# A Catch2 test executable registered with CTest.
#   serf_add_test(NAME name SOURCES a.cc ... LIBS lib ... [MPI_RANKS n] [LABELS l ...])
# MPI_RANKS runs it under mpiexec with n ranks (oversubscribed, allowed as root).
function(serf_add_test)
  cmake_parse_arguments(T "" "NAME;MPI_RANKS;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  serf_target_defaults(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE serf_test_main ${T_LIBS})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  if(T_MPI_RANKS)
    add_test(NAME ${T_NAME}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_MPI_RANKS}
                     --oversubscribe --allow-run-as-root $<TARGET_FILE:${T_NAME}> ${T_ARGS})
    list(APPEND T_LABELS mpi)
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
endfunction()
