#!/usr/bin/env bash
# Copies the console's third-party ES modules from the pinned npm packages
# (broker/console/package.json + package-lock.json) into broker/console/vendor/, which is
# committed and served as it is: the console has no build step.
#
# Usage: scripts/console_vendor.sh          refresh broker/console/vendor/
#        scripts/console_vendor.sh --check  vendor into a temp dir and compare with the
#                                           committed files; exit 1 on any difference
#
# Installs with `npm ci --ignore-scripts` into target/console-npm (no package script runs).
# The one bare import in preact's hooks (`from"preact"`) is rewritten to
# `./preact.module.js`, because the console's CSP rules out an inline import map.
set -euo pipefail
cd "$(dirname "$0")/.."

CONSOLE=broker/console
NPM_DIR=target/console-npm

log() { printf '==> %s\n' "$*" >&2; }

mode=vendor
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

install_packages() {
    mkdir -p "$NPM_DIR"
    cp "$CONSOLE/package.json" "$CONSOLE/package-lock.json" "$NPM_DIR/"
    log "npm ci --ignore-scripts in $NPM_DIR"
    (cd "$NPM_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
}

# vendor_into DIR: writes the vendored files into DIR (which must exist and be empty).
vendor_into() {
    local out=$1 modules=$NPM_DIR/node_modules
    mkdir -p "$out/LICENSES"
    cp "$modules/preact/dist/preact.module.js" "$out/preact.module.js"
    sed -e 's|from"preact"|from"./preact.module.js"|g' \
        "$modules/preact/hooks/dist/hooks.module.js" >"$out/hooks.module.js"
    if grep -q 'from"preact"\|from "preact"\|from'"'"'preact'"'" "$out/hooks.module.js"; then
        echo "console_vendor: a bare \"preact\" import is left in hooks.module.js" >&2
        exit 1
    fi
    cp "$modules/htm/dist/htm.module.js" "$out/htm.module.js"
    cp "$modules/uplot/dist/uPlot.esm.js" "$out/uPlot.esm.js"
    cp "$modules/uplot/dist/uPlot.min.css" "$out/uPlot.min.css"
    local pkg
    for pkg in preact htm uplot; do
        cp "$modules/$pkg/LICENSE" "$out/LICENSES/$pkg.txt"
    done
}

install_packages
if [ "$mode" = vendor ]; then
    rm -rf "$CONSOLE/vendor"
    vendor_into "$CONSOLE/vendor"
    log "vendored into $CONSOLE/vendor"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vendor_into "$tmp/vendor"
if ! diff -r -q "$tmp/vendor" "$CONSOLE/vendor" >&2; then
    echo "console_vendor: $CONSOLE/vendor differs from the pinned packages;" \
        "run scripts/console_vendor.sh and commit the result" >&2
    exit 1
fi
log "$CONSOLE/vendor matches the pinned packages"
