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
from confluent_kafka.admin import NewTopic

import wire
from clients import ck_admin
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


# --- a produce request's frame is not pinned by a small batch in the cache -------------------
# The log takes over a request's memory for a batch when that batch is the frame's only
# remaining slice, and keeps it in the batch cache, which counts the batch's bytes, not the
# frame's (issue #13, ARCHITECTURE.md write path step 0). A request carrying a big batch and
# then a small one (two batches for one partition, or two partitions' batches) must not leave
# the small one holding the whole frame: the produce handler and the partition service keep a
# slice of such a request until it is answered, so the small batch is copied.
SMALL_CACHE_BYTES = 512 * 1024  # the big batches (900 KB) are never cached, the small ones are
BIG_VALUE_BYTES = 900 * 1000
PINNING_REQUESTS = 256  # of each shape: ~460 MB of frames in all
PINNED_GROWTH_MAX = 96 * MIB


class _SmallCacheBroker(Broker):
    def command(self):
        return super().command() + ["--set", "log.cache.bytes=%d" % SMALL_CACHE_BYTES]


@pytest.mark.timeout(240)
def test_a_small_batch_does_not_pin_its_requests_frame_in_the_cache(tmp_path):
    broker = _SmallCacheBroker(strata_bin(), tmp_path / "broker").start()
    try:
        admin = ck_admin(broker.bootstrap)
        admin.create_topics([NewTopic("frames", num_partitions=2, replication_factor=1)],
                            request_timeout=10)["frames"].result(timeout=10)
        big = wire.record_batch([(b"big", bytes(BIG_VALUE_BYTES))])
        small = wire.record_batch([(b"small", b"x" * 64)])
        shapes = [
            # One partition, two batches: the partition service's guard.
            lambda n: wire.produce_v3_request_partitions(n, "frames", [(0, big + small)], acks=1),
            # Two partitions: the produce handler's guard.
            lambda n: wire.produce_v3_request_partitions(n, "frames", [(0, big), (1, small)], acks=1),
        ]
        pid = broker.proc.pid
        correlation = 0
        with wire.connect(broker.port, timeout=30) as s:
            def send(count):
                nonlocal correlation
                for _ in range(count):
                    for shape in shapes:
                        correlation += 1
                        s.sendall(shape(correlation))
                        _, body = wire.read_response(s, timeout=30)
                        answers = wire.parse_produce_v3_response(body)
                        assert all(answer[0] == 0 for answer in answers.values()), answers
            send(16)  # the allocator's steady state
            time.sleep(0.5)
            rss_before = _memory(pid, "VmRSS")
            send(PINNING_REQUESTS)
            time.sleep(0.5)
            rss_after = _memory(pid, "VmRSS")
        growth = rss_after - rss_before
        print("frames: rss %d -> %d MiB after %d requests carrying %d MB of frames"
              % (rss_before // MIB, rss_after // MIB, 2 * PINNING_REQUESTS,
                 2 * PINNING_REQUESTS * len(big) // 1000000))
        assert growth < PINNED_GROWTH_MAX, (
            "the broker grew %d MiB while its cache holds at most %d KiB: small batches are "
            "holding their requests' frames" % (growth // MIB, SMALL_CACHE_BYTES // 1024))
    finally:
        broker.kill()
