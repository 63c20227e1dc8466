#!/usr/bin/env bash
# The mpi backend's step time against the cpu backend's on the same plan (the
# tiny GPT on 4 devices, bench/mpi/tiny_gpt.mesh), in alternating rounds of
# one run each; prints each round's median step (steps 11..60) and the ratio
# of the medians over the rounds (bench/README.md).
#
#   bench/mpi/step_time.sh [BUILD_DIR] [ROUNDS]
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build} rounds=${2:-5}
mf=$build/repl/meshflow
script=bench/mpi/tiny_gpt.mesh
median_ms() {  # the median step time in ms of a run's progress lines, steps 11 on
  awk '/^step +[0-9]+\/[0-9]+ / { split($2, s, "/"); if (s[1] > 10) print $7 }' |
    sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
cpu_all=() mpi_all=()
for r in $(seq "$rounds"); do
  c=$("$mf" run "$script" | median_ms)
  m=$(mpirun --allow-run-as-root --oversubscribe -np 4 "$mf" run "$script" --backend mpi | median_ms)
  echo "round $r: cpu backend ${c} ms, mpi backend ${m} ms, ratio $(awk -v a="$m" -v b="$c" 'BEGIN { printf "%.2f", a / b }')"
  cpu_all+=("$c") mpi_all+=("$m")
done
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
c=$(med "${cpu_all[@]}") m=$(med "${mpi_all[@]}")
echo "median over $rounds rounds: cpu backend $c ms, mpi backend $m ms per step; mpi / cpu = $(awk -v a="$m" -v b="$c" 'BEGIN { printf "%.2f", a / b }') (target <= 1.3)"
