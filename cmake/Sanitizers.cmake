if(MESHFLOW_SANITIZE)
  # Not for nvcc, which knows no -fsanitize (dev.sh builds the sanitized tree
  # without the cuda backend).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=${MESHFLOW_FUZZ_SANITIZERS})
endif()
# The fuzz targets' sanitizers: ASan and UBSan by default; "undefined" alone
# runs about twice the inputs a second on allocation-heavy targets (a long run
# by hand, whose corpus then replays under ASan: CONTRIBUTING.md, "Fuzzing").
set(MESHFLOW_FUZZ_SANITIZERS "address,undefined" CACHE STRING "Sanitizers of the fuzz targets")
if(MESHFLOW_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MESHFLOW_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Undefined behaviour stops the fuzzer as a crash does: without
  # -fno-sanitize-recover, UBSan prints its report and libFuzzer goes on.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,${MESHFLOW_FUZZ_SANITIZERS};-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  # No coverage hooks in the standard library's, nlohmann::json's and fmt's
  # inline code, in every source (the list says why).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize-coverage-ignorelist=${CMAKE_SOURCE_DIR}/tests/fuzz/coverage-ignore.txt>")
  add_link_options(-fsanitize=${MESHFLOW_FUZZ_SANITIZERS})
endif()
