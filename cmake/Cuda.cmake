# The CUDA toolchain, for the main build and for the standalone GPU check
# (tests/gpu/CMakeLists.txt), which includes this file on a machine that has
# the CUDA toolkit and CMake but none of meshflow's other dependencies.
#
# MESHFLOW_CUDA: AUTO builds runtime/cuda/ when nvcc is found, ON requires it,
# OFF never builds it. CUDA is enabled as a language only when it is built, so
# a machine without the toolkit configures as before. Sets MESHFLOW_WITH_CUDA
# and, when it is ON, MESHFLOW_NCCL_FOUND with NCCL_INCLUDE_DIR and NCCL_LIBRARY.
set(MESHFLOW_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE MESHFLOW_CUDA PROPERTY STRINGS AUTO ON OFF)
# Hopper (sm_90) machine code plus its PTX, which later GPUs compile when they
# load it. A user names others with -DMESHFLOW_CUDA_ARCHS=... or
# -DCMAKE_CUDA_ARCHITECTURES=..., which wins.
set(MESHFLOW_CUDA_ARCHS "90-real;90-virtual" CACHE STRING "CUDA architectures of the cuda backend")

string(TOUPPER "${MESHFLOW_CUDA}" meshflow_cuda_choice)
set(MESHFLOW_WITH_CUDA OFF)
if(NOT meshflow_cuda_choice MATCHES "^(OFF|FALSE|0|NO)$")
  # nvcc on PATH (or CUDACXX, CMAKE_CUDA_COMPILER), else in the toolkit's
  # default location.
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(MESHFLOW_NVCC nvcc PATHS /usr/local/cuda/bin NO_DEFAULT_PATH)
    if(MESHFLOW_NVCC)
      set(CMAKE_CUDA_COMPILER "${MESHFLOW_NVCC}" CACHE FILEPATH "The CUDA compiler" FORCE)
      set(CMAKE_CUDA_COMPILER "${MESHFLOW_NVCC}")
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    set(MESHFLOW_WITH_CUDA ON)
  elseif(meshflow_cuda_choice STREQUAL "AUTO")
    set(MESHFLOW_WITH_CUDA OFF)
  else()
    message(FATAL_ERROR "MESHFLOW_CUDA=${MESHFLOW_CUDA} but no CUDA compiler (nvcc) was found: "
                        "put the CUDA toolkit's bin/ on PATH or set CMAKE_CUDA_COMPILER")
  endif()
endif()

if(MESHFLOW_WITH_CUDA)
  # Before enable_language: CMake would otherwise pick the compiler's default
  # architecture and cache it.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "${MESHFLOW_CUDA_ARCHS}")
  endif()
  enable_language(CUDA)
  # C++17: CMake 3.25 knows no C++20 dialect for nvcc; the .cu files need none.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # NCCL comes with some CUDA installations and not others; the collectives
  # need it, the kernels and the allocator do not.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(MESHFLOW_NCCL_FOUND ON)
  else()
    set(MESHFLOW_NCCL_FOUND OFF)
    message(STATUS "meshflow: NCCL not found (set NCCL_HOME): the cuda backend builds without collectives")
  endif()
  message(STATUS "meshflow: CUDA backend ON (CUDA ${CUDAToolkit_VERSION}, architectures "
                 "${CMAKE_CUDA_ARCHITECTURES}, NCCL ${MESHFLOW_NCCL_FOUND})")
else()
  message(STATUS "meshflow: CUDA backend OFF (MESHFLOW_CUDA=${MESHFLOW_CUDA})")
endif()
