#!/usr/bin/env bash
# Measures the storage engine against this machine's disk and rewrites the storage section of
# BENCHMARKS.md. Usage: bench/storage.sh [--quick]
#   BENCH_DIR  directory on the device under test (default: target/bench-data)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v fio >/dev/null; then
    echo "installing fio (Debian package)" >&2
    apt-get update -qq && apt-get install -y -qq fio >/dev/null
fi
cargo build --release -p bench
exec python3 bench/storage_report.py --bench target/release/strata-bench \
    --dir "${BENCH_DIR:-$PWD/target/bench-data}" --out BENCHMARKS.md "$@"
