#!/usr/bin/env bash
# A checkpoint written by 4 MPI ranks (each its own shard file) resumes on 2
# ranks under another plan, and the resumed steps are the cpu backend's, bit
# for bit, resuming the same checkpoint (docs/distributed.md).
#
#   resume_elsewhere.sh MESHFLOW SOURCE_DIR -- MPIRUN [FLAGS...]
set -u
mf=$1 src=$2
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAILED: $*"; exit 1; }
cp "$src"/tests/mpi/_resume.mesh "$src"/tests/mpi/resume_4.mesh "$src"/tests/mpi/resume_2.mesh .
"$@" 4 "$mf" run resume_4.mesh --backend mpi || fail "the 4-rank run failed"
ls ckpt/step-00000004/ | tr '\n' ' '; echo
[ "$(ls ckpt/step-00000004/device-*.bin | wc -l)" -eq 4 ] || fail "not one shard file per rank"
cp -r ckpt ckpt.copy
mpi=$("$@" 2 "$mf" run resume_2.mesh --backend mpi 2>&1) || { echo "$mpi"; fail "resuming on 2 ranks failed"; }
rm -rf ckpt && mv ckpt.copy ckpt
cpu=$("$mf" run resume_2.mesh 2>&1) || { echo "$cpu"; fail "resuming on the cpu backend failed"; }
echo "$mpi"
printf '%s\n' "$mpi" | grep -q "^steps 5 to 8 " || fail "the 2-rank run did not resume at step 5"
[ "$mpi" = "$cpu" ] || { echo "$cpu"; fail "the 2-rank run differs from the cpu backend's"; }
echo "resumed on 2 ranks as on the cpu backend"
