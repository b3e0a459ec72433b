#!/usr/bin/env bash
# librdkafka 2.15.1's share-consumer tests (KIP-932 share groups, tests/0170-0190) against a
# fresh single strata broker.
#
# Usage: scripts/librdkafka-share-suite.sh [TEST ...]   run these tests (default: the share list,
#                                                      its LONG_TESTS first)
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
# runner's summary, the KNOWN_FAILURES rule and the lanes (SUITE_JOBS) are
# scripts/librdkafka-runner.sh's, which both source; what differs:
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
# serves the whole run (per lane with SUITE_JOBS=N); if it dies during a test, that test is
# reported with the broker's exit and a fresh broker is started for the next one.
# Runner: one test per process, `TESTS=NNNN ./test-runner -p1 -K -L` (`-p1 -l` with --local)
# under `timeout`, never quick mode (-Q), with a test.conf like LibrdkafkaTestApp.py's:
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
    # The long tests first: lanes take the next test off one queue, so the longest start
    # early and the short ones fill in beside them.
    tests=("${LONG_TESTS[@]}")
    for t in "${SHARE_TESTS[@]}"; do
        in_list "$t" "${LONG_TESTS[@]}" || single_node_skips "$t" || tests+=("$t")
    done
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

# ---- the run (scripts/librdkafka-runner.sh) ---------------------------------------------------
SUITE=librdkafka-share-suite
NO_BROKER=$local_mode
if $local_mode; then
    E_LEFT_OUT="only entries that -l/-K leave out (broker-facing or known issue)"
else
    E_LEFT_OUT="only entries that -L/-K leave out (broker-less or known issue)"
fi
# shellcheck source=scripts/librdkafka-runner.sh
. "$REPO/scripts/librdkafka-runner.sh"

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

entry_prepare() {
    E_PROTO=share
    E_ENV=(-u TEST_CONSUMER_GROUP_PROTOCOL)
    E_NUM=${1%%:*}
    E_SUB=
    [ "$E_NUM" != "$1" ] && E_SUB=${1#*:}
    E_ARGS=(-p1 -K -L)
    $local_mode && E_ARGS=(-p1 -l)
    E_LIMIT=$(limit_for "$E_NUM")
}

ensure_tools
build_runner
run_tests
