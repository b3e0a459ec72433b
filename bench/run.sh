#!/usr/bin/env bash
# Regenerates the broker section of BENCHMARKS.md: machine limits measured in the same run
# (fio O_DIRECT sequential write, iperf3 over loopback, one-core memcpy), then strata-bench
# scenarios against a release strata broker on this machine, each with its ratio to a limit.
# Usage: bench/run.sh          (about 5 minutes on 2 cores)
#   BENCH_DIR  scratch directory on the device under test (default: target/bench-data)
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v fio >/dev/null || missing+=(fio)
command -v iperf3 >/dev/null || missing+=(iperf3)
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cargo build --release -p broker -p bench
exec python3 bench/run_report.py --dir "${BENCH_DIR:-$PWD/target/bench-data}" --out BENCHMARKS.md "$@"
