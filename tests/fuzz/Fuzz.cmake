# The parse+evaluate fuzz target (configure with clang and -DMESHFLOW_FUZZ=ON;
# ./dev.sh test runs it for a bounded time with tests/golden as the seed corpus).
if(MESHFLOW_FUZZ)
  add_executable(fuzz_eval ${CMAKE_CURRENT_LIST_DIR}/FuzzEval.cpp)
  target_link_libraries(fuzz_eval PRIVATE meshflow_all)
  target_link_options(fuzz_eval PRIVATE -fsanitize=fuzzer)
endif()
