#!/usr/bin/env bash
# The GPU check (docs/cuda.md): on a machine with an NVIDIA GPU, the CUDA
# toolkit and CMake, and nothing else of meshflow's dependencies, builds the
# cuda backend's library with its checks alone (tests/gpu/CMakeLists.txt),
# runs every CUDA kernel against the cpu kernels (test_cuda_kernels) and
# measures cuBLAS GEMM TFLOP/s (bench_cuda_gemm), naming the card.
#
# Prepare on a development machine:  tools/gpu_bundle.sh   (fmt's headers into build-gpu-deps/)
# Run on the GPU machine, from the repository root, with build-gpu-deps/ sent:
#   tools/gpu_check.sh
# Environment: BUILD (default build-gpu), JOBS (default 16). Exit status: 0
# when every check passed; without a GPU the kernel checks print SKIPPED and
# exit 77, and so does not pass.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-16}
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
started=$SECONDS
log() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - started)); }

log "the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
nvcc --version | tail -n 1
cmake --version | head -n 1

# fmt's headers: from tools/gpu_bundle.sh, else PyTorch's copy if it has one.
fmt_args=()
if [ ! -f build-gpu-deps/include/fmt/format.h ]; then
  torch_include=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))' 2>/dev/null || true)
  if [ -n "$torch_include" ] && [ -f "$torch_include/fmt/format.h" ]; then
    fmt_args=(-DFMT_INCLUDE_DIR="$torch_include")
  fi
fi

log "configure"
generator=()  # Ninja when there is one, unless the build directory has another already
[ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja > /dev/null && generator=(-G Ninja)
mkdir -p "$BUILD"
if ! cmake -S tests/gpu -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${fmt_args[@]}" \
    > "$BUILD/configure.log" 2>&1; then
  cat "$BUILD/configure.log"
  echo "gpu_check: configure failed"
  exit 1
fi
grep "meshflow:" "$BUILD/configure.log"

log "build (-j$JOBS)"
if ! cmake --build "$BUILD" -j "$JOBS" > "$BUILD/build.log" 2>&1; then
  grep -E "error|Error" "$BUILD/build.log" | head -n 40
  echo "gpu_check: build failed (all of it in $BUILD/build.log)"
  exit 1
fi

log "kernel checks: test_cuda_kernels"
timeout 240 "$BUILD/test_cuda_kernels" | tee "$BUILD/kernels.txt"
kernels=${PIPESTATUS[0]}

log "GEMM rate: bench_cuda_gemm"
timeout 180 "$BUILD/bench_cuda_gemm" | tee "$BUILD/gemm.txt"
bench=${PIPESTATUS[0]}

log "summary"
if grep -q "^SKIPPED" "$BUILD/kernels.txt"; then kernel_result="skipped: no GPU"
elif [ $kernels -eq 0 ]; then kernel_result="passed ($(grep -c '^ok' "$BUILD/kernels.txt") checks)"
else kernel_result="FAILED (exit $kernels): $(grep -c '^FAIL' "$BUILD/kernels.txt") checks"; fi
printf '%-28s %s\n' "kernel checks" "$kernel_result"
printf '%-28s %s\n' "GEMM bench" "$([ "$bench" -eq 0 ] && echo done || echo "FAILED (exit $bench)")"
sed 's/^/  /' "$BUILD/gemm.txt"
printf '%-28s %ds\n' "wall time" $((SECONDS - started))
[ $kernels -eq 0 ] && [ "$bench" -eq 0 ]
