#!/usr/bin/env bash
# meshflow's one entry point for a fresh Debian 12 machine.
#
#   ./dev.sh example   install what is missing, build, run the main example
#                      (a tiny character-level GPT learning the GPL's text)
#   ./dev.sh test      install what is missing, build, run every test: unit,
#                      golden, REPL-through-a-terminal and embedding tests, the
#                      same suite under AddressSanitizer + UBSan, and the fuzzer
#                      for a bounded time
#   ./dev.sh build     install and build only
#
# Environment: JOBS (parallel build jobs, default 2), FUZZ_SECONDS (default 60).
set -euo pipefail
cd "$(dirname "$0")"

JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
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
  (cd "$1" && ctest --output-on-failure --timeout 900)
}

fuzz() {
  log "fuzzing parse+evaluate for ${FUZZ_SECONDS}s"
  configure build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DMESHFLOW_FUZZ=ON -DMESHFLOW_CUDA=OFF
  cmake --build build-fuzz -j "$JOBS" --target fuzz_eval
  local corpus=build-fuzz/corpus
  mkdir -p "$corpus"
  find tests/golden examples stdlib -name '*.mesh' -exec cp {} "$corpus/" \;
  # -timeout: one input running longer than 10 s is a hang and a failure.
  build-fuzz/tests/fuzz_eval -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 "$corpus" 2>&1 | tail -n 15
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
  test)
    install_packages
    log "build and test"
    configure_and_build build
    run_tests build
    log "build and test under AddressSanitizer + UndefinedBehaviorSanitizer"
    # The benchmarks run by hand, never under the sanitizers: not built here.
    # Nor is the cuda backend: nvcc's objects are not instrumented, and the
    # CUDA runtime is not made to run under AddressSanitizer; the build above
    # compiles it and runs its tests.
    configure_and_build build-asan -DMESHFLOW_SANITIZE=ON -DMESHFLOW_BENCH=OFF -DMESHFLOW_CUDA=OFF
    ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
      UBSAN_OPTIONS=print_stacktrace=1 run_tests build-asan
    fuzz
    log "all tests passed"
    ;;
  *)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
