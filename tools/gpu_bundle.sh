#!/usr/bin/env bash
# Prepares what the GPU check (tools/gpu_check.sh) needs beside the working
# tree on a GPU machine that has no Debian packages: fmt's headers, which the
# standalone build (tests/gpu/CMakeLists.txt) uses in header-only mode. They
# go to build-gpu-deps/ (git ignores build*/): send it with the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${FMT_INCLUDE_DIR:-/usr/include}
[ -f "$src/fmt/format.h" ] || { echo "gpu_bundle: no fmt headers in $src (Debian: libfmt-dev)" >&2; exit 1; }
rm -rf build-gpu-deps
mkdir -p build-gpu-deps/include
cp -r "$src/fmt" build-gpu-deps/include/
echo "gpu_bundle: build-gpu-deps/ ($(du -sh build-gpu-deps | cut -f1)) holds fmt's headers; send it with the tree"
