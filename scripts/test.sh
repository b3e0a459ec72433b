#!/usr/bin/env bash
# The test command (README "Test"): installs what the suite needs, then runs every check.
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

if ! command -v cargo >/dev/null; then
    echo "cargo is required (rustup toolchain)" >&2
    exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (unit, randomized crash model, torn writes, kill -9, bench smoke)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace -- --test-threads=2 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

# One closing line for the whole suite, summed over every test binary.
awk '/^test result:/ { passed += $4; failed += $6; ignored += $8 }
     END { printf "\nsuite: %d passed, %d failed, %d skipped\n", passed, failed, ignored }' "$log"
exit "$status"
