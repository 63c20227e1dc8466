if(MESHFLOW_SANITIZE)
  # Not for nvcc, which knows no -fsanitize (dev.sh builds the sanitized tree
  # without the cuda backend).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()
if(MESHFLOW_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MESHFLOW_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Undefined behaviour stops the fuzzer as a crash does: without
  # -fno-sanitize-recover, UBSan prints its report and libFuzzer goes on.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  # No coverage hooks in the standard library's, nlohmann::json's and fmt's
  # inline code, in every source (the list says why).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize-coverage-ignorelist=${CMAKE_SOURCE_DIR}/tests/fuzz/coverage-ignore.txt>")
  add_link_options(-fsanitize=address,undefined)
endif()
