# shellcheck shell=bash
# shellcheck disable=SC2154 # tests, mode, selected: the sourcing script's
# Sourced, not run: what scripts/librdkafka-suite.sh (librdkafka 2.12.1, the core list) and
# scripts/librdkafka-share-suite.sh (2.15.1, the share-consumer tests) share. Those scripts
# fetch and build their librdkafka and pick their tests; this file starts strata, runs one test
# per test-runner process, reads its verdict from the runner's summary and prints one line per
# test, in lanes when asked.
#
# The sourcing script sets SUITE (its name, for the broker log's markers), REPO, TDIR (the
# built tests/ directory), LOGS, RUN, KAFKA_VERSION (TEST_KAFKA_VERSION), TIMEOUT_MULTIPLIER
# (test.timeout.multiplier), STRATA_CORES, LIBRDKAFKA_VERSION (for messages), the associative
# arrays KNOWN_FAILURES and KNOWN_WHY, the functions log and die, and
#   entry_prepare ENTRY   sets E_NUM (test number), E_SUB (librdkafka's SUBTESTS filter, or
#                         empty), E_PROTO (the tally a result counts in: classic or consumer),
#                         E_ENV (env arguments: -u VAR or VAR=VALUE), E_ARGS (test-runner
#                         arguments) and E_LIMIT (this script's timeout in seconds);
#   E_LEFT_OUT            the reason printed when only left-out entries (-L/-K/-E/-l) ran.
# NO_BROKER=true (the share suite's --local) starts no broker.
#
# Lanes. SUITE_JOBS=N (default 1) runs N tests at a time, each lane with its own broker (or
# cluster), data directory and test.conf (RDKAFKA_TEST_CONF), taking the next test of the list
# when its last one ends. Most of a librdkafka test's time is waiting (sessions, timeouts,
# rebalances), not CPU, so two lanes on 2 cores take little more than half the time of one.
# Lane I's broker logs to $LOGS/strata-lane-I.log (one lane: $LOGS/strata.log).

SUITE_CLUSTER=${SUITE_CLUSTER:-1}
SUITE_JOBS=${SUITE_JOBS:-1}
NO_BROKER=${NO_BROKER:-false}
BROKER_PID=
BROKER_STARTS=0
MARK=0
PORT=
BOOTSTRAP=
STRATA_LOG="$LOGS/strata.log"
TEST_CONF="$TDIR/test.conf"

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

# Waits until the log from byte $1 on has a line matching $2; $3 seconds, $4 what is awaited.
await_log() {
    local mark=$1 pattern=$2 deadline=$((SECONDS + $3))
    until tail -c +"$((mark + 1))" "$STRATA_LOG" | grep -- "$pattern" >/dev/null; do
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            tail -20 "$STRATA_LOG" >&2
            die "$4 exited before it was ready ($STRATA_LOG)"
        fi
        [ $SECONDS -lt $deadline ] || { tail -20 "$STRATA_LOG" >&2; die "$4 not ready within $3 s"; }
        sleep 0.2
    done
}

# Starts "$@" (a broker or a cluster, named $1 in the log's marker) in the background, logging
# to $STRATA_LOG; sets BROKER_PID and MARK (the log's size before it).
spawn_broker() {
    local kind=$1
    shift
    BROKER_STARTS=$((BROKER_STARTS + 1))
    printf '\n=== %s: %s start #%d: %s\n' "$SUITE" "$kind" "$BROKER_STARTS" "$*" >>"$STRATA_LOG"
    MARK=$(wc -c <"$STRATA_LOG")
    "$@" </dev/null >>"$STRATA_LOG" 2>&1 &
    BROKER_PID=$!
    echo "$BROKER_PID" >"$RUN/broker.pid"
}

start_cluster() {
    local base
    base=$(free_base_port)
    [ -n "$base" ] || die "no free port range for a $SUITE_CLUSTER-node cluster"
    rm -rf "$RUN/cluster"
    mkdir -p "$RUN/cluster"
    spawn_broker cluster "$STRATA" cluster local --nodes "$SUITE_CLUSTER" --data-dir "$RUN/cluster" \
        --base-port "$base"
    await_log "$MARK" 'is ready; bootstrap servers' 90 "the cluster"
    BOOTSTRAP=$(tail -c +"$((MARK + 1))" "$STRATA_LOG" | sed -n 's/.*bootstrap servers: //p' | head -1)
    PORT=$base
}

# A fresh broker (or SUITE_CLUSTER nodes) on free ports with an empty data directory, as the
# interop tests start it; librdkafka's "default" scenario (tests/scenarios/default.json): auto
# topic creation, 4 partitions.
start_broker() {
    mkdir -p "$RUN"
    if [ "$SUITE_CLUSTER" -gt 1 ]; then
        start_cluster
        write_test_conf
        return
    fi
    local admin
    PORT=$(free_port)
    admin=$(free_port)
    while [ "$admin" = "$PORT" ]; do admin=$(free_port); done
    rm -rf "$RUN/data"
    mkdir -p "$RUN/data"
    spawn_broker broker "$STRATA" serve --data-dir "$RUN/data" --listen "127.0.0.1:$PORT" \
        --advertise "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$admin" --cores "$STRATA_CORES" \
        --num-partitions 4 --auto-create-topics true
    await_log "$MARK" '\bready\b' 30 "strata"
    BOOTSTRAP="127.0.0.1:$PORT"
    write_test_conf
}

# As tests/LibrdkafkaTestApp.py writes it for trivup.
write_test_conf() {
    mkdir -p "$(dirname "$TEST_CONF")"
    {
        echo "# Written by scripts/$SUITE.sh (as tests/LibrdkafkaTestApp.py writes it for trivup)."
        echo "broker.address.family=v4"
        echo "test.timeout.multiplier=$TIMEOUT_MULTIPLIER"
        # No broker (the mock-cluster tests): they set their own bootstrap.servers.
        [ -n "$BOOTSTRAP" ] && echo "bootstrap.servers=$BOOTSTRAP"
        echo "security.protocol=PLAINTEXT"
    } >"$TEST_CONF"
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
# Whether a sub-test matching $2 ended with $3 (PASS or SKIP). Not `grep -q`: it stops reading
# at the first match, and under pipefail the SIGPIPE of the greps before it (a log with many
# matching lines) would fail the pipeline although a line matched.
sub_tests_ended() {
    case $3 in
    PASS) sub_test_lines "$1" "$2" | grep -E ': PASS \([0-9.]+s\) \]$' >/dev/null ;;
    *) sub_test_lines "$1" "$2" | grep -E ': SKIP: .* \]$' >/dev/null ;;
    esac
}

# Runs entry $1 and prints "ENTRY STATE (N s): reason"; appends "PROTO<TAB>COUNTED" to
# $RESULTS. A test number is `passed` if an entry passed and none failed, `skipped` if every
# entry skipped itself (the runner's SKIPPED state, reason = the test's TEST_SKIP message),
# `failed` otherwise (a failed entry, a crash, a non-zero exit), `timeout` if `timeout` had to
# kill it or the runner's own per-test timeout (test_timeout_set() x test.timeout.multiplier)
# fired; `expected failure` if KNOWN_FAILURES names it and it failed where that says.
# CLIENT_RACES (the suite script's, keyed like KNOWN_FAILURES): an entry whose failure matches
# its pattern is a race of the client library itself, shown in its debug log and reported
# upstream; such an entry is run once more, and its line says so with the first run's reason
# (its log kept as NNNN.first-run.log). A second failure fails it; nothing else is retried.
run_one() {
    local t=$1 counted first first_secs
    entry_prepare "$t"
    local tlog="$LOGS/${t//:/-}.log"
    if ! compgen -G "$TDIR/$E_NUM-*.c*" >/dev/null; then
        echo "$t failed (0 s): no such test in librdkafka $LIBRDKAFKA_VERSION"
        printf '%s\tfailed\n' "$E_PROTO" >>"$RESULTS"
        return
    fi
    run_attempt "$t" "$tlog"
    local race=""
    if declare -p CLIENT_RACES >/dev/null 2>&1; then race=${CLIENT_RACES[$t]:-}; fi
    # (Never when the broker exited: that is strata's failure, whatever the test then saw.)
    if [ -n "$race" ] && [ "$A_STATE" = failed ] && [[ "$A_REASON" != "strata exited"* ]] &&
        grep -qE "$race" <<<"$A_REASON"; then
        first=$A_REASON
        first_secs=$A_SECS
        mv "$tlog" "${tlog%.log}.first-run.log"
        run_attempt "$t" "$tlog"
        A_REASON="run twice: its first run hit a known client race (${CLIENT_RACES_WHY[$t]:-}): $first${A_REASON:+; second run: $A_REASON}"
        A_SECS=$((A_SECS + first_secs))
    fi
    local state=$A_STATE reason=$A_REASON secs=$A_SECS
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
    passed) counted=passed ;;
    skipped) counted=skipped ;;
    "expected failure") counted=expected ;;
    *) counted=failed ;;
    esac
    printf '%s\t%s\n' "$E_PROTO" "$counted" >>"$RESULTS"
    echo "$t $state ($secs s)${reason:+: $reason}"
}

# One run of entry $1 (prepared by entry_prepare) into log $2: sets A_STATE (passed, failed,
# skipped, timeout), A_REASON and A_SECS.
run_attempt() {
    local t=$1 tlog=$2 start rc secs allrows rows state reason brc
    if ! $NO_BROKER && ! kill -0 "$BROKER_PID" 2>/dev/null; then start_broker; fi
    start=$SECONDS
    set +e
    local filter=()
    [ -n "$E_SUB" ] && filter=("SUBTESTS=$E_SUB")
    (cd "$TDIR" && env "${E_ENV[@]}" TESTS="$E_NUM" "${filter[@]}" \
        TEST_KAFKA_VERSION="$KAFKA_VERSION" TEST_SCENARIO=default BROKERS="$BOOTSTRAP" \
        RDKAFKA_TEST_CONF="$TEST_CONF" \
        LD_LIBRARY_PATH="../src:../src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        timeout -k 10 "$E_LIMIT" ./test-runner "${E_ARGS[@]}"; exit $?) >"$tlog" 2>&1 </dev/null
    rc=$?
    set -e
    secs=$((SECONDS - start))
    allrows=$(summary_rows "$tlog" "$E_NUM")
    # Entries left out by the runner's flags or silently (another scenario) are not this run's.
    rows=$(awk -F'\t' '$3 != "Filtered due to negative test flags" && !($2 == "SKIPPED" && $3 == "")' \
        <<<"$allrows")
    local f
    f=$(first_failure "$tlog")
    if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ $secs -ge "$E_LIMIT" ]; }; then
        state=timeout
        reason="killed by this script after ${E_LIMIT} s${f:+; first failure: $f}"
    elif [[ "$f" == *" timed out (timeout set to "* ]]; then
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
            reason=$E_LEFT_OUT
        else
            reason="no entry for the default scenario ran (see $tlog)"
        fi
    fi
    if [ -n "$E_SUB" ] && [ "$state" = passed ] && ! sub_tests_ended "$tlog" "$E_SUB" PASS; then
        if sub_tests_ended "$tlog" "$E_SUB" SKIP; then
            state=skipped
            reason=$(sub_test_lines "$tlog" "$E_SUB" | grep -m1 -oE 'SKIP: .* \]$' | sed 's/ \]$//')
        else
            state=failed
            reason="no sub-test whose name contains \"$E_SUB\" ran and passed"
        fi
    fi
    if [ -n "$BROKER_PID" ] && ! kill -0 "$BROKER_PID" 2>/dev/null; then
        wait "$BROKER_PID" 2>/dev/null && brc=0 || brc=$?
        BROKER_PID=
        [ "$state" = passed ] && state=failed
        reason="strata exited (status $brc) during the test, restarted for the next one${reason:+; $reason}"
    fi
    A_STATE=$state
    A_REASON=$reason
    A_SECS=$secs
}

# ---- the run ---------------------------------------------------------------------------------
# Index of the next entry no lane has taken, or nothing when none is left.
claim_next() {
    local n
    {
        flock 9
        n=$(cat "$QUEUE")
        echo $((n + 1)) >"$QUEUE"
    } 9>"$QUEUE.lock"
    [ "$n" -lt "${#tests[@]}" ] && echo "$n"
    return 0
}

# One lane: its own broker, then entries off the queue until none is left.
run_lane() {
    local lane=$1 i
    if [ "$LANES" -gt 1 ]; then
        RUN="$RUN/lane-$lane"
        STRATA_LOG="$LOGS/strata-lane-$lane.log"
    fi
    TEST_CONF="$RUN/test.conf"
    mkdir -p "$RUN"
    : >"$STRATA_LOG"
    trap 'stop_broker' EXIT
    trap 'exit 130' INT TERM
    if $NO_BROKER; then
        BOOTSTRAP=
        write_test_conf
    else
        start_broker
    fi
    while i=$(claim_next) && [ -n "$i" ]; do
        run_one "${tests[$i]}"
    done
}

# Runs "${tests[@]}" in min(SUITE_JOBS, tests) lanes; prints the per-protocol and closing
# counts; returns non-zero if anything failed.
run_tests() {
    local lane pids=() p
    LANES=$SUITE_JOBS
    [ "$LANES" -ge 1 ] 2>/dev/null || die "SUITE_JOBS=$SUITE_JOBS is not a positive number"
    [ "$LANES" -gt "${#tests[@]}" ] && LANES=${#tests[@]}
    [ "$LANES" -ge 1 ] || LANES=1
    mkdir -p "$LOGS" "$RUN"
    for t in "${tests[@]}"; do rm -f "$LOGS/${t//:/-}.log"; done
    rm -f "$LOGS"/strata-lane-*.log "$LOGS/strata.log"
    RESULTS="$RUN/results"
    QUEUE="$RUN/queue"
    : >"$RESULTS"
    echo 0 >"$QUEUE"
    $NO_BROKER || STRATA=$(strata_bin)
    if $NO_BROKER; then
        log "librdkafka $LIBRDKAFKA_VERSION mock-cluster tests (no broker); ${#tests[@]} tests in $LANES lane(s); logs in $LOGS"
    else
        log "strata $STRATA; ${#tests[@]} tests (TEST_KAFKA_VERSION=$KAFKA_VERSION) in $LANES lane(s), each with its own $([ "$SUITE_CLUSTER" -gt 1 ] && echo "$SUITE_CLUSTER-node cluster" || echo broker); logs in $LOGS"
    fi
    # A lane's broker outlives the lane if the lane is killed in a test: stop them all here.
    trap 'for p in "${pids[@]}"; do pkill -TERM -P "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done; for f in "$RUN"/broker.pid "$RUN"/lane-*/broker.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done; true' EXIT
    trap 'exit 130' INT TERM
    for lane in $(seq "$LANES"); do
        run_lane "$lane" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    trap - EXIT
    # Per protocol, on lines scripts/test.sh does not count (they start with the protocol's
    # name), when the run had consumer-protocol entries; then the closing line.
    awk -F'\t' '
        { n[$1 "\t" $2]++; protos[$1] = 1; total[$2]++ }
        END {
            if ("consumer" in protos)
                for (p in protos)
                    printf "%s: %d passed, %d failed, %d skipped, %d expected failures\n", p,
                        n[p "\tpassed"], n[p "\tfailed"], n[p "\tskipped"], n[p "\texpected"]
            printf "%d passed, %d failed, %d skipped, %d expected failures\n",
                total["passed"], total["failed"], total["skipped"], total["expected"]
        }' "$RESULTS" | sort -r
    [ "$(wc -l <"$RESULTS")" -eq "${#tests[@]}" ] || die "only $(wc -l <"$RESULTS") of ${#tests[@]} tests reported"
    ! grep -q $'\tfailed$' "$RESULTS"
}
