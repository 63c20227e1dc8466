# Golden tests (tests/golden/README.md): .mesh files with their expected output and
# diagnostics inline, run by golden_runner from the repository root so that the
# diagnostics name files relative to it.
add_executable(golden_runner golden/GoldenRunner.cpp golden/GoldenFile.cpp)
target_link_libraries(golden_runner PRIVATE meshflow_all)
target_include_directories(golden_runner PRIVATE ${CMAKE_SOURCE_DIR})

add_test(NAME golden COMMAND golden_runner tests/golden WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# Every kind of include/meshflow/DiagnosticKinds.def is expected by some golden file.
add_test(NAME golden.kinds COMMAND golden_runner --kinds tests/golden
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
