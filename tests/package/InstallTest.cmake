# package.install: installs this build into a temporary prefix and builds
# examples/embed against it as a host project would (find_package(meshflow),
# meshflow::meshflow), then checks that the hosts run, print what the in-tree
# examples print, and reads the stdlib installed beside the library. The
# installed `meshflow` tool must find the same stdlib and know its version.
#
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DVERSION=... -P InstallTest.cmake
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${out}\n${err}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

function(expect_match what pattern text)
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: expected to match '${pattern}', got:\n${text}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(installed include/meshflow/meshflow.h share/meshflow/stdlib/layers.mesh bin/meshflow)
  if(NOT EXISTS ${prefix}/${installed})
    message(FATAL_ERROR "cmake --install did not install ${installed}")
  endif()
endforeach()

# The host is configured with nothing of this source tree but its own folder.
run("configuring the host" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/embed -B ${WORK_DIR}/host
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("building the host" ${CMAKE_COMMAND} --build ${WORK_DIR}/host)
set(host ${WORK_DIR}/host/meshflow_embed_example)
run("the host" ${host})
file(READ ${SOURCE_DIR}/examples/embed/expected_output.txt expected)
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "the installed host printed:\n${output}\nexpected:\n${expected}")
endif()
run("the planner host" ${WORK_DIR}/host/meshflow_planner_example)
file(READ ${SOURCE_DIR}/examples/embed/planner_expected_output.txt expected)
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "the installed planner host printed:\n${output}\nexpected:\n${expected}")
endif()
run("the host --where" ${host} --where)
expect_match("the host's version" "meshflow ${VERSION}\n" "${output}")
expect_match("the host's stdlib" "stdlib ${prefix}/share/meshflow/stdlib\n" "${output}")
expect_match("the host's import" "import std.clusters ok" "${output}")

# The installed tool: its version, and a script that imports from the stdlib.
run("meshflow --version" ${prefix}/bin/meshflow --version)
expect_match("meshflow --version" "^meshflow ${VERSION}\n$" "${output}")
file(WRITE ${WORK_DIR}/uses_stdlib.mesh "import std.clusters\nprint(dgx_a100(nodes = 2))\n")
run("meshflow run (installed)" ${prefix}/bin/meshflow run ${WORK_DIR}/uses_stdlib.mesh)
expect_match("meshflow run (installed)" "A100" "${output}")
file(REMOVE_RECURSE ${WORK_DIR})
