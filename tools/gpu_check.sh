#!/usr/bin/env bash
# The GPU check (docs/gpu.md): on a machine with an NVIDIA GPU, the CUDA
# toolkit, CMake and PyTorch, and none of meshflow's Debian dependencies:
#   1. builds the cuda backend's library with its checks alone
#      (tests/gpu/CMakeLists.txt) and runs every CUDA kernel (test_cuda_kernels)
#      and every op the backend puts on the GPU (test_cuda_ops) against the cpu
#      kernels, and measures cuBLAS GEMM TFLOP/s (bench_cuda_gemm);
#   2. with the meshflow executable of tools/gpu_bundle.sh: the tiny-GPT parity
#      test (tests/gpu/parity.mesh: losses on cuda(devices = 1, 2, 4) against
#      the cpu backend under pipeline, data- and tensor-parallel plans);
#   3. the benchmark: gpt_350m in bf16 on one GPU, meshflow
#      (tests/gpu/bench_gpt.mesh) against PyTorch eager
#      (tests/gpu/bench_gpt_torch.py) in the same run;
# and prints a short table last. Each stage has its own time limit, so the
# whole check stays under 9 minutes (limit: what is left of CHECK_SECONDS, 540 s
# unless set lower for a loan with less time left).
#
# Prepare on a development machine:  tools/gpu_bundle.sh   (into build-gpu-deps/)
# Run on the GPU machine, from the repository root, with build-gpu-deps/ sent:
#   tools/gpu_check.sh
# Environment: BUILD (default build-gpu), JOBS (default 16), CHECK_SECONDS (default 540). Exit status 0
# when every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-16}
CHECK_SECONDS=${CHECK_SECONDS:-540}
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
started=$SECONDS
# A stage's time limit: `want` seconds, or what is left of the check's CHECK_SECONDS (at least 1).
limit() {
  local left=$((CHECK_SECONDS - (SECONDS - started)))
  if [ "$left" -lt 1 ]; then left=1; fi
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}
log() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - started)); }
declare -a table
row() { table+=("$(printf '%-30s %s' "$1" "$2")"); }
finish() {
  log "summary"
  printf '%s\n' "${table[@]}"
  printf '%-30s %ds\n' "wall time" $((SECONDS - started))
  exit "$1"
}

log "the machine"
card=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)
echo "$card"
nvcc --version | tail -n 1
cmake --version | head -n 1
row "card" "$card"

# fmt's headers: from tools/gpu_bundle.sh, else PyTorch's copy if it has one.
fmt_args=()
if [ ! -f build-gpu-deps/include/fmt/format.h ]; then
  torch_include=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))' 2>/dev/null || true)
  if [ -n "$torch_include" ] && [ -f "$torch_include/fmt/format.h" ]; then
    fmt_args=(-DFMT_INCLUDE_DIR="$torch_include")
  fi
fi

# NCCL for test_nccl_one_rank: beside the toolkit, else PyTorch's wheel
# (nvidia/nccl: nccl.h and libnccl.so.2).
nccl_args=()
torch_nccl=$(python3 -c 'import glob, os, torch; print(next(iter(glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "nccl"))), ""))' 2>/dev/null || true)
if [ -n "$torch_nccl" ] && [ -f "$torch_nccl/include/nccl.h" ] && [ -e "$torch_nccl/lib/libnccl.so.2" ] \
    && [ ! -f /usr/local/cuda/include/nccl.h ]; then
  nccl_args=(-DNCCL_INCLUDE_DIR="$torch_nccl/include" -DNCCL_LIBRARY="$torch_nccl/lib/libnccl.so.2")
fi

log "configure"
generator=()  # Ninja when there is one, unless the build directory has another already
[ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja > /dev/null && generator=(-G Ninja)
mkdir -p "$BUILD"
if ! cmake -S tests/gpu -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${fmt_args[@]}" "${nccl_args[@]}" \
    > "$BUILD/configure.log" 2>&1; then
  cat "$BUILD/configure.log"
  row "build" "FAILED: configure"
  finish 1
fi
grep "meshflow:" "$BUILD/configure.log"

log "build (-j$JOBS)"
if ! cmake --build "$BUILD" -j "$JOBS" > "$BUILD/build.log" 2>&1; then
  grep -E "error|Error" "$BUILD/build.log" | head -n 40
  row "build" "FAILED (all of it in $BUILD/build.log)"
  finish 1
fi
row "build" "done"
status=0

# A check program: its lines, then a row from its ok/FAIL counts.
checks() {
  local name=$1 program=$2
  log "$name: $program"
  timeout 45 "$BUILD/$program" | tee "$BUILD/$program.txt"
  local code=${PIPESTATUS[0]}
  if grep -q "^SKIPPED" "$BUILD/$program.txt"; then
    row "$name" "skipped: $(grep -m1 '^SKIPPED' "$BUILD/$program.txt" | cut -c10-70)"; status=1
  elif [ "$code" -eq 0 ]; then row "$name" "passed ($(grep -c '^ok' "$BUILD/$program.txt") checks)"
  else row "$name" "FAILED (exit $code): $(grep -c '^FAIL' "$BUILD/$program.txt") checks"; status=1; fi
}
checks "kernel checks" test_cuda_kernels
checks "op checks (the backend)" test_cuda_ops
checks "NCCL (one rank)" test_nccl_one_rank

log "GEMM rate: bench_cuda_gemm"
timeout 45 "$BUILD/bench_cuda_gemm" | tee "$BUILD/gemm.txt"
gemm_bf16=$(awk '$1 == "bf16" && $2 == 8192 { print $3 }' "$BUILD/gemm.txt")
row "cuBLAS bf16 GEMM 8192^3" "${gemm_bf16:-?} TFLOP/s"

# The meshflow executable of tools/gpu_bundle.sh, on its own loader and
# libraries, with the image's CUDA runtime, cuBLAS, NCCL and driver.
bundle=build-gpu-deps/meshflow
if [ ! -x "$bundle/bin/meshflow" ]; then
  row "parity (tiny GPT)" "not run: no build-gpu-deps/meshflow (run tools/gpu_bundle.sh)"
  row "benchmark gpt_350m bf16" "not run: no build-gpu-deps/meshflow"
  finish 1
fi
libs="$BUILD/meshflow-lib"
rm -rf "$libs" && mkdir -p "$libs" && cp "$bundle"/lib/* "$libs"/
for packed in "$libs"/*.xz; do [ -e "$packed" ] && xz -d -f "$packed"; done
torch_libs=$(python3 -c 'import glob, os, torch; print(":".join([os.path.join(os.path.dirname(torch.__file__), "lib")] + glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "*", "lib"))))' 2>/dev/null || true)
library_path="$libs:/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/cuda/targets/x86_64-linux/lib:$torch_libs:/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:/usr/lib64"
# A launcher script, so that `timeout` can run it.
printf '#!/bin/sh\nexec "%s/ld-linux-x86-64.so.2" --library-path "%s" "%s/bin/meshflow" "$@"\n' \
  "$(cd "$libs" && pwd)" "$library_path" "$(cd "$bundle" && pwd)" > "$BUILD/meshflow"
chmod +x "$BUILD/meshflow"

# Tensors in managed memory (the default) and in device memory (MESHFLOW_CUDA_MEMORY=device).
for memory in managed device; do
  log "parity: tests/gpu/parity.mesh (tiny GPT, cuda vs cpu), $memory memory"
  MESHFLOW_CUDA_MEMORY=$memory MESHFLOW_CUDA_OPS=1 timeout "$(limit 100)" "$BUILD/meshflow" run --stdlib stdlib \
    tests/gpu/parity.mesh 2>&1 | tee "$BUILD/parity-$memory.txt"
  parity=${PIPESTATUS[0]}
  ok=$(grep -c "^parity ok" "$BUILD/parity-$memory.txt")
  # Devices that ran the fused softmax (MESHFLOW_CUDA_OPS's summary): the
  # plans without tensor parallelism run it unless MESHFLOW_CUDA_FUSE=0.
  fused=$(grep -c "fused: .*fused_softmax" "$BUILD/parity-$memory.txt")
  # Devices that ran the fused attention kernels (the fused_kernels = true plans).
  attention=$(grep -c "fused: .*fused_attention_grad" "$BUILD/parity-$memory.txt")
  if [ "$parity" -eq 0 ] && [ "$fused" -eq 0 ] && [ "${MESHFLOW_CUDA_FUSE:-1}" != 0 ]; then
    row "parity (tiny GPT), $memory" "FAILED: $ok plans ok, but no device ran a fused group"; status=1
  elif [ "$parity" -eq 0 ] && [ "$attention" -eq 0 ] && [ "${MESHFLOW_CUDA_FUSE:-1}" != 0 ]; then
    row "parity (tiny GPT), $memory" "FAILED: $ok plans ok, but no device ran the fused attention kernels"; status=1
  elif [ "$parity" -eq 0 ]; then row "parity (tiny GPT), $memory" "passed ($ok plans; fused groups on $fused devices, fused attention on $attention)"
  else row "parity (tiny GPT), $memory" "FAILED (exit $parity): $ok plans ok; $(grep -m1 -E 'error|FAIL' "$BUILD/parity-$memory.txt" | cut -c1-100)"; status=1; fi
done

log "benchmark: gpt_350m bf16, PyTorch eager"
timeout "$(limit 75)" python3 tests/gpu/bench_gpt_torch.py 2>&1 | tee "$BUILD/torch.txt"
torch_step=$(awk '$1 == "torch_bench" { print $3 }' "$BUILD/torch.txt")
flops=$(awk '$1 == "torch_bench" { print $7 }' "$BUILD/torch.txt")
torch_peak=$(awk '$1 == "torch_bench" { print $9 }' "$BUILD/torch.txt")

# meshflow's step: the median of the step lines' times after the first ("step
# 2/4  loss ...  812.3 ms (simulated ...)": the first time on the line, in ms or s).
# bench_meshflow MEMORY [FUSE]: FUSE 0 runs every op alone (MESHFLOW_CUDA_FUSE=0).
bench_meshflow() {
  local memory=$1 fuse=${2:-1}
  local label="$memory${2:+, fuse $2}"
  local out="$BUILD/meshflow-bench-$memory${2:+-fuse$2}.txt"
  log "benchmark: gpt_350m bf16, meshflow, $label"
  # The interpreter's default cap on the values it holds (4 GiB) is a laptop's;
  # the model's tensors are on the GPU here.
  MESHFLOW_CUDA_MEMORY=$memory MESHFLOW_CUDA_FUSE=$fuse MESHFLOW_CUDA_OPS=1 timeout "$(limit 200)" "$BUILD/meshflow" \
    run --stdlib stdlib --max-memory 100GiB tests/gpu/bench_gpt.mesh 2>&1 | tee "$out"
  local bench=${PIPESTATUS[0]}
  local ours_ms
  ours_ms=$(awk '$1 == "step" { for (i = 2; i < NF; ++i) if ($(i + 1) == "ms" || $(i + 1) == "s") {
              print $i * ($(i + 1) == "s" ? 1000 : 1); break } }' "$out" |
            tail -n +2 | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
  local peaks
  peaks=$(grep "^meshflow_bench" "$out" | sed 's/.*peak_memory/peak/')
  if [ "$bench" -eq 0 ] && [ -n "$ours_ms" ] && [ -n "$torch_step" ]; then
    summary=$(awk -v ours="$ours_ms" -v torch="$torch_step" -v flops="$flops" -v gemm="${gemm_bf16:-0}" 'BEGIN {
      s = ours / 1000; printf "meshflow %.3f s/step, PyTorch eager %.3f s/step: %.2fx", s, torch, s / torch
      if (gemm > 0) printf "; model FLOP/s %.1f%% (torch %.1f%%) of the bf16 GEMM rate", 100 * flops / s / (gemm * 1e12), 100 * flops / torch / (gemm * 1e12) }')
    row "benchmark gpt_350m bf16 b8, $label" "$summary"
    row "  memory" "meshflow $peaks; torch peak ${torch_peak:-?} bytes"
    # GPU ops whose half operands went through f32 copies (MESHFLOW_CUDA_OPS; runtime/cuda/OperandPath.h).
    local widened
    widened=$(grep -o "widened to f32: .*" "$out" | sort -u | head -n 1)
    row "  half ops widened" "${widened:-none}"
  else
    row "benchmark gpt_350m bf16 b8, $label" "FAILED (meshflow exit $bench, torch step ${torch_step:-none}): $(grep -m1 -E 'error' "$out" | cut -c1-100)"
    status=1
  fi
}
bench_meshflow managed

# Where a step's time goes: the same model for 2 steps with every op waited for
# and timed by kind (MESHFLOW_CUDA_PROFILE), and the measured timeline of the
# last step (forward, backward, update) written as a trace.
log "profile: gpt_350m bf16, 2 steps, each op timed, device memory"
sed 's/^let steps = .*/let steps = 2/; s|log_every = 1,|log_every = 1, trace = "'"$BUILD"'/step.trace.json",|' \
  tests/gpu/bench_gpt.mesh > "$BUILD/profile.mesh"
MESHFLOW_CUDA_MEMORY=device MESHFLOW_CUDA_PROFILE=1 timeout "$(limit 120)" "$BUILD/meshflow" run --stdlib stdlib --max-memory 100GiB --allow-write "$BUILD" \
  "$BUILD/profile.mesh" 2>&1 | tee "$BUILD/profile.txt"
top=$(grep -o "time by op kind.*" "$BUILD/profile.txt" | head -n 1 | cut -d: -f2- | cut -d, -f1-6)
row "profile (device memory)" "${top:-not measured}"
phases=$(python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["traceEvents"]; print(", ".join("%s %.3f s" % (x["name"], x["dur"] / 1e6) for x in e if x.get("ph") == "X"))' "$BUILD/step.trace.json" 2>/dev/null)
row "  last step's instructions" "${phases:-not measured}"

# Device memory last: when steps are slow, the profile above is what says why.
bench_meshflow device
# What the fused groups gain: the same step with every op alone.
bench_meshflow managed 0

# A GPU cluster under --backend mpi: 2 processes on this GPU, with the bundle's
# Open MPI launcher (Debian's orterun on the bundle's loader; OPAL_PREFIX and
# PMIx's component path point at the bundle's components), one machine: no
# ssh (plm isolated). Tried here with the system's components hidden.
ompi=build-gpu-deps/openmpi
if [ -x "$ompi/bin/orterun" ]; then
  log "mpi: tests/mpi/gpu_2.mesh on 2 processes"
  ompi=$(cd "$ompi" && pwd)
  printf '#!/bin/sh\nexport OPAL_PREFIX="%s" PMIX_MCA_mca_base_component_path="%s/pmix2/lib/pmix"\nexec "%s/ld-linux-x86-64.so.2" --library-path "%s" "%s/bin/orterun" "$@"\n' \
    "$ompi" "$ompi" "$(cd "$libs" && pwd)" "$library_path" "$ompi" > "$BUILD/mpirun"
  chmod +x "$BUILD/mpirun"
  timeout "$(limit 90)" "$BUILD/mpirun" --allow-run-as-root --oversubscribe --mca plm isolated -np 2 \
    "$BUILD/meshflow" run --stdlib stdlib tests/mpi/gpu_2.mesh --backend mpi 2>&1 | tee "$BUILD/mpi.txt"
  mpi=${PIPESTATUS[0]}
  if [ "$mpi" -eq 0 ] && grep -q "^mpi gpu parity ok" "$BUILD/mpi.txt"; then row "mpi: 2 processes on the GPU" "passed"
  else row "mpi: 2 processes on the GPU" "FAILED (exit $mpi): $(grep -m1 -E 'error|FAIL|ORTE|MPI' "$BUILD/mpi.txt" | cut -c1-100)"; status=1; fi
else
  row "mpi: 2 processes on the GPU" "not run: no build-gpu-deps/openmpi"
fi
finish $status
