# The fuzz targets (CONTRIBUTING.md, "Fuzzing"). Each has an entry point
# (LLVMFuzzerTestOneInput) that is built two ways:
#   - with clang and -DMESHFLOW_FUZZ=ON, as the libFuzzer binary fuzz_NAME
#     (./dev.sh fuzz runs each for a bounded time);
#   - in every other build, as replay_NAME, which runs the saved inputs of
#     tests/fuzz/regressions/NAME/ and the seed corpus through the same entry
#     point: the ctest fuzz.replay.NAME, so a crash once found stays fixed.
# fuzz_make_seeds writes the seed corpora of the file formats with meshflow's
# own writers (a ctest fixture here; ./dev.sh fuzz runs it too).
set(fuzz_dir ${CMAKE_CURRENT_LIST_DIR})
set(fuzz_seeds ${CMAKE_CURRENT_BINARY_DIR}/fuzz-seeds)

# meshflow_fuzz_target(NAME SOURCES ... [MUTATOR ...] LINKS ... CORPUS ...)
# CORPUS: checked-in seed folders besides the generated fuzz-seeds/NAME.
function(meshflow_fuzz_target name)
  cmake_parse_arguments(F "" "" "SOURCES;MUTATOR;LINKS;CORPUS" ${ARGN})
  list(TRANSFORM F_SOURCES PREPEND ${fuzz_dir}/)
  list(TRANSFORM F_MUTATOR PREPEND ${fuzz_dir}/)
  if(MESHFLOW_FUZZ)
    add_executable(fuzz_${name} ${F_SOURCES} ${F_MUTATOR})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    set_source_files_properties(${F_MUTATOR} PROPERTIES COMPILE_OPTIONS
                                -fsanitize-coverage-ignorelist=${fuzz_dir}/mutator-ignore.txt)
  endif()
  add_executable(replay_${name} ${F_SOURCES} ${fuzz_dir}/ReplayMain.cpp)
  foreach(target fuzz_${name} replay_${name})
    if(TARGET ${target})
      target_link_libraries(${target} PRIVATE ${F_LINKS})
      target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR})
    endif()
  endforeach()
  set(inputs ${F_CORPUS})
  if(EXISTS ${fuzz_dir}/regressions/${name})
    list(APPEND inputs ${fuzz_dir}/regressions/${name})
  endif()
  if(NOT F_CORPUS)
    list(APPEND inputs ${fuzz_seeds}/${name})
  endif()
  add_test(NAME fuzz.replay.${name} COMMAND replay_${name} ${inputs})
  # A saved hang fails in minutes, not at ctest's default 25.
  set_tests_properties(fuzz.replay.${name} PROPERTIES TIMEOUT 300)
  if(NOT F_CORPUS)
    set_tests_properties(fuzz.replay.${name} PROPERTIES FIXTURES_REQUIRED fuzz_seeds)
  endif()
endfunction()

meshflow_fuzz_target(eval SOURCES FuzzEval.cpp LINKS meshflow_all
                     CORPUS ${CMAKE_SOURCE_DIR}/tests/golden ${CMAKE_SOURCE_DIR}/examples
                            ${CMAKE_SOURCE_DIR}/stdlib)
# grammar first: it uses the units and diagnostics of interp.
meshflow_fuzz_target(parse SOURCES FuzzParse.cpp LINKS meshflow_grammar meshflow_all
                     CORPUS ${CMAKE_SOURCE_DIR}/tests/golden ${CMAKE_SOURCE_DIR}/examples
                            ${CMAKE_SOURCE_DIR}/stdlib)
meshflow_fuzz_target(set SOURCES FuzzSet.cpp LINKS meshflow_cli)
meshflow_fuzz_target(sharding SOURCES FuzzSharding.cpp MUTATOR JsonMutator.cpp JsonMutatorMain.cpp
                     LINKS meshflow_passes)
meshflow_fuzz_target(stages SOURCES FuzzStages.cpp MUTATOR JsonMutator.cpp JsonMutatorMain.cpp
                     LINKS meshflow_passes)
meshflow_fuzz_target(plan SOURCES FuzzPlan.cpp MUTATOR JsonMutator.cpp JsonMutatorMain.cpp
                     LINKS meshflow_ir)
meshflow_fuzz_target(checkpoint SOURCES FuzzCheckpoint.cpp CheckpointBundle.cpp
                     MUTATOR JsonMutator.cpp CheckpointMutator.cpp LINKS meshflow_runtime)

add_executable(fuzz_make_seeds ${fuzz_dir}/MakeSeeds.cpp ${fuzz_dir}/CheckpointBundle.cpp)
target_link_libraries(fuzz_make_seeds PRIVATE meshflow_all)
target_include_directories(fuzz_make_seeds PRIVATE ${CMAKE_SOURCE_DIR})
add_test(NAME fuzz.seeds COMMAND fuzz_make_seeds ${fuzz_seeds})
set_tests_properties(fuzz.seeds PROPERTIES FIXTURES_SETUP fuzz_seeds)
