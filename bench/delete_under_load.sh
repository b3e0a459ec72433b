#!/usr/bin/env bash
# The tail of a load while the broker frees a deleted topic's gigabytes (issue #13's e2e target).
#
#   bench/delete_under_load.sh STRATA ROUNDS RATE [ACKS]
#
# Each round, on a fresh broker (STRATA: a strata binary; strata-bench from target/release):
# writes ~5 GB to a 4-partition topic, deletes it, and at once runs strata-bench e2e at RATE
# msgs/s (1 KiB, one batch per request, acks ACKS, default 1) while the broker frees the files.
# It prints the e2e latency and, from /proc/diskstats, the worst mean write latency of any
# 200 ms and the discards the disk saw (a file system mounted with `discard` trims every freed
# block). Run it alternately with two binaries to compare them. Needs ~10 GB free.
set -euo pipefail
STRATA=$1 ROUNDS=$2 RATE=$3 ACKS=${4:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/target/release/strata-bench
DATA=$(mktemp -d "$ROOT/target/delete-under-load.XXXXXX")
DEVICE=$(df --output=source "$DATA" | tail -1 | xargs basename)
PORT=${PORT:-19392}
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$DATA"' EXIT

disk() {  # every 200 ms: time, writes completed, ms writing, discards completed
    while true; do
        awk -v t="$(date +%s.%N)" -v d="$DEVICE" '$3==d {print t, $8, $11, $15}' /proc/diskstats
        sleep 0.2
    done
}

for round in $(seq "$ROUNDS"); do
    rm -rf "$DATA/broker"; mkdir -p "$DATA/broker"
    "$STRATA" serve --data-dir "$DATA/broker" --listen 127.0.0.1:$PORT \
        --admin-listen 127.0.0.1:$((PORT + 1)) > "$DATA/broker.log" 2>&1 &
    broker=$!
    for _ in $(seq 100); do grep -q ready "$DATA/broker.log" && break; sleep 0.1; done
    "$BENCH" produce --bootstrap 127.0.0.1:$PORT --topic written --partitions 4 --message-size 1024 \
        --batch-bytes 65536 --acks 1 --batches-per-request 1 --messages 5000000 --duration 60 --quiet \
        > /dev/null 2>&1
    disk > "$DATA/disk.log" & sampler=$!
    "$STRATA" topic delete written -b 127.0.0.1:$PORT > /dev/null
    e2e=$("$BENCH" e2e --bootstrap 127.0.0.1:$PORT --topic e2e --partitions 4 --message-size 1024 \
        --batch-bytes 65536 --rate "$RATE" --acks "$ACKS" --batches-per-request 1 --duration 8 \
        --warmup 2 --quiet 2>&1 | tail -1 | sed 's/.*latency, //; s/; 0 errors//')
    kill "$sampler"; wait "$sampler" 2>/dev/null || true
    worst=$(awk 'NR > 1 && $2 > w { l = ($3 - ms) / ($2 - w); if (l > m) m = l }
                 NR > 1 { n += $4 - d } { w = $2; ms = $3; d = $4 }
                 END { printf "worst 200 ms write latency %.1f ms, %d discards", m, n }' "$DATA/disk.log")
    echo "$(basename "$STRATA") round $round: e2e $e2e | $worst"
    kill -9 "$broker"; wait "$broker" 2>/dev/null || true
done
