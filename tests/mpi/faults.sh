#!/usr/bin/env bash
# A rank that throws, is killed or hangs in the middle of a run on 4 MPI
# processes (tests/mpi/long_run.mesh): every rank stops, well within the
# collective timeout, with an error naming the failed rank; the latest
# checkpoint is a complete one, and resuming from it ends where an
# uninterrupted run ends, bit for bit.
#
#   faults.sh throw|kill|hang MESHFLOW SOURCE_DIR -- MPIRUN [FLAGS...]
set -u
mode=$1 mf=$2 src=$3
shift 4
mpirun=("$@")
script=$src/tests/mpi/long_run.mesh
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAILED: $*"; cat run.txt 2>/dev/null | tail -40; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# The pid of the process of rank $1 among the children of $2.
rank_pid() {
  for p in $(pgrep -P "$2"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"
      return
    fi
  done
}

timeout_s=10
[ "$mode" = throw ] && export MESHFLOW_INJECT_FAULT=2:7:1
"${mpirun[@]}" "$mf" run "$script" --backend mpi --timeout $timeout_s > run.txt 2>&1 &
job=$!
if [ "$mode" != throw ]; then
  for _ in $(seq 600); do grep -q "^step    6/" run.txt && break; sleep 0.1; done
  grep -q "^step    6/" run.txt || fail "the run never reached step 6"
  victim=$(rank_pid 2 $job)
  [ -n "$victim" ] || fail "no process of rank 2 under mpirun ($job)"
  [ "$mode" = kill ] && kill -KILL "$victim" || kill -STOP "$victim"
fi
start=$(now_ms)
wait $job
code=$?
stopped_ms=$(($(now_ms) - start))
unset MESHFLOW_INJECT_FAULT
[ -n "${victim:-}" ] && kill -KILL "$victim" 2>/dev/null
echo "--- the failed run (exit $code, every rank stopped ${stopped_ms} ms after the failure)"
tail -25 run.txt
[ $code -ne 0 ] || fail "the run succeeded"
# A hang: the timeout finds it, then the controller waits up to the timeout
# for every answer; anything else stops within the timeout.
[ $stopped_ms -lt $(((2 * timeout_s + 20) * 1000)) ] || fail "stopping took ${stopped_ms} ms"
case $mode in
  throw) grep -q "error: training .* failed: device 2, step 7, instruction 1.*injected fault" run.txt || fail "no error naming device 2, step 7"
         [ $stopped_ms -lt $((timeout_s * 1000)) ] || fail "the others waited for their timeout" ;;
  kill) grep -Eq "rank 2 .*(signal 9|Killed)|exited on signal 9" run.txt || fail "nothing names the killed rank 2" ;;
  hang) grep -q "error: .*rank 2 did not answer" run.txt ||
          fail "the controller's error does not name the hung rank 2" ;;
esac
latest=$(cat ckpt/latest) || fail "no checkpoint"
echo "--- the latest checkpoint: $latest"
"$mf" run "$script" --backend cpu > resumed.txt 2>&1 || { cat resumed.txt; fail "resuming from $latest failed"; }
grep -q "resuming from .*$latest" resumed.txt || fail "the resumed run did not start from $latest"
rm -rf ckpt
"$mf" run "$script" > whole.txt 2>&1 || fail "the uninterrupted run failed"
diff <(grep "^final loss" whole.txt) <(grep "^final loss" resumed.txt) || fail "the resumed run ends elsewhere"
echo "resumed from $latest and ended as the uninterrupted run: $(grep '^final loss' resumed.txt)"
