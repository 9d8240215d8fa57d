#!/usr/bin/env bash
# The test command: installs what the tests need (idempotent), then runs
# every test. Works on a fresh machine with only the Rust toolchain, Node.js
# and apt available.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
cargo test
