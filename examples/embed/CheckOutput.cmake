# Runs EXAMPLE and fails unless it exits with 0 and prints exactly EXPECTED.
execute_process(COMMAND ${EXAMPLE} OUTPUT_VARIABLE actual ERROR_VARIABLE errors
                RESULT_VARIABLE result)
file(READ ${EXPECTED} expected)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${EXAMPLE} exited with ${result}\n${errors}")
endif()
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "${EXAMPLE} printed:\n${actual}\nexpected (${EXPECTED}):\n${expected}")
endif()
