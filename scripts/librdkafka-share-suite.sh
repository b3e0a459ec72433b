#!/usr/bin/env bash
# librdkafka 2.15.1's share-consumer tests (KIP-932 share groups, tests/0170-0190) against a
# fresh single strata broker.
#
# Usage: scripts/librdkafka-share-suite.sh [TEST ...]   run these tests (default: the share list)
#        scripts/librdkafka-share-suite.sh --quick      the share list without LONG_TESTS
#        scripts/librdkafka-share-suite.sh --local      the broker-less (mock cluster) variants
#        scripts/librdkafka-share-suite.sh --list | --list-local   print the share / local list
# A TEST is a librdkafka test number (0170, 170) or NNNN:SUBTEST (librdkafka's SUBTESTS filter:
# only sub-tests whose name contains SUBTEST). Prints one line per test (`0170 passed (95 s)`,
# `failed`, `skipped`, `timeout`, `expected failure`, with the reason from the test's log), keeps
# each test's log in target/librdkafka-share-suite/logs/NNNN.log (the broker's in strata.log),
# and ends with `N passed, M failed, K skipped, X expected failures`. Exit code 0 only if
# nothing failed.
#
# A sibling of scripts/librdkafka-suite.sh (librdkafka 2.12.1, which has no share consumer):
# the broker start, the test.conf, the one-test-per-process runner, the reading of the
# runner's summary and the KNOWN_FAILURES rule are that script's, copied; what differs:
#   - Source: librdkafka 2.15.1, as the npm package @confluentinc/kafka-javascript@1.10.1
#     ships it in deps/librdkafka (tests/ included; no crates.io rdkafka-sys vendors 2.15.1).
#     Fetched with `npm pack` (a download only: no install script runs, nothing is built by
#     npm), its sha512 checked against the registry's integrity pinned below, into
#     target/librdkafka-share-suite/npm; deps/librdkafka is copied to
#     target/librdkafka-share-suite/librdkafka. Nothing of it is committed.
#   - Build: the same configure and make as the 2.12.1 runner (`make libs`, then
#     `make -C tests build`, under `nice -n 19`, -j2 = SUITE_MAKE_JOBS), plain TCP, no SSL,
#     SASL/GSSAPI, curl or external lz4; but with zstd and zlib required (--enable-zstd
#     --enable-zlib): 0171's codec sub-test produces with every codec, zstd and gzip included.
#     Missing gcc, g++, make, python3, npm, pkg-config, libzstd-dev or zlib1g-dev are installed
#     with apt-get at the version apt resolves.
#   - TEST_KAFKA_VERSION=4.2.0: every broker-facing share test is declared
#     TEST_BRKVER(4, 2, 0, 0) in tests/test.c and is skipped ("not applicable for broker
#     version") below that; 2.12.1's suite uses 4.0.0.
#   - The consumer protocol: no second run. A share consumer is its own handle type
#     (rd_kafka_share_consumer_new(), group.protocol forced internally, setting it rejected), so
#     TEST_CONSUMER_GROUP_PROTOCOL is always unset.
#   - Time limits per test: each share test sets its own budget (test_timeout_set(), times
#     test.timeout.multiplier, here 2 = SUITE_TIMEOUT_MULTIPLIER); the runner fails the test
#     when it runs out (`timeout`, "librdkafka's test timeout"). This script's own `timeout` is
#     that budget plus 60 s (RUNNER_BUDGET below), or SUITE_TEST_TIMEOUT seconds for every test
#     when set.
#
# The share list (the broker-facing entries of tests[] numbered 0170-0190 in 2.15.1's
# tests/test.c; 0182, 0183, 0186 and 0187 are TEST_F_LOCAL only, and 0173, 0176, 0178, 0179,
# 0180 and 0184 also have a TEST_F_LOCAL `_local` entry, left out by -L):
#   0170 subscription  0171 consume  0172 acknowledge  0173 commit_async  0174 concurrency
#   0175 groups  0176 commit_sync  0177 transactions  0178 close  0179 destroy  0180 config
#   0181 topic delete  0184 topic recreate  0185 max.poll.interval.ms  0190 telemetry
# 0190 is TEST_F_MANUAL (run only when named, as here) and skips itself unless the topic
# client-telemetry-metrics exists, which needs Kafka's ClientOtlpMetricsReporter plugin and an
# OpenTelemetry collector writing to that topic: against strata it reports `skipped`.
# LONG_TESTS (--quick leaves them out): the ones with the largest budgets and message volumes.
#
# --local runs the TEST_F_LOCAL entries of the same numbers instead (`-l`: librdkafka's mock
# cluster, no broker, none is started): when a share test fails against strata, these tell
# whether the client build itself works.
#
# Broker: $STRATA_BIN, else target/release/strata (built with
# `ZSTD_SYS_USE_PKG_CONFIG=1 cargo build --release -p broker` only when missing), started as
# scripts/librdkafka-suite.sh starts it (free ports, fresh data directory, --num-partitions 4
# --auto-create-topics true; SUITE_CLUSTER=N for an N-node `strata cluster local`). One broker
# serves the whole run; if it dies during a test, that test is reported with the broker's exit
# and a fresh broker is started for the next one.
# Runner: one test per process, `TESTS=NNNN ./test-runner -p1 -K -L` (`-p1 -l` with --local)
# under `timeout`, never quick mode (-Q), with a tests/test.conf like LibrdkafkaTestApp.py's:
# broker.address.family=v4, test.timeout.multiplier, bootstrap.servers, security.protocol.
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
REPO=$PWD

LIBRDKAFKA_VERSION=2.15.1
LIBRDKAFKA_HEX=0x020f01ff # RD_KAFKA_VERSION of 2.15.1 in src/rdkafka.h
NPM_PACKAGE="@confluentinc/kafka-javascript"
NPM_VERSION=1.10.1
NPM_TARBALL="confluentinc-kafka-javascript-$NPM_VERSION.tgz"
# `npm view @confluentinc/kafka-javascript@1.10.1 dist.integrity`
NPM_INTEGRITY="sha512-KVePUBn21EqCVP9mfxzEuM3SYJHHEF7X+iiC2e43QQgDSyEaksInmCGooT3w5q+cNAdkSCrK71j0ICfqoSqZLw=="
ROOT="$REPO/target/librdkafka-share-suite"
NPM_DIR="$ROOT/npm"
LIB="$ROOT/librdkafka"
TDIR="$LIB/tests"
LOGS="$ROOT/logs"
RUN="$ROOT/run"
CONFIGURE_ARGS=(--disable-ssl --disable-gssapi --enable-zstd --enable-zlib --disable-lz4-ext --disable-curl)
MAKE_JOBS=${SUITE_MAKE_JOBS:-2}
STRATA_CORES=${STRATA_CORES:-2}
KAFKA_VERSION=${SUITE_KAFKA_VERSION:-4.2.0}
TIMEOUT_MULTIPLIER=${SUITE_TIMEOUT_MULTIPLIER:-2}

SHARE_TESTS=(0170 0171 0172 0173 0174 0175 0176 0177 0178 0179 0180 0181 0184 0185 0190)
LOCAL_TESTS=(0173 0176 0178 0179 0180 0182 0183 0184 0186)
# The largest budgets and volumes: 0171 (600 s; 10k and 50k-record runs, every codec),
# 0172 (600 s; random acks over 5,000-15,000 records, 15 topics), 0174 (1,500 s; producer and
# consumer threads, up to 16 consumers and 50,000 records per run, consumer churn).
LONG_TESTS=(0171 0172 0174)
# Tests that assume their topic's partitions are led by different brokers: 0179's
# destroy-with-explicit-ack sub-test expects each poll to return one partition's records
# (one broker's ShareFetch answer), which one node (one answer for both partitions) cannot
# give. The default and --quick lists leave them out on one node; run them with
# SUITE_CLUSTER=3 (the test command does).
CLUSTER_TESTS=(0179)
# Each test's test_timeout_set() in 2.15.1 (seconds, before the multiplier); a test that sets
# none gets the runner's 30 s. RUNNER_BUDGET is the broker-facing entry's, LOCAL_BUDGET the
# largest of the number's TEST_F_LOCAL entries'.
declare -A RUNNER_BUDGET=(
    [0170]=200 [0171]=600 [0172]=600 [0173]=120 [0174]=1500 [0175]=30 [0176]=120 [0177]=200
    [0178]=600 [0179]=120 [0180]=120 [0181]=120 [0184]=300 [0185]=300 [0190]=180
)
declare -A LOCAL_BUDGET=(
    [0173]=30 [0176]=30 [0178]=300 [0179]=480 [0180]=30 [0182]=120 [0183]=120 [0184]=180 [0186]=30
)
# Known failures: a test whose first failure is a feature a later issue builds. Such a test is
# reported `expected failure` (and does not fail the run) only while its first failure matches
# the pattern given here (an extended regex over "TEST (SUBTEST) at FILE:LINE: message");
# failing anywhere else fails the run, and passing does too (then this entry must go: the list
# cannot outlive the gap it names). Keys are entries as run: NNNN or NNNN:SUBTEST. E.g.
#   KNOWN_FAILURES[0177]='do_test_dynamic_committed_to_uncommitted_with_release'
#   KNOWN_WHY[0177]='share.isolation.level changed while records are acquired (issue #NN)'
declare -A KNOWN_FAILURES=()
declare -A KNOWN_WHY=()

usage() { sed -n '2,14p' "$SELF" | sed 's/^# \{0,1\}//'; }
log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'librdkafka-share-suite: %s\n' "$*" >&2; exit 2; }

in_list() { # NEEDLE LIST...
    local n=$1 x
    shift
    for x in "$@"; do [ "$x" = "$n" ] && return 0; done
    return 1
}

quick_list() {
    local t
    for t in "${SHARE_TESTS[@]}"; do
        in_list "$t" "${LONG_TESTS[@]}" || single_node_skips "$t" || echo "$t"
    done
}

# Whether a default-list test is left out because this run is one node (CLUSTER_TESTS).
single_node_skips() {
    [ "${SUITE_CLUSTER:-1}" = 1 ] && in_list "$1" "${CLUSTER_TESTS[@]}"
}

# ---- arguments -------------------------------------------------------------------------------
mode=share
selected=()
for arg in "$@"; do
    case "$arg" in
    -h | --help) usage; exit 0 ;;
    --list) printf '%s\n' "${SHARE_TESTS[@]}" | paste -sd' '; exit 0 ;;
    --list-local) printf '%s\n' "${LOCAL_TESTS[@]}" | paste -sd' '; exit 0 ;;
    --quick | --local)
        [ "$mode" = share ] || die "--quick and --local exclude each other"
        mode=${arg#--} ;;
    [0-9] | [0-9][0-9] | [0-9][0-9][0-9] | [0-9][0-9][0-9][0-9])
        selected+=("$(printf '%04d' "$((10#$arg))")") ;;
    [0-9][0-9][0-9][0-9]:?*) selected+=("$arg") ;;
    *) die "unknown argument: $arg (see --help)" ;;
    esac
done
local_mode=false
[ "$mode" = local ] && local_mode=true
if [ ${#selected[@]} -gt 0 ]; then
    [ "$mode" = quick ] && die "--quick and test numbers exclude each other"
    tests=("${selected[@]}")
elif [ "$mode" = local ]; then
    tests=("${LOCAL_TESTS[@]}")
elif [ "$mode" = quick ]; then
    mapfile -t tests < <(quick_list)
else
    tests=()
    for t in "${SHARE_TESTS[@]}"; do single_node_skips "$t" || tests+=("$t"); done
fi

# ---- tools -----------------------------------------------------------------------------------
ensure_tools() {
    local missing=() pkg ver
    command -v gcc >/dev/null || missing+=(gcc)
    command -v g++ >/dev/null || missing+=(g++)
    command -v make >/dev/null || missing+=(make)
    command -v python3 >/dev/null || missing+=(python3)
    command -v timeout >/dev/null || missing+=(coreutils)
    command -v npm >/dev/null || missing+=(npm)
    if ! command -v pkg-config >/dev/null; then
        missing+=(pkg-config libzstd-dev zlib1g-dev)
    else
        pkg-config --exists libzstd || missing+=(libzstd-dev)
        pkg-config --exists zlib || missing+=(zlib1g-dev)
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    local pinned=()
    for pkg in "${missing[@]}"; do
        ver=$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')
        if [ -n "$ver" ] && [ "$ver" != "(none)" ]; then pinned+=("$pkg=$ver"); else pinned+=("$pkg"); fi
    done
    log "installing Debian packages: ${pinned[*]}"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${pinned[@]}" >/dev/null
}

# ---- librdkafka sources and the test runner --------------------------------------------------
integrity_of() { # FILE: npm's "sha512-<base64>" of it
    python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$1"
}

# The pinned tarball into $NPM_DIR (kept: a rerun does not download it again), then its
# deps/librdkafka into $LIB (replaced).
fetch_sources() {
    local tgz="$NPM_DIR/$NPM_TARBALL"
    mkdir -p "$NPM_DIR"
    if [ ! -f "$tgz" ] || [ "$(integrity_of "$tgz")" != "$NPM_INTEGRITY" ]; then
        rm -f "$tgz"
        log "fetching $NPM_PACKAGE@$NPM_VERSION (librdkafka $LIBRDKAFKA_VERSION sources) with npm pack"
        (cd "$NPM_DIR" && npm pack --silent "$NPM_PACKAGE@$NPM_VERSION" >/dev/null) ||
            die "npm pack $NPM_PACKAGE@$NPM_VERSION failed"
        [ -f "$tgz" ] || die "npm pack left no $tgz"
    fi
    [ "$(integrity_of "$tgz")" = "$NPM_INTEGRITY" ] ||
        die "$tgz: sha512 is not the pinned integrity $NPM_INTEGRITY"
    rm -rf "$NPM_DIR/package" "$LIB"
    tar -xzf "$tgz" -C "$NPM_DIR" package/deps/librdkafka
    [ -f "$NPM_DIR/package/deps/librdkafka/tests/test.c" ] ||
        die "$tgz has no deps/librdkafka/tests/test.c"
    mv "$NPM_DIR/package/deps/librdkafka" "$LIB"
    rm -rf "$NPM_DIR/package"
}

# The configure command line recorded in a tree's Makefile.config, if configured.
configured_with() { sed -n 's/^# \(\.\/configure.*\)$/\1/p' "$1/Makefile.config" 2>/dev/null | head -1; }
is_wanted_version() { grep -q "#define RD_KAFKA_VERSION $LIBRDKAFKA_HEX" "$LIB/src/rdkafka.h" 2>/dev/null; }

build_runner() {
    local want
    want="./configure ${CONFIGURE_ARGS[*]}"
    if [ -x "$TDIR/test-runner" ] && [ "$(configured_with "$LIB")" = "$want" ] && is_wanted_version; then
        return 0
    fi
    mkdir -p "$ROOT"
    if [ "$(configured_with "$LIB")" != "$want" ] || [ ! -f "$TDIR/test.c" ] || ! is_wanted_version; then
        fetch_sources
        log "configuring librdkafka $LIBRDKAFKA_VERSION: $want"
        (cd "$LIB" && ./configure "${CONFIGURE_ARGS[@]}" >"$ROOT/configure.log" 2>&1) ||
            { tail -30 "$ROOT/configure.log" >&2; die "configure failed ($ROOT/configure.log)"; }
    fi
    is_wanted_version || die "$LIB is not librdkafka $LIBRDKAFKA_VERSION"
    log "building librdkafka and the test runner (nice -n 19, -j$MAKE_JOBS; log: $ROOT/build.log)"
    (cd "$LIB" && nice -n 19 make -j"$MAKE_JOBS" libs && nice -n 19 make -j"$MAKE_JOBS" -C tests build) \
        >"$ROOT/build.log" 2>&1 || { tail -30 "$ROOT/build.log" >&2; die "build failed ($ROOT/build.log)"; }
    [ -x "$TDIR/test-runner" ] || die "no $TDIR/test-runner after the build"
}

# ---- the broker ------------------------------------------------------------------------------
strata_bin() {
    if [ -n "${STRATA_BIN:-}" ]; then
        [ -x "$STRATA_BIN" ] || die "STRATA_BIN=$STRATA_BIN is not an executable"
        (cd "$REPO" && realpath "$STRATA_BIN")
        return
    fi
    if [ ! -x "$REPO/target/release/strata" ]; then
        log "building target/release/strata"
        (cd "$REPO" && ZSTD_SYS_USE_PKG_CONFIG=1 cargo build --release -p broker >&2)
    fi
    echo "$REPO/target/release/strata"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

BROKER_PID=
BROKER_STARTS=0
PORT=
BOOTSTRAP=
SUITE_CLUSTER=${SUITE_CLUSTER:-1}

# A base port P whose P + 100 * (node - 1) + {0, 1, 10} are all free (`strata cluster local`).
free_base_port() {
    python3 - "$SUITE_CLUSTER" <<'PY'
import random, socket, sys
nodes = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 60000 - 100 * nodes, 2)
    ports = [base + 100 * i + d for i in range(nodes) for d in (0, 1, 10)]
    try:
        socks = []
        for port in ports:
            s = socket.socket(); s.bind(("127.0.0.1", port)); socks.append(s)
        for s in socks: s.close()
        print(base)
        break
    except OSError:
        for s in socks: s.close()
PY
}

start_cluster() {
    local base deadline mark
    base=$(free_base_port)
    [ -n "$base" ] || die "no free port range for a $SUITE_CLUSTER-node cluster"
    rm -rf "$RUN/cluster"
    mkdir -p "$RUN/cluster"
    BROKER_STARTS=$((BROKER_STARTS + 1))
    local cmd=("$STRATA" cluster local --nodes "$SUITE_CLUSTER" --data-dir "$RUN/cluster" --base-port "$base")
    printf '\n=== librdkafka-share-suite: cluster start #%d: %s\n' "$BROKER_STARTS" "${cmd[*]}" >>"$LOGS/strata.log"
    mark=$(wc -c <"$LOGS/strata.log")
    "${cmd[@]}" </dev/null >>"$LOGS/strata.log" 2>&1 &
    BROKER_PID=$!
    deadline=$((SECONDS + 90))
    until tail -c +"$((mark + 1))" "$LOGS/strata.log" | grep 'is ready; bootstrap servers' >/dev/null; do
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            tail -20 "$LOGS/strata.log" >&2
            die "the cluster exited before it was ready ($LOGS/strata.log)"
        fi
        [ $SECONDS -lt $deadline ] || { tail -20 "$LOGS/strata.log" >&2; die "cluster not ready within 90 s"; }
        sleep 0.2
    done
    BOOTSTRAP=$(tail -c +"$((mark + 1))" "$LOGS/strata.log" | sed -n 's/.*bootstrap servers: //p' | head -1)
    PORT=$base
}

start_broker() {
    if [ "$SUITE_CLUSTER" -gt 1 ]; then
        start_cluster
        write_test_conf
        return
    fi
    local admin deadline
    PORT=$(free_port)
    admin=$(free_port)
    while [ "$admin" = "$PORT" ]; do admin=$(free_port); done
    rm -rf "$RUN/data"
    mkdir -p "$RUN/data"
    BROKER_STARTS=$((BROKER_STARTS + 1))
    local cmd=("$STRATA" serve --data-dir "$RUN/data" --listen "127.0.0.1:$PORT"
        --advertise "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$admin" --cores "$STRATA_CORES"
        --num-partitions 4 --auto-create-topics true)
    printf '\n=== librdkafka-share-suite: broker start #%d: %s\n' "$BROKER_STARTS" "${cmd[*]}" >>"$LOGS/strata.log"
    local mark
    mark=$(wc -c <"$LOGS/strata.log")
    "${cmd[@]}" </dev/null >>"$LOGS/strata.log" 2>&1 &
    BROKER_PID=$!
    deadline=$((SECONDS + 30))
    until tail -c +"$((mark + 1))" "$LOGS/strata.log" | grep -w ready >/dev/null; do
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            tail -20 "$LOGS/strata.log" >&2
            die "strata exited before logging 'ready' ($LOGS/strata.log)"
        fi
        [ $SECONDS -lt $deadline ] || { tail -20 "$LOGS/strata.log" >&2; die "strata not ready within 30 s"; }
        sleep 0.1
    done
    BOOTSTRAP="127.0.0.1:$PORT"
    write_test_conf
}

write_test_conf() {
    {
        echo "# Written by scripts/librdkafka-share-suite.sh (as tests/LibrdkafkaTestApp.py writes it for trivup)."
        echo "broker.address.family=v4"
        echo "test.timeout.multiplier=$TIMEOUT_MULTIPLIER"
        # --local: the mock-cluster tests set their own bootstrap.servers.
        [ -n "$BOOTSTRAP" ] && echo "bootstrap.servers=$BOOTSTRAP"
        echo "security.protocol=PLAINTEXT"
    } >"$TDIR/test.conf"
}

stop_broker() {
    [ -n "$BROKER_PID" ] || return 0
    if kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -TERM "$BROKER_PID" 2>/dev/null || true
        local _
        for _ in $(seq 150); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
        pkill -KILL -P "$BROKER_PID" 2>/dev/null || true # a cluster's nodes, if still there
        kill -KILL "$BROKER_PID" 2>/dev/null || true
    fi
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
}

# ---- one test --------------------------------------------------------------------------------
# Summary rows of a test log: "name<TAB>STATE<TAB>reason", for entries of test number $2.
summary_rows() {
    sed 's/\x1b\[[0-9;]*m//g; s/\x1b([A-Z]//g' "$1" |
        awk -v num="$2" -F'|' 'NF >= 4 && $2 ~ "^ *" num "_" {
            name = $2; st = $3; reason = $5
            gsub(/^ +| +$/, "", name); gsub(/^ +| +$/, "", st); gsub(/^ +| +$/, "", reason)
            print name "\t" st "\t" reason }'
}

first_failure() { # the first "### Test "NAME (SUBTEST)" failed at FILE:LINE:FN() at DATE: ###" + message
    sed 's/\x1b\[[0-9;]*m//g' "$1" | awk '/^### Test ".*" failed at /{
        name = $0; sub(/^### Test "/, "", name); sub(/" failed at .*/, "", name)
        at = $0; sub(/.*" failed at /, "", at); sub(/:[^:]*\(\) at .*/, "", at)
        getline m; sub(/ +$/, "", m); print name " at " at ": " m; exit }'
}

# The sub-test lines of log $1 for sub-tests matching $2 ("[ FUNC:LINE: what ]" at the start,
# "[ FUNC:LINE: what: PASS (1.23s) ]" or "...: SKIP: reason ]" at the end).
sub_test_lines() { sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -F "[ " | grep -F -- "$2"; }
# Whether a sub-test matching $2 ended with $3 (PASS or SKIP). Not `grep -q` (SIGPIPE under
# pipefail; see scripts/librdkafka-suite.sh).
sub_tests_ended() {
    case $3 in
    PASS) sub_test_lines "$1" "$2" | grep -E ': PASS \([0-9.]+s\) \]$' >/dev/null ;;
    *) sub_test_lines "$1" "$2" | grep -E ': SKIP: .* \]$' >/dev/null ;;
    esac
}

# This script's limit for test number $1: the runner's own budget plus 60 s.
limit_for() {
    local budget
    if [ -n "${SUITE_TEST_TIMEOUT:-}" ]; then
        echo "$SUITE_TEST_TIMEOUT"
        return
    fi
    if $local_mode; then budget=${LOCAL_BUDGET[$1]:-30}; else budget=${RUNNER_BUDGET[$1]:-30}; fi
    echo $((budget * TIMEOUT_MULTIPLIER + 60))
}

npassed=0
nfailed=0
nskipped=0
nexpected=0
run_one() {
    local t=$1 num sub='' start rc secs allrows rows state reason brc limit
    local args=(-p1 -K -L)
    $local_mode && args=(-p1 -l)
    num=${t%%:*}
    [ "$num" != "$t" ] && sub=${t#*:}
    local tlog="$LOGS/${t//:/-}.log"
    if ! compgen -G "$TDIR/$num-*.c*" >/dev/null; then
        echo "$t failed (0 s): no such test in librdkafka $LIBRDKAFKA_VERSION"
        nfailed=$((nfailed + 1))
        return
    fi
    limit=$(limit_for "$num")
    if ! $local_mode && ! kill -0 "$BROKER_PID" 2>/dev/null; then start_broker; fi
    start=$SECONDS
    set +e
    local filter=()
    [ -n "$sub" ] && filter=("SUBTESTS=$sub")
    (cd "$TDIR" && env -u TEST_CONSUMER_GROUP_PROTOCOL TESTS="$num" "${filter[@]}" \
        TEST_KAFKA_VERSION="$KAFKA_VERSION" TEST_SCENARIO=default BROKERS="$BOOTSTRAP" \
        LD_LIBRARY_PATH="../src:../src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        timeout -k 10 "$limit" ./test-runner "${args[@]}"; exit $?) >"$tlog" 2>&1 </dev/null
    rc=$?
    set -e
    secs=$((SECONDS - start))
    allrows=$(summary_rows "$tlog" "$num")
    # Entries left out by -L/-l/-K or silently (another scenario) are not this run's results.
    rows=$(awk -F'\t' '$3 != "Filtered due to negative test flags" && !($2 == "SKIPPED" && $3 == "")' \
        <<<"$allrows")
    local f
    f=$(first_failure "$tlog")
    if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ $secs -ge "$limit" ]; }; then
        state=timeout
        reason="killed by this script after ${limit} s${f:+; first failure: $f}"
    elif [[ "$f" == *" timed out (timeout set to "* ]]; then
        # The runner's own per-test timeout (test_timeout_set() x test.timeout.multiplier).
        state=timeout
        reason="librdkafka's test timeout: $f"
        local more
        more=$(sed 's/\x1b\[[0-9;]*m//g' "$tlog" | grep -m1 -oE '(Receive|Send) failed: .*|Consume error: .*' || true)
        [ -n "$more" ] && reason="$reason; client error: ${more:0:200}"
    elif grep -qP '\tFAILED\t|\tRUNNING\t' <<<"$rows" || [ $rc -ne 0 ]; then
        state=failed
        reason=$f
        [ -n "$reason" ] ||
            reason=$(awk -F'\t' '$2 == "FAILED" || $2 == "RUNNING" {print $1 ": " ($3 == "" ? $2 : $3); exit}' <<<"$rows")
        [ -n "$reason" ] || reason="test-runner exit code $rc: $(tail -1 "$tlog")"
    elif grep -qP '\tPASSED\t' <<<"$rows"; then
        state=passed
        reason=$(awk -F'\t' '$2 == "SKIPPED" {printf "%s%s skipped: %s", (n++ ? "; " : ""), $1, $3}' <<<"$rows")
    elif [ -n "$rows" ]; then
        state=skipped
        reason=$(awk -F'\t' '$2 == "SKIPPED" {printf "%s%s: %s", (n++ ? "; " : ""), $1, $3}' <<<"$rows")
    else
        state=skipped
        if [ -n "$allrows" ]; then
            reason="only entries that -L/-l/-K leave out (broker-less, broker-facing or known issue)"
        else
            reason="no entry for the default scenario ran (see $tlog)"
        fi
    fi
    if [ -n "$sub" ] && [ "$state" = passed ] && ! sub_tests_ended "$tlog" "$sub" PASS; then
        if sub_tests_ended "$tlog" "$sub" SKIP; then
            state=skipped
            reason=$(sub_test_lines "$tlog" "$sub" | grep -m1 -oE 'SKIP: .* \]$' | sed 's/ \]$//')
        else
            state=failed
            reason="no sub-test whose name contains \"$sub\" ran and passed"
        fi
    fi
    if [ -n "$BROKER_PID" ] && ! kill -0 "$BROKER_PID" 2>/dev/null; then
        wait "$BROKER_PID" 2>/dev/null && brc=0 || brc=$?
        BROKER_PID=
        [ "$state" = passed ] && state=failed
        reason="strata exited (status $brc) during the test, restarted for the next one${reason:+; $reason}"
    fi
    local known=${KNOWN_FAILURES[$t]:-}
    if [ -n "$known" ]; then
        if [ "$state" = failed ] && grep -qE "$known" <<<"$reason"; then
            state="expected failure"
            reason="${KNOWN_WHY[$t]:-}; $reason"
        elif [ "$state" = passed ]; then
            state=failed
            reason="passed, but KNOWN_FAILURES lists it (${KNOWN_WHY[$t]:-}): remove the entry"
        fi
    fi
    case $state in
    passed) npassed=$((npassed + 1)) ;;
    skipped) nskipped=$((nskipped + 1)) ;;
    "expected failure") nexpected=$((nexpected + 1)) ;;
    *) nfailed=$((nfailed + 1)) ;;
    esac
    echo "$t $state ($secs s)${reason:+: $reason}"
}

# ---- main ------------------------------------------------------------------------------------
ensure_tools
build_runner
mkdir -p "$LOGS"
for t in "${tests[@]}"; do rm -f "$LOGS/${t//:/-}.log"; done
if $local_mode; then
    BOOTSTRAP=
    write_test_conf
    log "librdkafka $LIBRDKAFKA_VERSION mock-cluster tests (no broker); ${#tests[@]} tests; logs in $LOGS"
else
    STRATA=$(strata_bin)
    : >"$LOGS/strata.log"
    trap 'stop_broker' EXIT
    trap 'exit 130' INT TERM
    start_broker
    log "strata $STRATA on $BOOTSTRAP; ${#tests[@]} tests (TEST_KAFKA_VERSION=$KAFKA_VERSION); logs in $LOGS"
fi
for t in "${tests[@]}"; do
    run_one "$t"
done
echo "$npassed passed, $nfailed failed, $nskipped skipped, $nexpected expected failures"
[ "$nfailed" -eq 0 ]
