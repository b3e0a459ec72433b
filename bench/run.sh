#!/usr/bin/env bash
# Regenerates the broker section of BENCHMARKS.md: machine limits measured in the same run
# (fio O_DIRECT sequential write and read, iperf3 over loopback, one-core memcpy), then
# scenarios against a release strata broker on this machine, driven by strata-bench and by
# librdkafka's own rdkafka_performance (built from the rdkafka-sys crate's sources by
# bench/build_rdkafka_performance.sh, under target/), each with its ratio to a limit.
# Needs 30 GB free under BENCH_DIR (checked first); every scenario's topic is deleted after it.
# Usage: bench/run.sh          (about 25 minutes on 2 cores)
#   BENCH_DIR  scratch directory on the device under test (default: target/bench-data)
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v fio >/dev/null || missing+=(fio)
command -v iperf3 >/dev/null || missing+=(iperf3)
command -v cc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The system libzstd when there is one (as the test command links it): no bundled zstd build.
if pkg-config --exists libzstd 2>/dev/null; then export ZSTD_SYS_USE_PKG_CONFIG=1; fi
cargo build --release -p broker -p bench
bench/build_rdkafka_performance.sh >/dev/null ||
    echo "building rdkafka_performance failed: its scenarios are reported as not run" >&2
# The bench's own Python (issue #40): matplotlib and its dependencies pinned in
# bench/requirements.txt, in target/bench-venv, reinstalled only when that file changes (its
# sha256 stamped inside the venv). The scripts draw their plots with it (bench/plots.py).
venv=target/bench-venv
want=$(sha256sum bench/requirements.txt | cut -d' ' -f1)
py="$venv/bin/python"
if [ "$(cat "$venv/requirements.sha256" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    if python3 -m venv "$venv" && "$venv/bin/pip" install -q --only-binary=:all: -r bench/requirements.txt; then
        echo "$want" >"$venv/requirements.sha256"
    else
        # No plots is no reason to lose the run: the scripts warn and carry on without them.
        echo "warning: building $venv failed: the run goes on with python3, without plots" >&2
        py=python3
    fi
fi
"$py" bench/run_report.py --dir "${BENCH_DIR:-$PWD/target/bench-data}" --out BENCHMARKS.md "$@"
# TLS (issue #18): the same load over an SSL listener and a PLAINTEXT one, as a ratio.
"$py" bench/tls.py --dir "${BENCH_DIR:-$PWD/target/bench-data}/tls" --out BENCHMARKS.md
# Replication (issue #16): RF=3 against RF=1 on three brokers, fio in the same run.
"$py" bench/replication.py --dir "${BENCH_DIR:-$PWD/target/bench-data}/replication" --out BENCHMARKS.md
# Partition scaling (issue #38): 100 to 10,000 partitions on one node, start and shutdown at
# 10,000, and 10,000 over three nodes at RF=3, fio in the same run.
"$py" bench/partition_scaling.py --dir "${BENCH_DIR:-$PWD/target/bench-data}/partition-scaling" --out BENCHMARKS.md
# Consumer groups (issue #39): a 4th member joining a busy group under KIP-848 and under the
# classic protocol, and the coordinator's assignment time for 1,000 members x 10,000
# partitions; confluent-kafka from the interop suite's pinned venv.
[ -x target/interop-venv/bin/python ] || scripts/interop.sh --collect-only -q >/dev/null
target/interop-venv/bin/python bench/consumer_groups.py --dir "${BENCH_DIR:-$PWD/target/bench-data}/consumer-groups" --out BENCHMARKS.md
# Share groups (KIP-932): records/s through a share group of 1, 3 and 6 consumers (explicit
# ACCEPT, 1 KiB) on a 3-partition topic against a classic group of 3; same venv.
target/interop-venv/bin/python bench/share_groups.py --dir "${BENCH_DIR:-$PWD/target/bench-data}/share-groups" --out BENCHMARKS.md
# Every plot and the plots section again, from the data files this run wrote (run_report.py and
# replication.py already drew theirs; this keeps the section last-written and whole).
"$py" bench/plots.py --out BENCHMARKS.md || echo "warning: bench/plots.py failed" >&2
