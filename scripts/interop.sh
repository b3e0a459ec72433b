#!/usr/bin/env bash
# Python interop suite: real Kafka clients (confluent-kafka / librdkafka and kafka-python)
# and raw protocol frames against the strata broker binary.
#
# Usage: scripts/interop.sh [pytest args...]
#   e.g. scripts/interop.sh -k compression -x
#        STRATA_BIN=target/release/strata scripts/interop.sh
#
# Creates (or reuses) a venv at target/interop-venv, installs the pinned
# tests/interop/requirements.txt into it (only when that file changed), then runs
# `pytest tests/interop -q "$@"` (tests/interop is left out when the arguments name test
# paths themselves). The exit code is pytest's.
# The broker binary is not built here: build it first (`cargo build -p ...`) or set STRATA_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=target/interop-venv
REQ=tests/interop/requirements.txt
STAMP=$VENV/.requirements.sha256

log() { printf '==> %s\n' "$*" >&2; }

make_venv() {
    rm -rf "$VENV"
    mkdir -p target
    if "$PYTHON" -m venv "$VENV" >/dev/null 2>&1 && [ -x "$VENV/bin/pip" ]; then
        return 0
    fi
    # Debian ships venv without ensurepip unless python3-venv is installed.
    log "python3 -m venv failed; trying to install python3-venv"
    rm -rf "$VENV"
    if command -v apt-get >/dev/null 2>&1; then
        local minor
        minor=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
        (apt-get install -y -q "python${minor}-venv" python3-venv >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null 2>&1 &&
              apt-get install -y -q "python${minor}-venv" python3-venv >/dev/null 2>&1; }) || true
        if "$PYTHON" -m venv "$VENV" >/dev/null 2>&1 && [ -x "$VENV/bin/pip" ]; then
            return 0
        fi
        rm -rf "$VENV"
    fi
    log "falling back to virtualenv"
    "$PYTHON" -m pip install -q --user virtualenv ||
        "$PYTHON" -m pip install -q --user --break-system-packages virtualenv
    "$PYTHON" -m virtualenv -q "$VENV"
}

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "creating $VENV"
    make_venv
fi

want=$(sha256sum "$REQ" | cut -d' ' -f1)
have=$(cat "$STAMP" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
    log "installing $REQ into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$REQ"
    echo "$want" >"$STAMP"
fi

# KafkaJS for test_kafkajs.py and playwright-core for test_console.py (it drives Debian's
# /usr/bin/chromium; --ignore-scripts: no browser download): the pinned lock file, installed
# with npm ci into target/.
JS_DIR=target/interop-js
JS_STAMP=$JS_DIR/.lock.sha256
if command -v npm >/dev/null 2>&1; then
    want_js=$(sha256sum tests/interop/js/package-lock.json | cut -d' ' -f1)
    if [ "$want_js" != "$(cat "$JS_STAMP" 2>/dev/null || true)" ]; then
        log "installing tests/interop/js (kafkajs, playwright-core) into $JS_DIR"
        rm -rf "$JS_DIR" && mkdir -p "$JS_DIR"
        cp tests/interop/js/package.json tests/interop/js/package-lock.json "$JS_DIR/"
        (cd "$JS_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
        echo "$want_js" >"$JS_STAMP"
    fi
else
    log "npm not found: the KafkaJS and console browser tests will be skipped"
fi

export PYTHONDONTWRITEBYTECODE=1
# Our own temp root: broker data dirs and logs of the last 3 runs stay under target/ for
# inspection, and other pytest runs on the machine cannot prune them mid-run.
export PYTEST_DEBUG_TEMPROOT="$PWD/target/interop-tmp"
mkdir -p "$PYTEST_DEBUG_TEMPROOT"
# Run the whole suite unless the arguments already name test paths
# (e.g. scripts/interop.sh tests/interop/test_admin.py::test_x).
targets=(tests/interop)
for arg in "$@"; do
    case "$arg" in
    -*) ;;
    *) if [ -e "${arg%%::*}" ]; then targets=(); break; fi ;;
    esac
done

set +e
"$VENV/bin/python" -m pytest "${targets[@]}" -q "$@"
status=$?
set -e
exit "$status"
