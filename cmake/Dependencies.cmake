# Every dependency comes from a Debian 12 package; README.md's commands install them.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)

find_path(ANTLR4_INCLUDE_DIR antlr4-runtime.h PATH_SUFFIXES antlr4-runtime REQUIRED)
find_library(ANTLR4_RUNTIME_LIB antlr4-runtime REQUIRED)
find_program(ANTLR4_TOOL antlr4 PATHS /usr/bin REQUIRED)

find_path(Z3_INCLUDE_DIR z3++.h REQUIRED)
find_library(Z3_LIB z3 REQUIRED)
add_library(meshflow_z3 INTERFACE)
target_include_directories(meshflow_z3 SYSTEM INTERFACE ${Z3_INCLUDE_DIR})
target_link_libraries(meshflow_z3 INTERFACE ${Z3_LIB})

# COIN-OR CBC (coinor-libcbc-dev), the MILP engine of the intra-op sharding
# solver (passes/ShardingCbc.cpp).
find_package(PkgConfig REQUIRED)
pkg_check_modules(CBC REQUIRED IMPORTED_TARGET cbc)
add_library(meshflow_cbc INTERFACE)
target_link_libraries(meshflow_cbc INTERFACE PkgConfig::CBC)

find_path(LIBEDIT_INCLUDE_DIR histedit.h REQUIRED)
find_library(LIBEDIT_LIB edit REQUIRED)

find_package(BLAS)

# Optional accelerators and multi-node support are detected, never required.
# MESHFLOW_MPI: AUTO builds the MPI transport (meshflow_mpi) when an MPI with
# its C bindings is found, ON requires one, OFF never builds it.
set(MESHFLOW_MPI AUTO CACHE STRING "Build the MPI backend: AUTO (when MPI is found), ON or OFF")
set_property(CACHE MESHFLOW_MPI PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${MESHFLOW_MPI}" meshflow_mpi_choice)
if(meshflow_mpi_choice STREQUAL "OFF" OR meshflow_mpi_choice STREQUAL "FALSE" OR meshflow_mpi_choice STREQUAL "0")
  set(MESHFLOW_WITH_MPI OFF)
else()
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(MESHFLOW_WITH_MPI ON)
  elseif(meshflow_mpi_choice STREQUAL "AUTO")
    set(MESHFLOW_WITH_MPI OFF)
  else()
    message(FATAL_ERROR "MESHFLOW_MPI=${MESHFLOW_MPI} but no MPI was found (Debian: libopenmpi-dev openmpi-bin)")
  endif()
endif()
message(STATUS "meshflow: MPI backend ${MESHFLOW_WITH_MPI} (MESHFLOW_MPI=${MESHFLOW_MPI})")
# MESHFLOW_CUDA: the cuda backend's library (runtime/cuda/), cmake/Cuda.cmake.
include(cmake/Cuda.cmake)

if(MESHFLOW_TESTS)
  find_package(Catch2 REQUIRED)
endif()
