#!/usr/bin/env bash
# Prepares what the GPU check (tools/gpu_check.sh) needs beside the working
# tree on a GPU machine that has CUDA 13, CMake, ninja and PyTorch but no
# Debian packages, into build-gpu-deps/ (git ignores build*/; send it with the
# tree, e.g. the device run tool's carry = ["build-gpu-deps"]):
#
# - include/fmt: fmt's headers, for the standalone build of the kernel checks
#   (tests/gpu/CMakeLists.txt, header-only mode);
# - meshflow/: the meshflow executable of a portable CUDA build ($BUILD,
#   default build-bundle: configured here with MESHFLOW_NATIVE_KERNELS=OFF, so
#   its cpu kernels use no vector instruction this machine has and the GPU
#   machine's processor may lack) with every shared library it needs that a
#   bare GPU image lacks — Debian's loader and C library included, so it runs
#   whatever the image's own are — but not the CUDA runtime, cuBLAS, NCCL or
#   the driver, which it finds there (gpu_check.sh sets the library path).
#   Libraries over 1 MiB are stored xz-compressed (gpu_check.sh unpacks them).
#   The tiny-GPT parity test and the benchmark run on it.
#
# Environment: BUILD (default build-bundle), JOBS (default 2). Fails if the bundle
# would pass 60 MiB (the device tool carries 64 MiB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-bundle}
JOBS=${JOBS:-2}
src=${FMT_INCLUDE_DIR:-/usr/include}
[ -f "$src/fmt/format.h" ] || { echo "gpu_bundle: no fmt headers in $src (Debian: libfmt-dev)" >&2; exit 1; }
rm -rf build-gpu-deps
mkdir -p build-gpu-deps/include build-gpu-deps/meshflow/bin build-gpu-deps/meshflow/lib
cp -r "$src/fmt" build-gpu-deps/include/

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
                                             -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESHFLOW_CUDA=ON -DMESHFLOW_NATIVE_KERNELS=OFF \
    -DMESHFLOW_TESTS=OFF -DMESHFLOW_BENCH=OFF "${launcher[@]}" > /dev/null
fi
if ! grep -qE "^MESHFLOW_CUDA:[A-Z]+=(AUTO|ON)" "$BUILD/CMakeCache.txt"; then
  echo "gpu_bundle: $BUILD is not a CUDA build of meshflow: configure it with -DMESHFLOW_CUDA=ON" >&2
  exit 1
fi
if grep -qE "^MESHFLOW_NATIVE_KERNELS:[A-Z]+=ON" "$BUILD/CMakeCache.txt"; then
  echo "gpu_bundle: $BUILD compiles its cpu kernels with -march=native, which may not run on the GPU machine's processor: configure it with -DMESHFLOW_NATIVE_KERNELS=OFF" >&2
  exit 1
fi
cmake --build "$BUILD" -j "$JOBS" --target meshflow > /dev/null
exe="$BUILD/repl/meshflow"
ldd "$exe" | grep -q libcudart || { echo "gpu_bundle: $exe has no CUDA backend (no libcudart)" >&2; exit 1; }
objcopy --strip-debug "$exe" build-gpu-deps/meshflow/bin/meshflow
# Every library ldd resolves, but those of CUDA and the driver: the GPU image's own.
ldd "$exe" | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libcuda.so*|libcudart.so*|libcublas*.so*|libnccl.so*|libnvidia*) continue ;;
  esac
  cp -L "$lib" build-gpu-deps/meshflow/lib/
done
# Open MPI's launcher (Debian's orterun), its components, help files and
# PMIx's, in their install layout under build-gpu-deps/openmpi (OPAL_PREFIX
# and PMIx's component path point there), for the check's GPU cluster under --backend
# mpi on one machine; the libraries they need beside meshflow's.
if [ -x /usr/bin/orterun ] && [ -d /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 ]; then
  ompi=build-gpu-deps/openmpi
  mkdir -p $ompi/bin $ompi/lib/x86_64-linux-gnu/openmpi/lib $ompi/share $ompi/pmix2/lib
  cp /usr/bin/orterun $ompi/bin/
  cp -r /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 $ompi/lib/x86_64-linux-gnu/openmpi/lib/
  cp -r /usr/share/openmpi $ompi/share/
  [ -d /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix ] && cp -r /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix $ompi/pmix2/lib/
  [ -d /usr/lib/x86_64-linux-gnu/pmix2/share ] && cp -r /usr/lib/x86_64-linux-gnu/pmix2/share $ompi/pmix2/
  find $ompi/bin $ompi/lib $ompi/pmix2 -type f \( -name '*.so' -o -name orterun \) -exec ldd {} \; 2>/dev/null |
    awk '/=> \// { print $3 }' | sort -u | while read -r lib; do
      case "$(basename "$lib")" in libcuda.so*|libcudart.so*|libcublas*.so*|libnccl.so*|libnvidia*) continue ;; esac
      [ -e "build-gpu-deps/meshflow/lib/$(basename "$lib")" ] || cp -L "$lib" build-gpu-deps/meshflow/lib/
    done
fi
for lib in build-gpu-deps/meshflow/lib/*; do
  [ "$(stat -c %s "$lib")" -gt $((1 << 20)) ] && xz -T2 -6 "$lib"
done
size=$(du -sm build-gpu-deps | cut -f1)
[ "$size" -le 60 ] || { echo "gpu_bundle: build-gpu-deps/ is $size MiB, more than 60" >&2; exit 1; }
echo "gpu_bundle: build-gpu-deps/ ($(du -sh build-gpu-deps | cut -f1)): fmt's headers and meshflow with its libraries; send it with the tree"
