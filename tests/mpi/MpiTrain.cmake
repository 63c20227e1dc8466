# `meshflow run --backend mpi` as a user runs it (docs/distributed.md): the
# grid of plans of tests/mpi/_grid.mesh gives the cpu backend's output bit for
# bit, and a rank that throws, is killed or hangs stops the run and leaves a
# checkpoint to resume from (tests/mpi/faults.sh). Included after Mpi.cmake.
# Under AddressSanitizer without the leak check, as Mpi.cmake explains: Open
# MPI's leaks lie in components it unloads, which no suppression can name.
set(mpi_launch ${MPIEXEC_EXECUTABLE} ${MESHFLOW_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG})
foreach(ranks 2 4)
  add_test(NAME mpi.train_grid.np${ranks}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/same_as_cpu.sh $<TARGET_FILE:meshflow>
                   ${CMAKE_CURRENT_LIST_DIR}/grid_${ranks}.mesh -- ${mpi_launch} ${ranks}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mpi.train_grid.np${ranks} PROPERTIES TIMEOUT 300 LABELS mpi ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0"
                       PASS_REGULAR_EXPRESSION "same as the cpu backend")
endforeach()
foreach(mode throw kill hang)
  add_test(NAME mpi.train_fault.${mode}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/faults.sh ${mode} $<TARGET_FILE:meshflow> ${CMAKE_SOURCE_DIR}
                   -- ${mpi_launch} 4)
  set_tests_properties(mpi.train_fault.${mode} PROPERTIES TIMEOUT 300 LABELS mpi ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0"
                       PASS_REGULAR_EXPRESSION "ended as the uninterrupted run")
endforeach()
# A plan for 4 devices on 3 processes is refused on every rank, at once.
add_test(NAME mpi.train_world_mismatch
         COMMAND sh -c "\"$@\" 2>&1; echo \"exit=$?\"" sh ${mpi_launch} 3 $<TARGET_FILE:meshflow> run
                 tests/mpi/grid_4.mesh --backend mpi
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(mpi.train_world_mismatch PROPERTIES TIMEOUT 120 LABELS mpi ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0" PASS_REGULAR_EXPRESSION
  "the plan runs on 4 devices, but the mpi backend started 3 processes.*rank [12]: the controller stopped.*exit=1")
# A checkpoint of 4 ranks resumes on 2 under another plan, as on the cpu backend.
add_test(NAME mpi.train_resume_elsewhere
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/resume_elsewhere.sh $<TARGET_FILE:meshflow> ${CMAKE_SOURCE_DIR}
                 -- ${mpi_launch})
set_tests_properties(mpi.train_resume_elsewhere PROPERTIES TIMEOUT 300 LABELS mpi ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0"
                     PASS_REGULAR_EXPRESSION "resumed on 2 ranks as on the cpu backend")
# A GPU cluster under --backend mpi: each process takes a GPU of its machine
# when the job starts; on a machine without one (CI), the job stops at once
# with the cuda backend's error (the controller's; the other ranks' words may
# not make it out before mpirun ends the job, so they are not required).
add_test(NAME mpi.train_gpu_cluster_without_gpu
         COMMAND sh -c "\"$@\" 2>&1; echo \"exit=$?\"" sh ${mpi_launch} 2 $<TARGET_FILE:meshflow> run
                 tests/mpi/gpu_2.mesh --backend mpi
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(mpi.train_gpu_cluster_without_gpu PROPERTIES TIMEOUT 120 LABELS mpi ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0"
  PASS_REGULAR_EXPRESSION "cannot run the plan: no CUDA (device|backend) is available.*exit=1")
