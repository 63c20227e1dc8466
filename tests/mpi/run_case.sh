#!/usr/bin/env bash
# Runs one MPI job and judges the whole of it: its exit code, how long it
# took, and its output.
#
#   run_case.sh EXPECTED_EXIT MAX_SECONDS PATTERN -- COMMAND...
#
# EXPECTED_EXIT is a number, or "nonzero"; PATTERN an extended regular
# expression the output must match ("" for none). Output with "FAIL" fails.
# The job is killed after MAX_SECONDS + 60 s whatever it does.
set -u
expected=$1 max=$2 pattern=$3
shift 4
start=$(date +%s%N)
output=$(timeout -s KILL $((max + 60)) "$@" 2>&1)
code=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
elapsed=$(printf "%d.%03d" $((elapsed_ms / 1000)) $((elapsed_ms % 1000)))
printf '%s\n' "$output"
echo "run_case: exit code $code after $elapsed s (expected $expected within $max s)"
ok=1
if [ "$expected" = nonzero ]; then
  [ "$code" -ne 0 ] || { echo "run_case: FAILED: the job succeeded"; ok=0; }
else
  [ "$code" -eq "$expected" ] || { echo "run_case: FAILED: exit code $code, not $expected"; ok=0; }
fi
if [ "$elapsed_ms" -gt $((max * 1000)) ]; then
  echo "run_case: FAILED: took longer than $max s"
  ok=0
fi
if [ -n "$pattern" ] && ! printf '%s\n' "$output" | grep -Eq -- "$pattern"; then
  echo "run_case: FAILED: no output matches: $pattern"
  ok=0
fi
if printf '%s\n' "$output" | grep -q "FAIL:"; then
  echo "run_case: FAILED: a rank reported a failed check"
  ok=0
fi
[ $ok -eq 1 ]
