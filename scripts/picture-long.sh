#!/usr/bin/env bash
# The differential test of issue 20 (src/differential.rs) in long-run
# mode: generated programs and message scripts run offline, every
# transition compared with `flowc graph` and the checker's flow graph.
# CI runs 64 conversation and 24 workflow cases on a fixed seed; this runs
# more of each, on a seed of your choice:
#
#   bash scripts/picture-long.sh            # 5000 cases, seed 20
#   bash scripts/picture-long.sh 20000 7    # 20000 cases, seed 7
#
# A failure prints the program and the script that disagree: make it a
# fixture under tests/fixtures/picture/ (see `fixtures_stay_inside_the_picture`).
set -euo pipefail
cd "$(dirname "$0")/.."
FLOWC_PICTURE_CASES="${1:-5000}" FLOWC_PICTURE_SEED="${2:-20}" \
  cargo test --release --lib differential -- --nocapture
