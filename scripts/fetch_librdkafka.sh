#!/usr/bin/env bash
# Copies the librdkafka sources (with examples/ and tests/) that the crates.io package
# rdkafka-sys vendors into DEST, fetching the crate through cargo (the registry is all CI
# reaches). Shared by bench/build_rdkafka_performance.sh and scripts/librdkafka-suite.sh;
# nothing of librdkafka is committed.
# Usage: scripts/fetch_librdkafka.sh VERSION WORKDIR DEST
#   VERSION  rdkafka-sys version (=4.10.0+2.12.1 vendors librdkafka 2.12.1)
#   WORKDIR  scratch directory for the throwaway crate and an unpacked archive
#   DEST     where the librdkafka tree goes (replaced)
set -euo pipefail
[ $# -eq 3 ] || { sed -n '6,9p' "$0" >&2; exit 2; }
version=$1 work=$2 dest=$3
mkdir -p "$work/fetch/src"
cat >"$work/fetch/Cargo.toml" <<TOML
[package]
name = "fetch-rdkafka-sys"
version = "0.0.0"
edition = "2021"
[dependencies]
rdkafka-sys = { version = "=$version", default-features = false }
[workspace]
TOML
touch "$work/fetch/src/lib.rs"
(cd "$work/fetch" && CARGO_TARGET_DIR="$work/fetch/target" cargo fetch --quiet >&2)
registry="${CARGO_HOME:-$HOME/.cargo}/registry"
crate=$(ls -d "$registry"/src/*/"rdkafka-sys-$version" 2>/dev/null | head -1 || true)
if [ -z "$crate" ] || [ ! -d "$crate/librdkafka/tests" ]; then
    archive=$(ls "$registry"/cache/*/"rdkafka-sys-$version.crate" | head -1)
    rm -rf "$work/crate"
    mkdir -p "$work/crate"
    tar -xzf "$archive" -C "$work/crate"
    crate="$work/crate/rdkafka-sys-$version"
fi
if [ ! -d "$crate/librdkafka/tests" ]; then
    echo "fetch_librdkafka: no librdkafka/tests in $crate" >&2
    exit 1
fi
rm -rf "$dest"
cp -r "$crate/librdkafka" "$dest"
