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
cargo test --workspace -- --test-threads=2
