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
scripts/fetch_librdkafka.sh "$VERSION" "$root" "$root/librdkafka"
cd "$root/librdkafka"
# Plain TCP only: no TLS, SASL or compression libraries needed beyond what the base system has.
./configure --disable-ssl --disable-gssapi --disable-zstd --disable-lz4-ext --disable-curl \
    >&2
make -j"$(nproc)" libs >&2
make -C examples rdkafka_performance >&2
echo "$tool"
