# The REPL driven through a pseudo-terminal, as a person would use it.
add_executable(test_repl_pty ${CMAKE_CURRENT_LIST_DIR}/ReplPtyTest.cpp)
target_link_libraries(test_repl_pty PRIVATE util)
# The test runs the real executable, so building it builds that too.
add_dependencies(test_repl_pty meshflow)
add_test(NAME pty.repl COMMAND test_repl_pty $<TARGET_FILE:meshflow>)
set_tests_properties(pty.repl PROPERTIES TIMEOUT 120)
