#!/usr/bin/env bash
# Runs a script on the cpu backend and as one MPI process per device, and
# requires the same output: every loss bit for bit (docs/distributed.md).
#
#   same_as_cpu.sh MESHFLOW SCRIPT -- MPIRUN [FLAGS...]
set -u
mf=$1 script=$2
shift 3
expected=$("$mf" run "$script" 2>&1) || { printf '%s\n' "$expected"; echo "FAILED: the cpu backend failed"; exit 1; }
start=$(date +%s%N)
actual=$(timeout -s KILL 300 "$@" "$mf" run "$script" --backend mpi 2>&1)
code=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
printf '%s\n' "$actual"
if [ $code -ne 0 ]; then echo "FAILED: the mpi run exited with $code"; exit 1; fi
if [ "$expected" != "$actual" ]; then
  diff <(printf '%s\n' "$expected") <(printf '%s\n' "$actual")
  echo "FAILED: the mpi backend's output differs from the cpu backend's"
  exit 1
fi
echo "same as the cpu backend: $(printf '%s\n' "$expected" | wc -l) lines, bit for bit, in ${elapsed_ms} ms"
