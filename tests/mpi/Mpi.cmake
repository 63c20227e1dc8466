# The MPI transport's tests: one executable run by mpirun with K ranks
# (tests/mpi/MpiTransportTest.cpp), judged whole by run_case.sh. Included by
# tests/CMakeLists.txt when meshflow_mpi is built.
#
# Open MPI refuses root without --allow-run-as-root and more ranks than cores
# without --oversubscribe; both are harmless elsewhere.
set(MESHFLOW_MPIEXEC_FLAGS "--allow-run-as-root;--oversubscribe" CACHE STRING
    "Flags for mpirun in the MPI tests (Open MPI's by default)")
add_executable(test_mpi_transport ${CMAKE_CURRENT_LIST_DIR}/MpiTransportTest.cpp)
target_link_libraries(test_mpi_transport PRIVATE meshflow_mpi)
target_include_directories(test_mpi_transport PRIVATE ${CMAKE_SOURCE_DIR})

set(mpi_run_case ${CMAKE_CURRENT_LIST_DIR}/run_case.sh)
# meshflow_mpi_test(NAME RANKS EXPECTED_EXIT MAX_SECONDS PATTERN CASE)
function(meshflow_mpi_test name ranks expected max pattern case)
  add_test(NAME ${name}
           COMMAND ${mpi_run_case} ${expected} ${max} "${pattern}" --
                   ${MPIEXEC_EXECUTABLE} ${MESHFLOW_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${ranks}
                   $<TARGET_FILE:test_mpi_transport> --case=${case})
  # ctest's own bound, past run_case.sh's. Under AddressSanitizer, no leak
  # check: Open MPI's leaks are in components it unloads (dlclose) before the
  # process ends, where no suppression can name them.
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS mpi ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endfunction()

foreach(ranks 2 3 4 8)
  meshflow_mpi_test(mpi.operations.np${ranks} ${ranks} 0 120 "every operation checked.*slots on" operations)
endforeach()
# Every message through MPI, as between nodes (the small collectives of
# ranks on one node otherwise go through its shared memory).
foreach(ranks 3 4)
  meshflow_mpi_test(mpi.operations.no_slots.np${ranks} ${ranks} 0 120
                    "every operation checked.*slots off" operations)
  set_tests_properties(mpi.operations.no_slots.np${ranks} PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;MESHFLOW_NODE_SLOTS=0")
endforeach()
foreach(ranks 2 4)
  meshflow_mpi_test(mpi.timeout.np${ranks} ${ranks} 0 60 "timed out after 1500 ms, waiting for device" timeout)
  meshflow_mpi_test(mpi.abort.np${ranks} ${ranks} 0 60 "after rank 1 called abort" abort)
endforeach()
meshflow_mpi_test(mpi.abort.np8 8 0 60 "after rank 1 called abort" abort)
# A killed rank: mpirun ends the job, long before the 60 s timeout would.
meshflow_mpi_test(mpi.sigkill.np3 3 nonzero 30 "" sigkill)
# A stopped rank: the others time out naming it, and end the job.
meshflow_mpi_test(mpi.sigstop.np3 3 42 40 "every other rank timed out naming device 1" sigstop)
