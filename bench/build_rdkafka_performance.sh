#!/usr/bin/env bash
# Builds librdkafka's own benchmark tool, `rdkafka_performance`, from the librdkafka sources that
# the crates.io package rdkafka-sys vendors (fetched by cargo: the registry is all CI reaches).
# Nothing of it is committed; the build lives under target/.
# Usage: bench/build_rdkafka_performance.sh   (prints the tool's path)
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="4.10.0+2.12.1" # librdkafka 2.12.1
root="$PWD/target/rdkafka-performance"
tool="$root/librdkafka/examples/rdkafka_performance"
if [ -x "$tool" ]; then
    echo "$tool"
    exit 0
fi
mkdir -p "$root/fetch/src"
cat >"$root/fetch/Cargo.toml" <<TOML
[package]
name = "fetch-rdkafka-sys"
version = "0.0.0"
edition = "2021"
[dependencies]
rdkafka-sys = { version = "=$VERSION", default-features = false }
[workspace]
TOML
touch "$root/fetch/src/lib.rs"
(cd "$root/fetch" && cargo fetch --quiet >&2)
registry="${CARGO_HOME:-$HOME/.cargo}/registry"
crate=$(ls -d "$registry"/src/*/"rdkafka-sys-$VERSION" 2>/dev/null | head -1 || true)
if [ -z "$crate" ]; then
    archive=$(ls "$registry"/cache/*/"rdkafka-sys-$VERSION.crate" | head -1)
    mkdir -p "$root/crate"
    tar -xzf "$archive" -C "$root/crate"
    crate="$root/crate/rdkafka-sys-$VERSION"
fi
rm -rf "$root/librdkafka"
cp -r "$crate/librdkafka" "$root/librdkafka"
cd "$root/librdkafka"
# Plain TCP only: no TLS, SASL or compression libraries needed beyond what the base system has.
./configure --disable-ssl --disable-gssapi --disable-zstd --disable-lz4-ext --disable-curl \
    >&2
make -j"$(nproc)" libs >&2
make -C examples rdkafka_performance >&2
echo "$tool"
