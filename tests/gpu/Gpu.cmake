# The GPU check's executables, for the main build (tests/CMakeLists.txt) and the
# standalone one (tests/gpu/CMakeLists.txt). Both need meshflow_cuda and a
# meshflow_runtime with the cpu kernels they are checked against.
#
# test_cuda_kernels: each CUDA kernel and GEMM against the cpu kernels on fresh
# random inputs; without a GPU it prints "SKIPPED: no CUDA device" and ctest
# reports it skipped (exit 77), never passed.
# bench_cuda_gemm: cuBLAS GEMM TFLOP/s in bf16, f16 and fp32 on this GPU.
set(meshflow_gpu_dir ${CMAKE_CURRENT_LIST_DIR})
add_executable(test_cuda_kernels ${meshflow_gpu_dir}/KernelParity.cpp)
target_link_libraries(test_cuda_kernels PRIVATE meshflow_cuda)
add_executable(bench_cuda_gemm ${meshflow_gpu_dir}/GemmBench.cpp)
target_link_libraries(bench_cuda_gemm PRIVATE meshflow_cuda)
add_test(NAME gpu.kernels COMMAND test_cuda_kernels)
set_tests_properties(gpu.kernels PROPERTIES SKIP_RETURN_CODE 77)
# test_cuda_ops: every op the cuda backend runs on the GPU, through the
# backend (CudaKernels), against the cpu kernel, and the fused groups against
# the unfused chains (FusedParity.cpp), the fused attention against
# cpu::fusedAttention (AttentionParity.cpp); skipped without a GPU.
add_executable(test_cuda_ops ${meshflow_gpu_dir}/OpParity.cpp ${meshflow_gpu_dir}/FusedParity.cpp
               ${meshflow_gpu_dir}/AttentionParity.cpp)
target_link_libraries(test_cuda_ops PRIVATE meshflow_cuda)
add_test(NAME gpu.ops COMMAND test_cuda_ops)
set_tests_properties(gpu.ops PROPERTIES SKIP_RETURN_CODE 77)
# test_nccl_one_rank: NcclCommunicator on a one-rank NCCL communicator (the
# check machine has one GPU), every call against its input; skipped without
# a GPU or without NCCL in the build.
add_executable(test_nccl_one_rank ${meshflow_gpu_dir}/NcclOneRank.cpp)
target_link_libraries(test_nccl_one_rank PRIVATE meshflow_cuda)
add_test(NAME gpu.nccl_one_rank COMMAND test_nccl_one_rank)
set_tests_properties(gpu.nccl_one_rank PROPERTIES SKIP_RETURN_CODE 77)
