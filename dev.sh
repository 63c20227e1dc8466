#!/usr/bin/env bash
# meshflow's one entry point for a fresh Debian 12 machine.
#
#   ./dev.sh example   install what is missing, build, run the main example
#                      (a tiny character-level GPT learning the GPL's text)
#   ./dev.sh test      install what is missing, build, run every test: unit,
#                      golden, REPL-through-a-terminal and embedding tests, the
#                      same suite under AddressSanitizer + UBSan, and every
#                      fuzz target for a bounded time
#   ./dev.sh build     install and build only
#   ./dev.sh fuzz      install what is missing, build the fuzz targets, run each
#                      for FUZZ_SECONDS (CONTRIBUTING.md, "Fuzzing")
#
# Two build trees: build/ (the compiler's defaults, -O2 -g, the cuda backend when
# nvcc is found) and build-asan/ (clang, ASan + UBSan, -O1 -gline-tables-only):
# the sanitizer suite and the fuzz targets share build-asan/, so its sources
# compile once for both.
#
# Environment: JOBS (parallel build and test jobs, default 2), FUZZ_SECONDS (per
# fuzz target, default 25: seven targets, about 3 minutes).
set -euo pipefail
cd "$(dirname "$0")"

JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-25}
FUZZ_TARGETS=(eval parse set sharding stages plan checkpoint)
PACKAGES=(build-essential cmake antlr4 default-jre-headless libantlr4-runtime-dev libz3-dev
          libfmt-dev catch2 nlohmann-json3-dev libedit-dev libopenblas-dev libopenmpi-dev
          openmpi-bin clang libclang-rt-14-dev coinor-libcbc-dev
          pkg-config)

log() { printf '\n== %s\n' "$*"; }

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

configure() {  # build-dir, extra cmake args...
  local dir=$1; shift
  mkdir -p "$dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" > "$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; exit 1; }
}

configure_and_build() {  # build-dir, extra cmake args...
  configure "$@"
  cmake --build "$1" -j "$JOBS"
}

run_tests() {  # build-dir
  (cd "$1" && ctest --output-on-failure --timeout 900 -j "$JOBS")
}

# The sanitizer suite's and the fuzz targets' tree. clang (libFuzzer is clang's),
# -O1 and line tables only (as OSS-Fuzz builds): about half the compile time of
# -O2 -g, with file:line in every report. Its libraries carry libFuzzer's coverage
# hooks; the test programs link the sanitizer runtime's empty ones. No cuda
# backend: nvcc's objects are not instrumented, and the CUDA runtime is not made
# to run under AddressSanitizer; build/ compiles it and runs its tests. No
# benchmarks: they run by hand, never under the sanitizers.
SAN=build-asan
configure_sanitized() {
  configure "$SAN" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DMESHFLOW_SANITIZE=ON -DMESHFLOW_FUZZ=ON -DMESHFLOW_CUDA=OFF -DMESHFLOW_BENCH=OFF \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG"
}

# One fuzz target for FUZZ_SECONDS on its corpus ($SAN/corpus/NAME, kept
# between runs) and seeds; prints its executions, per second and in all. A crash,
# a sanitizer report, an input slower than 10 s (a hang) or one asking for more
# than 2 GiB (an unbounded allocation) fails it; the input is kept in
# $SAN/artifacts/ (save it under tests/fuzz/regressions/NAME/ with the fix).
# -entropic=0: libFuzzer's default (entropic) schedule spent 45% of fuzz_eval's
# time in InputCorpus::UpdateFeatureFrequency (perf, clang 14; ~46,000 features);
# without it the script target ran 38% more inputs per CPU second, reaching more
# features in the same time (CONTRIBUTING.md, "Fuzzing").
# malloc_context_size=2: ASan recorded 30 frames of stack at every allocation and
# free, a quarter of fuzz_parse's time; a heap error is still caught, its report
# names only the allocating and freeing function (run the artifact again without
# the option for whole stacks).
# LSAN_OPTIONS: the sanitizer suite's suppressions (tests/lsan.supp), so that CBC's
# own leak of a few row cuts (libOsi) does not stop fuzz_sharding: it found one after
# a million inputs, the leak the suite already suppresses.
# -reload=0: libFuzzer otherwise reads its corpus folder again every second, to
# take inputs other processes add; the first time it ran every file that the
# start-up merge had left out once more (on a grown corpus of 10,000 plan files, a
# tenth of a one-minute run). One process fuzzes each folder here.
# The script targets (eval, parse) share the .mesh seeds and dictionary.
dict_of() {
  [ "$1" = parse ] && echo tests/fuzz/dict/eval.dict || echo "tests/fuzz/dict/$1.dict"
}

run_fuzzer() {  # name, seed folders...
  local name=$1; shift
  local log=$SAN/fuzz-$name.log corpus=$SAN/corpus/$name
  mkdir -p "$corpus" "$SAN/artifacts"
  if ! ASAN_OPTIONS="malloc_context_size=2${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
      LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
      "$SAN/tests/fuzz_$name" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
      -rss_limit_mb=4096 -malloc_limit_mb=2048 -entropic=0 -reload=0 -dict="$(dict_of "$name")" \
      -artifact_prefix="$SAN/artifacts/$name-" -print_final_stats=1 \
      "$corpus" "$@" > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$name failed: see $log and $SAN/artifacts/"
    exit 1
  fi
  local runs speed
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  printf '%-18s %10s inputs in %ss, %6s/s\n' "fuzz_$name" "$runs" "$FUZZ_SECONDS" "$speed"
}

fuzz() {  # the targets built in $SAN
  log "fuzzing ${#FUZZ_TARGETS[@]} targets for ${FUZZ_SECONDS}s each"
  local seeds=$SAN/seeds
  rm -rf "$seeds"
  "$SAN/tests/fuzz_make_seeds" "$seeds"
  mkdir -p "$seeds/eval"
  find tests/golden examples stdlib -name '*.mesh' -exec cp {} "$seeds/eval/" \;
  cp -r "$seeds/eval" "$seeds/parse"
  for name in "${FUZZ_TARGETS[@]}"; do
    local saved=()
    [ -d tests/fuzz/regressions/$name ] && saved=(tests/fuzz/regressions/$name)
    run_fuzzer "$name" "$seeds/$name" "${saved[@]}"
  done
}

case "${1:-}" in
  example)
    install_packages
    configure_and_build build
    log "running examples/train_tiny_gpt.mesh"
    build/repl/meshflow run examples/train_tiny_gpt.mesh --allow-read /usr/share/common-licenses
    ;;
  build)
    install_packages
    configure_and_build build
    ;;
  fuzz)
    install_packages
    configure_sanitized
    cmake --build "$SAN" -j "$JOBS" --target fuzz_make_seeds "${FUZZ_TARGETS[@]/#/fuzz_}"
    fuzz
    ;;
  test)
    install_packages
    log "build and test"
    configure_and_build build
    run_tests build
    log "build and test under AddressSanitizer + UndefinedBehaviorSanitizer (clang)"
    configure_sanitized
    cmake --build "$SAN" -j "$JOBS"
    ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
      UBSAN_OPTIONS=print_stacktrace=1 run_tests "$SAN"
    fuzz
    log "all tests passed"
    ;;
  *)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
