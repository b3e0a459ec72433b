"""Bounded inflation (issue: "bounded resources"): a zstd and a gzip batch that inflate to
2 GiB are refused without the broker growing past one bounded inflation. They go to a
compacted topic, whose key check must read the records, with max.message.bytes raised so the
batches (66 KB and 2 MB) get that far. The other resource bounds (request budget, frame
deadline, idle connections, connection limits) are tested in broker/tests/resource_bounds.rs."""

import struct
import time
import zlib

import pytest
import zstandard

import wire
from conftest import Broker, strata_bin
from test_bad_input import _create_topic, _produce

MIB = 1 << 20
CORRUPT_MESSAGE = 2
# wire::compression::DECOMPRESSED_BYTES_MAX: the most one batch may inflate to.
DECOMPRESSED_BYTES_MAX = 64 * MIB


def _memory(pid, field):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _inflating_records(write, records, value_bytes):
    """Writes `records` records, each key b"k" with a value of `value_bytes` zeros."""
    zeros = bytes(MIB)
    for index in range(records):
        body = wire.i8(0) + wire.varint(0) + wire.varint(index) + wire.varint(1) + b"k"
        body += wire.varint(value_bytes)
        write(wire.varint(len(body) + value_bytes + 1) + body)
        for _ in range(value_bytes // MIB):
            write(zeros)
        write(wire.varint(0))  # no headers


def _bomb(codec, records=32, value_bytes=DECOMPRESSED_BYTES_MAX):
    """A valid batch (framing, CRC32C) whose records inflate to records x value_bytes."""
    if codec == "gzip":
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        parts = []
        _inflating_records(lambda b: parts.append(compressor.compress(b)), records, value_bytes)
        body = b"".join(parts) + compressor.flush()
        attributes = 1
    else:
        compressor = zstandard.ZstdCompressor(level=1).compressobj()
        parts = []
        _inflating_records(lambda b: parts.append(compressor.compress(b)), records, value_bytes)
        body = b"".join(parts) + compressor.flush()
        attributes = 4
    now = int(time.time() * 1000)
    after_crc = (wire.i16(attributes) + wire.i32(records - 1) + wire.i64(now) + wire.i64(now)
                 + wire.i64(-1) + wire.i16(-1) + wire.i32(-1) + wire.i32(records) + body)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return (wire.i64(0) + wire.i32(batch_length) + wire.i32(-1) + wire.i8(2)
            + struct.pack(">I", wire.crc32c(after_crc)) + after_crc)


@pytest.mark.timeout(240)
def test_batches_that_inflate_to_two_gib_are_refused_without_the_broker_growing(tmp_path):
    broker = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        _create_topic(broker, "compacted", {"cleanup.policy": "compact",
                                            "max.message.bytes": str(16 * MIB)})
        bombs = {"zstd": _bomb("zstd"), "gzip": _bomb("gzip")}
        time.sleep(0.3)
        pid = broker.proc.pid
        rss_before, hwm_before = _memory(pid, "VmRSS"), _memory(pid, "VmHWM")
        for name, batch in bombs.items():
            assert len(batch) < 16 * MIB, "%s bomb of %d bytes" % (name, len(batch))
            err = _produce(broker, "compacted", batch)[0]
            assert err == CORRUPT_MESSAGE, "%s bomb answered %d" % (name, err)
        hwm_after = _memory(pid, "VmHWM")
        print("bombs: zstd %d bytes, gzip %d bytes; rss before %d MiB, high-water mark before "
              "%d MiB, after %d MiB" % (len(bombs["zstd"]), len(bombs["gzip"]),
                                         rss_before // MIB, hwm_before // MIB, hwm_after // MIB))
        # At most one bounded inflation at a time, plus the request and its copy.
        bound = max(hwm_before, rss_before + DECOMPRESSED_BYTES_MAX + 2 * 16 * MIB)
        assert hwm_after <= bound, "the broker grew to %d MiB (bound %d MiB)" % (
            hwm_after // MIB, bound // MIB)
        ok = wire.record_batch([(b"k", b"a normal record")])
        assert _produce(broker, "compacted", ok)[0] == 0, "the topic still takes normal batches"
    finally:
        broker.kill()
