#!/usr/bin/env bash
# The long fuzz of the front-end commands, for before a release: the same
# seeded harness as the test suite's (tests/check/fuzz.rs), with many more
# inputs and a fresh seed, in an optimised build.
#
#   scripts/fuzz.sh                 100,000 inputs, seed from the clock
#   scripts/fuzz.sh 500000 42       500,000 inputs, seed 42 (to replay a run)
#   FUZZ_SECONDS=3600 scripts/fuzz.sh 100000000
#                                   as many inputs as an hour allows
#   FUZZ_PROFILE=debug scripts/fuzz.sh 20000
#                                   no release build of the tests (slower per
#                                   input, but nothing new to compile)
#
# It prints "fuzzed N inputs (seed S): P panics, H hangs". Each failing
# input is written to target/tmp/fuzz-failures/; fix the bug, then move the
# file into tests/fuzz_corpus/ so that every test run replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
iterations="${1:-100000}"
seed="${2:-$(date +%s)}"
profile=(--release)
if [ "${FUZZ_PROFILE:-release}" = "debug" ]; then
  profile=()
fi
export FLOWC_FUZZ_ITERATIONS="$iterations" FLOWC_FUZZ_SEED="$seed"
if [ -n "${FUZZ_SECONDS:-}" ]; then
  export FLOWC_FUZZ_SECONDS="$FUZZ_SECONDS"
fi
cargo test "${profile[@]}" --test check fuzz:: -- --nocapture --test-threads 1
