#!/usr/bin/env bash
# The README's run command on a fresh machine (issue: "a run command that works on a fresh
# machine"): clones this repository's HEAD into a scratch directory, hides the system libzstd
# from pkg-config (PKG_CONFIG_LIBDIR pointed at an empty directory, as on a machine with only a
# Rust toolchain), runs the README's run command verbatim there (taken from the README, so the
# two cannot drift; default data directory ./strata-data, default ports 9092 and 9644), waits
# for `ready`, round-trips messages with `strata produce`/`consume` and kcat, then stops the
# broker with SIGTERM and expects a clean exit.
#
# Usage: scripts/fresh_clone_check.sh        (uses ports 9092 and 9644; fails if they are busy)
# FRESH_CLONE_KEEP_BINARIES=DIR copies the release binaries there (a baseline for benchmarks);
# FRESH_CLONE_KEEP_BROKER=DIR copies only `strata` (the test command's librdkafka stages).
# Only committed work is checked (it is a clone of HEAD). The build is a full release build in
# the clone's own target directory: 3-6 minutes on two cores.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

log() { printf '==> fresh clone: %s\n' "$*" >&2; }
fail() { printf 'FAIL fresh clone: %s\n' "$*" >&2; exit 1; }

# The command between the README's "## Run" heading and the end of its first code block.
run_command=$(awk '/^## Run/ { in_run = 1; next }
    in_run && /^```sh/ { in_code = 1; next }
    in_code && /^```/ { exit }
    in_code { print }' "$repo/README.md")
[ "$(printf '%s\n' "$run_command" | wc -l)" = 1 ] && [ -n "$run_command" ] ||
    fail "README.md has no one-line run command under '## Run': $run_command"
log "README run command: $run_command"

for port in 9092 9644; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        fail "port $port is in use; the README command uses the default ports"
    fi
done

scratch=$(mktemp -d /tmp/strata-fresh-clone.XXXXXX)
broker_pid=
cleanup() {
    if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
        kill -KILL -- "-$broker_pid" 2>/dev/null || kill -KILL "$broker_pid" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT

git clone -q --no-hardlinks "$repo" "$scratch/strata"
cd "$scratch/strata"
log "cloned $(git rev-parse --short HEAD) into $scratch/strata"

# A machine without libzstd's pkg-config file: the build must not need it.
mkdir -p "$scratch/no-pkg-config"
export PKG_CONFIG_LIBDIR="$scratch/no-pkg-config" PKG_CONFIG_PATH=
unset ZSTD_SYS_USE_PKG_CONFIG CARGO_TARGET_DIR
if pkg-config --exists libzstd 2>/dev/null; then
    fail "pkg-config still finds libzstd with PKG_CONFIG_LIBDIR=$PKG_CONFIG_LIBDIR"
fi

log "building and starting (this is a full release build)"
# setsid: the broker gets its own process group, so cleanup reaches cargo and strata alike.
setsid bash -c "$run_command" >"$scratch/serve.log" 2>&1 &
broker_pid=$!
deadline=$((SECONDS + 1200))
until grep -q ' ready' "$scratch/serve.log"; do
    if ! kill -0 "$broker_pid" 2>/dev/null; then
        tail -40 "$scratch/serve.log" >&2
        fail "the run command exited before the broker logged ready"
    fi
    [ "$SECONDS" -lt "$deadline" ] || { tail -40 "$scratch/serve.log" >&2; fail "no ready within 20 min"; }
    sleep 2
done
[ -d "$scratch/strata/strata-data" ] || fail "the default data directory ./strata-data was not created"
log "broker ready with data in ./strata-data"

strata=target/release/strata
$strata topic create fresh --partitions 2 -b localhost:9092 >/dev/null
printf 'k1\thello\nk2\tworld\n' | $strata produce fresh --key-separator "$(printf '\t')" -b localhost:9092
got=$($strata consume fresh --offset beginning --exit-at-end --print-keys -b localhost:9092 | sort)
[ "$got" = "$(printf 'k1\thello\nk2\tworld')" ] || fail "strata consume read back: $got"

if command -v kcat >/dev/null; then
    printf 'one\ntwo\nthree\n' | kcat -P -b localhost:9092 -t fresh-kcat -p 0
    got=$(kcat -C -b localhost:9092 -t fresh-kcat -p 0 -o beginning -e -q | sort | tr '\n' ' ')
    [ "$got" = "one three two " ] || fail "kcat read back: $got"
    # And across tools: what strata produced, kcat reads.
    got=$(kcat -C -b localhost:9092 -t fresh -o beginning -e -q -f '%k=%s\n' | sort | tr '\n' ' ')
    [ "$got" = "k1=hello k2=world " ] || fail "kcat read strata's records as: $got"
else
    fail "kcat is not installed (scripts/test.sh installs it)"
fi

# SIGTERM to the broker itself: `cargo run` keeps running as its parent, in the session that
# setsid started.
strata_pid=$(pgrep -s "$broker_pid" -x strata || true)
[ -n "$strata_pid" ] || fail "cannot find the strata process"
kill -TERM "$strata_pid"
for _ in $(seq 1 200); do
    kill -0 "$strata_pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$strata_pid" 2>/dev/null && fail "strata did not exit within 20 s of SIGTERM"
grep -q 'clean shutdown complete' "$scratch/serve.log" || { tail -20 "$scratch/serve.log" >&2; fail "no clean shutdown"; }
wait "$broker_pid" || fail "the run command exited with status $?"
broker_pid=
if [ -n "${FRESH_CLONE_KEEP_BINARIES:-}" ]; then
    cargo build -q --release -p bench
    mkdir -p "$FRESH_CLONE_KEEP_BINARIES"
    cp target/release/strata target/release/strata-bench "$FRESH_CLONE_KEEP_BINARIES/"
fi
if [ -n "${FRESH_CLONE_KEEP_BROKER:-}" ]; then
    mkdir -p "$FRESH_CLONE_KEEP_BROKER"
    cp target/release/strata "$FRESH_CLONE_KEEP_BROKER/"
fi
log "passed: built without pkg-config's libzstd, ran from the README, round-tripped, shut down cleanly"
