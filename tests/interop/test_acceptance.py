"""Issue #3 acceptance: the scenarios the issue names, against the real strata binary.

- 100,000 keyed messages with headers to an 8-partition topic, once per codec (none, gzip,
  snappy, lz4, zstd) and per acks (0, 1, all), consumed back by partition and offset; keys,
  values, headers and timestamps match and per-key order holds (confluent-kafka; kafka-python
  runs the codec matrix with fewer messages, being a pure-Python client).
- kcat -L lists the broker, topics and partitions; kcat -P / -C round-trip.
- SIGKILL mid-stream under acks=all: every acknowledged message comes back at its offset and
  offsets are contiguous.
- Cross-core: with 2 shards and 16 partitions, a connection on each shard produces and fetches
  through the router; /metrics shows requests routed across cores; results are identical.
- retention.ms altered at run time deletes old segments and advances the earliest offset.
- Random frames never take the broker down; other connections keep being served.
"""
import collections
import json
import random
import re
import subprocess
import threading
import time
import urllib.request

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import ConfigResource, NewTopic

import wire
from clients import ck_admin, ck_consumer, ck_producer, ck_watermarks, kp_consumer, kp_producer, wait_until
from conftest import Broker, _start_or_fail, _stop, strata_bin

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BIG_N = 100_000
PARTITIONS = 8
T = 60


def create_topic(bootstrap, name, partitions, config=None):
    admin = ck_admin(bootstrap)  # keep the handle alive until the futures resolve
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=T)
    for f in futures.values():
        f.result(timeout=T)
    del admin


def message(i, tag):
    key = b"key-%d" % (i % 997)
    value = b"%s-%d-" % (tag.encode(), i) + b"x" * (i % 120)
    headers = [("seq", b"%d" % i), ("tag", tag.encode())]
    return key, value, headers


def consume_all(bootstrap, topic, partitions, expected, timeout=T * 3):
    """Assign every partition from the beginning; return {partition: [(offset, key, value,
    headers, timestamp)]} once `expected` records arrived (or the deadline passed)."""
    c = ck_consumer(bootstrap, **{"fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 2 << 20})
    got = collections.defaultdict(list)
    total = 0
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        idle_since = time.monotonic()
        while total < expected and time.monotonic() < deadline:
            batch = c.consume(num_messages=5000, timeout=0.5)
            if not batch and expected is None:
                break
            for m in batch:
                if m.error() is not None:
                    raise ck.KafkaException(m.error())
                got[m.partition()].append(
                    (m.offset(), m.key(), m.value(), [(k, v) for k, v in (m.headers() or [])],
                     m.timestamp()[1]))
                total += 1
            if batch:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > 5 and expected is not None and total > 0:
                break  # acks=0 may have lost some: stop once nothing more arrives
        return got
    finally:
        c.close()


def check_consumed(got, sent, exact):
    """sent: {value: (key, headers, timestamp)}; per-key order by sequence number."""
    seen = {}
    per_key_last = {}
    for partition, records in got.items():
        offsets = [r[0] for r in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), \
            "partition %d offsets out of order or repeated" % partition
        for offset, key, value, headers, timestamp in records:
            assert value in sent, "unexpected value %r" % value[:40]
            key_sent, headers_sent, timestamp_sent = sent[value]
            assert key == key_sent and headers == headers_sent and timestamp == timestamp_sent, value[:40]
            assert value not in seen, "value %r consumed twice" % value[:40]
            seen[value] = partition
            seq = int(dict(headers)["seq"])
            assert per_key_last.get(key, -1) < seq, "per-key order broken for %r" % key
            per_key_last[key] = seq
    if exact:
        assert len(seen) == len(sent), "consumed %d of %d" % (len(seen), len(sent))
    else:
        assert 0 < len(seen) <= len(sent)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_100k_keyed_messages_round_trip_with_confluent_kafka(shared_broker, topic_name, codec, acks):
    create_topic(shared_broker.bootstrap, topic_name, PARTITIONS)
    base_ts = int(time.time() * 1000) - 10_000
    tag = "%s-%s" % (codec, acks)
    p = ck_producer(shared_broker.bootstrap, acks=acks, **{
        "compression.type": codec, "linger.ms": 20, "batch.num.messages": 5000,
        "queue.buffering.max.messages": 200_000})
    sent = {}
    failures = []

    def report(err, _msg):
        if err is not None:
            failures.append(err)

    for i in range(BIG_N):
        key, value, headers = message(i, tag)
        ts = base_ts + i // 10
        sent[value] = (key, headers, ts)
        while True:
            try:
                p.produce(topic_name, key=key, value=value, headers=headers, timestamp=ts,
                          on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(T * 3) == 0
    if acks != "0":
        assert not failures, failures[:3]
    got = consume_all(shared_broker.bootstrap, topic_name, PARTITIONS, BIG_N)
    check_consumed(got, sent, exact=(acks != "0"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_codec_matrix_round_trips(shared_broker, topic_name, codec):
    n = 5000
    create_topic(shared_broker.bootstrap, topic_name, PARTITIONS)
    tag = "kp-%s" % codec
    producer = kp_producer(shared_broker.bootstrap, acks="all",
                           compression_type=None if codec == "none" else codec, linger_ms=20)
    base_ts = int(time.time() * 1000) - 10_000
    sent = {}
    try:
        futures = []
        for i in range(n):
            key, value, headers = message(i, tag)
            ts = base_ts + i
            sent[value] = (key, headers, ts)
            futures.append(producer.send(topic_name, key=key, value=value, headers=headers,
                                         timestamp_ms=ts))
        producer.flush(T)
        for f in futures:
            f.get(timeout=T)
    finally:
        producer.close(5)
    # Read back with kafka-python too, partition by partition.
    import kafka
    consumer = kp_consumer(shared_broker.bootstrap, consumer_timeout_ms=3000)
    got = collections.defaultdict(list)
    try:
        tps = [kafka.TopicPartition(topic_name, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + T
        total = 0
        while total < n and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500, max_records=2000).items():
                for r in records:
                    got[tp.partition].append((r.offset, r.key, r.value, list(r.headers), r.timestamp))
                    total += 1
    finally:
        consumer.close()
    check_consumed(got, sent, exact=True)


def test_kcat_lists_metadata_and_round_trips(shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, 3)
    listing = subprocess.run(["kcat", "-b", shared_broker.bootstrap, "-L", "-J"], capture_output=True,
                             text=True, timeout=T, check=True)
    meta = json.loads(listing.stdout)
    assert [b["id"] for b in meta["brokers"]] == [0]
    assert meta["brokers"][0]["name"] == shared_broker.bootstrap + "/0" or \
        meta["brokers"][0]["name"].startswith("127.0.0.1:")
    topics = {t["topic"]: t for t in meta["topics"]}
    assert topic_name in topics
    parts = topics[topic_name]["partitions"]
    assert sorted(p["partition"] for p in parts) == [0, 1, 2]
    assert all(p["leader"] == 0 and [r["id"] for r in p["replicas"]] == [0] for p in parts)

    lines = ["k%d:value-%d" % (i, i) for i in range(200)]
    subprocess.run(["kcat", "-b", shared_broker.bootstrap, "-P", "-t", topic_name, "-p", "1", "-K:",
                    "-z", "lz4"], input="\n".join(lines) + "\n", text=True, timeout=T, check=True)
    out = subprocess.run(["kcat", "-b", shared_broker.bootstrap, "-C", "-t", topic_name, "-p", "1",
                          "-o", "beginning", "-e", "-f", "%k:%s\n"], capture_output=True, text=True,
                         timeout=T, check=True)
    assert out.stdout.splitlines() == lines


@pytest.mark.timeout(300)
def test_sigkill_mid_stream_loses_no_acknowledged_message(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    acked = {}
    stop = threading.Event()
    errors = []

    def produce_forever():
        p = ck_producer(broker.bootstrap, acks="all", **{
            "message.send.max.retries": 0, "message.timeout.ms": 5000, "linger.ms": 2,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})

        def report(err, msg):
            if err is None:
                acked[msg.value()] = msg.offset()
            else:
                errors.append(err)

        i = 0
        while not stop.is_set():
            try:
                p.produce(topic_name, value=b"v-%d" % i, on_delivery=report)
                i += 1
            except BufferError:
                pass
            p.poll(0.001)
        p.flush(15)

    thread = threading.Thread(target=produce_forever, daemon=True)
    thread.start()
    wait_until(lambda: len(acked) > 2000, timeout=T, message="acks before the kill")
    broker.kill()
    acked_at_kill = len(acked)
    broker.start()
    wait_until(lambda: len(acked) > acked_at_kill + 1000, timeout=T, message="acks after the restart")
    stop.set()
    thread.join(30)
    low, high = ck_watermarks(broker.bootstrap, topic_name)
    assert low == 0
    c = ck_consumer(broker.bootstrap)
    stored = {}
    try:
        c.assign([ck.TopicPartition(topic_name, 0, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + T
        while len(stored) < high and time.monotonic() < deadline:
            for m in c.consume(num_messages=5000, timeout=0.5):
                assert m.error() is None, m.error()
                assert m.offset() not in stored, "offset %d delivered twice" % m.offset()
                stored[m.offset()] = m.value()
    finally:
        c.close()
    assert sorted(stored) == list(range(high)), "offsets have gaps"
    for value, offset in acked.items():
        assert stored.get(offset) == value, "acked %r at %d lost" % (value, offset)
    assert len(set(stored.values())) == len(stored), "a value was written twice"


def metrics(broker):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % broker.admin_port, timeout=10) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def shard_of_connection(broker, sock, correlation_id):
    """Send ApiVersions on `sock` and tell which shard served it from /metrics."""
    before = metrics(broker)
    sock.sendall(wire.api_versions_request(correlation_id))
    wire.read_response(sock)
    after = metrics(broker)
    for shard in ("0", "1"):
        key = 'strata_requests_total{shard="%s",api="ApiVersions"}' % shard
        if after.get(key, 0) > before.get(key, 0):
            return shard
    raise AssertionError("no shard counted the request")


def test_cross_core_routing_gives_identical_results(shared_broker, topic_name):
    partitions = 16
    create_topic(shared_broker.bootstrap, topic_name, partitions)
    by_shard = {}
    spare = []
    for attempt in range(64):
        s = wire.connect(shared_broker.port)
        shard = shard_of_connection(shared_broker, s, attempt + 1)
        if shard in by_shard:
            spare.append(s)
        else:
            by_shard[shard] = s
        if len(by_shard) == 2:
            break
    for s in spare:
        s.close()
    assert set(by_shard) == {"0", "1"}, "connections never landed on both shards"
    before = metrics(shared_broker)
    results = {}
    for shard, s in sorted(by_shard.items()):
        for p in range(partitions):
            batch = wire.record_batch([(b"k%d" % p, b"from-shard-%s-partition-%d" % (shard.encode(), p))])
            s.sendall(wire.produce_v3_request(100 + p, topic_name, p, batch, acks=-1))
            _, body = wire.read_response(s)
            assert wire.parse_produce_v3_response(body)[(topic_name, p)][0] == 0
    for shard, s in sorted(by_shard.items()):
        fetched = {}
        for p in range(partitions):
            s.sendall(wire.fetch_v4_request(200 + p, topic_name, p, 0))
            _, body = wire.read_response(s)
            info = wire.parse_fetch_v4_response(body)[(topic_name, p)]
            assert info["error"] == 0 and info["high_watermark"] == 2
            fetched[p] = [(r[0], r[3]) for b in wire.parse_record_batches(info["records"]) for r in b["records"]]
        results[shard] = fetched
    assert results["0"] == results["1"], "the two shards' connections saw different data"
    for p in range(partitions):
        assert [v for _, v in results["0"][p]] == [b"from-shard-0-partition-%d" % p,
                                                   b"from-shard-1-partition-%d" % p]
    after = metrics(shared_broker)
    for shard in ("0", "1"):
        out_key = 'strata_routed_requests_out_total{shard="%s"}' % shard
        in_key = 'strata_routed_requests_in_total{shard="%s"}' % shard
        assert after[out_key] > before.get(out_key, 0), "shard %s routed nothing out" % shard
        assert after[in_key] > before.get(in_key, 0), "shard %s handled nothing for the other" % shard
    for s in by_shard.values():
        s.close()


def open_per_shard(broker):
    values = metrics(broker)
    return [int(values.get('strata_connections_open{shard="%d"}' % shard, 0)) for shard in (0, 1)]


def test_connections_are_spread_over_the_shards(broker, topic_name):
    """Each new connection goes to the shard with the fewest open, whichever shard's accept
    took it (SO_REUSEPORT picks that by a hash): opened one at a time, the two shards never
    differ by more than one. A connection handed to the other shard serves requests like any
    other: each one produces a record and fetches it back."""
    create_topic(broker.bootstrap, topic_name, 2)
    sockets = []
    try:
        for index in range(12):
            s = wire.connect(broker.port)
            sockets.append(s)
            s.sendall(wire.api_versions_request(index + 1))
            wire.read_response(s)
            counts = open_per_shard(broker)
            assert sum(counts) == len(sockets), counts
            assert max(counts) - min(counts) <= 1, "after %d connections: %s" % (len(sockets), counts)
        by_shard = {"0": [], "1": []}
        for index, s in enumerate(sockets):
            by_shard[shard_of_connection(broker, s, 100 + index)].append(s)
        assert [len(by_shard["0"]), len(by_shard["1"])] == [6, 6]
        for index, s in enumerate(sockets):
            value = b"connection-%d" % index
            s.sendall(wire.produce_v3_request(200 + index, topic_name, index % 2,
                                              wire.record_batch([(None, value)]), acks=-1))
            _, body = wire.read_response(s)
            error, offset = wire.parse_produce_v3_response(body)[(topic_name, index % 2)][:2]
            assert error == 0, error
            s.sendall(wire.fetch_v4_request(300 + index, topic_name, index % 2, offset))
            _, body = wire.read_response(s)
            info = wire.parse_fetch_v4_response(body)[(topic_name, index % 2)]
            fetched = [r[3] for b in wire.parse_record_batches(info["records"]) for r in b["records"]]
            assert fetched[:1] == [value]
        # Close shard 0's connections: the next ones go there, wherever they are accepted.
        for s in by_shard["0"]:
            s.close()
        wait_until(lambda: open_per_shard(broker) == [0, 6], timeout=10)
        fresh = []
        for index in range(6):
            s = wire.connect(broker.port)
            fresh.append(s)
            assert shard_of_connection(broker, s, 400 + index) == "0"
        sockets = by_shard["1"] + fresh
    finally:
        for s in sockets:
            s.close()


class TunedBroker(Broker):
    def __init__(self, binary, workdir, extra):
        super().__init__(binary, workdir)
        self.extra = extra

    def command(self):
        return super().command() + self.extra


@pytest.mark.timeout(180)
def test_retention_ms_altered_at_run_time_deletes_old_segments(tmp_path, topic_name):
    b = TunedBroker(strata_bin(), tmp_path / "broker", ["--retention-check-interval-ms", "200"])
    b.start()
    try:
        create_topic(b.bootstrap, topic_name, 1, {"segment.bytes": "20000"})
        old = int(time.time() * 1000) - 3 * 3600 * 1000
        p = ck_producer(b.bootstrap, acks="all", **{"linger.ms": 0})
        for i in range(600):
            p.produce(topic_name, value=b"old-%d-" % i + b"x" * 100, timestamp=old + i)
            if i % 50 == 0:
                p.flush(T)
        for i in range(20):
            p.produce(topic_name, value=b"new-%d" % i)
        assert p.flush(T) == 0
        low, high = ck_watermarks(b.bootstrap, topic_name)
        assert (low, high) == (0, 620)
        time.sleep(1.0)
        assert ck_watermarks(b.bootstrap, topic_name)[0] == 0, "default retention (7 days) keeps all"
        resource = ConfigResource("topic", topic_name, set_config={"retention.ms": str(3600 * 1000)})
        admin = ck_admin(b.bootstrap)
        for f in admin.alter_configs([resource], request_timeout=T).values():
            f.result(timeout=T)
        wait_until(lambda: ck_watermarks(b.bootstrap, topic_name)[0] > 0, timeout=30,
                   message="the earliest offset to advance")
        # The log start moves before the segment files go; the pass logs once it is done.
        wait_until(lambda: re.search(r"retention deleted segments", b.stderr_tail(400)), timeout=30,
                   message="the retention pass to finish")
        low, high = ck_watermarks(b.bootstrap, topic_name)
        assert 0 < low <= 600 and high == 620
        segments = sorted((b.data_dir / ("%s-0" % topic_name)).glob("*.log"))
        assert int(segments[0].stem) == low, "the first remaining segment starts at the new earliest offset"
    finally:
        _stop(b)


def test_random_frames_never_take_the_broker_down(shared_broker):
    rng = random.Random(20261129)
    closed = 0
    for i in range(300):
        api_key = rng.choice([0, 1, 2, 3, 18, 19, 20, 21, 32, 33, 37, 44, 60, rng.randrange(-5, 100)])
        version = rng.randrange(-1, 15)
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        payload = wire.i16(api_key) + wire.i16(version) + wire.i32(i) + body
        with wire.connect(shared_broker.port, timeout=5) as s:
            s.sendall(wire.frame(payload))
            try:
                s.settimeout(5)
                data = s.recv(65536)
                closed += data == b""
            except (ConnectionResetError, TimeoutError, OSError):
                closed += 1
    assert shared_broker.running(), "strata died:\n" + shared_broker.stderr_tail()
    body = wire.roundtrip(shared_broker.port, wire.api_versions_request(1))
    error, apis = wire.parse_api_versions_response(body, 0)
    assert error == 0 and 0 in apis, "the broker still answers after random frames"
    assert closed > 100, "most random frames are undecodable and close their connection"
