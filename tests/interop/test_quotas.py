"""Client quotas (issue #18; KIP-13, KIP-55, KIP-219, KIP-546): a producer byte-rate quota
set with `strata quota` (AlterClientQuotas) holds a producer to it, reports throttle_time_ms,
and leaves other clients alone.

  * A 1 MB/s `producer_byte_rate` on client id `throttled`: a confluent-kafka producer sending
    as fast as it can is held to within 20% of 1 MB/s over 10 s, measured after a 3 s warm-up
    (bytes acknowledged), and librdkafka reports throttle events (throttle_cb) with a positive
    throttle time. A producer with another client id, at the same time, gets at least five
    times the quota and is never throttled.
  * `strata quota list` (DescribeClientQuotas) shows the quota; it survives a restart.
  * A 2 MB/s `consumer_byte_rate` on client id `slow-reader` holds a confluent-kafka consumer
    reading a 40 MB backlog to within 20% of 2 MB/s over 10 s after a 3 s warm-up, with
    throttle events, while a consumer with another client id reads the same backlog at least
    five times faster.
  * A `request_percentage` quota (KIP-124) of 2% of a core on client id `busy`: a raw client
    sending Metadata requests back to back gets throttle_time_ms > 0 and completes at most a
    quarter as many requests as the same client with another id at the same time, which is
    never throttled; with the quota deleted it runs at the other's pace again.
  * Quotas this build does not enforce (controller_mutation_rate) are refused with
    INVALID_REQUEST and a message saying so, not stored; an empty entity is refused too.
"""

import subprocess
import threading
import time

import confluent_kafka as ck
import pytest

import wire
from conftest import Broker, strata_bin
from test_acceptance import create_topic

T = 30
QUOTA = 1024 * 1024  # bytes/s
WARM_UP, MEASURED = 3.0, 10.0
PAYLOAD = b"q" * 1000
pytestmark = pytest.mark.single_node  # raw frames and a restart on one process
ALTER_CLIENT_QUOTAS, INVALID_REQUEST = 49, 42


def strata(*args):
    done = subprocess.run([str(strata_bin()), *args], capture_output=True, text=True, timeout=T)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


class Load(threading.Thread):
    """A producer sending PAYLOAD as fast as librdkafka takes it, for `seconds`: the
    (time, bytes) of every acknowledged message, and the throttle events seen."""

    def __init__(self, bootstrap, topic, client_id, seconds):
        super().__init__(daemon=True)
        self.acked, self.throttles, self.errors = [], [], []
        self.topic, self.seconds = topic, seconds
        self.producer = ck.Producer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1,
            "linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 4096,
            "throttle_cb": self.throttles.append, "error_cb": self.errors.append})

    def delivered(self, error, message):
        if error is None:
            self.acked.append((time.monotonic(), len(message.value())))

    def run(self):
        self.started = time.monotonic()
        end = self.started + self.seconds
        while time.monotonic() < end:
            try:
                self.producer.produce(self.topic, value=PAYLOAD, on_delivery=self.delivered)
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)
        self.producer.purge()  # what is still queued is not part of the measurement
        self.producer.flush(T)

    def rate(self, start, end):
        """Bytes acknowledged per second between `start` and `end` seconds into the run."""
        window = [n for t, n in self.acked if start <= t - self.started < end]
        return sum(window) / (end - start)


def test_a_producer_quota_holds_a_producer_to_it_and_leaves_others_alone(tmp_path):
    b = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        create_topic(b.bootstrap, "quota-topic", 2)
        out = strata("quota", "set", "--client-id", "throttled", "--producer-byte-rate",
                     str(QUOTA), "-b", b.bootstrap)
        assert "client-id=throttled: producer_byte_rate=%d" % QUOTA in out, out
        seconds = WARM_UP + MEASURED
        throttled = Load(b.bootstrap, "quota-topic", "throttled", seconds)
        free = Load(b.bootstrap, "quota-topic", "free", seconds)
        throttled.start()
        free.start()
        throttled.join(seconds + T)
        free.join(seconds + T)
        assert not throttled.is_alive() and not free.is_alive()
        rate = throttled.rate(WARM_UP, seconds)
        print("throttled: %.0f B/s over %.0f s after %.0f s (quota %d); %d throttle events, "
              "max %d ms; free: %.0f B/s" % (
                  rate, MEASURED, WARM_UP, QUOTA, len(throttled.throttles),
                  max((e.throttle_time for e in throttled.throttles), default=0) * 1000,
                  free.rate(WARM_UP, seconds)))
        assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, "%.0f B/s against a quota of %d" % (rate, QUOTA)
        assert throttled.throttles and max(e.throttle_time for e in throttled.throttles) > 0
        assert free.rate(WARM_UP, seconds) >= 5 * QUOTA, free.rate(WARM_UP, seconds)
        assert not free.throttles, "a client without a quota was throttled"
        assert not throttled.errors and not free.errors, (throttled.errors, free.errors)

        listed = strata("quota", "list", "-b", b.bootstrap)
        assert any(line.split() == ["client-id=throttled", "producer_byte_rate", "1048576"]
                   for line in listed.splitlines()), listed
        b.kill()
        b.start()
        listed = strata("quota", "list", "-b", b.bootstrap)
        assert "client-id=throttled" in listed, "the quota did not survive a restart: " + listed
        strata("quota", "delete", "--client-id", "throttled", "-b", b.bootstrap)
        assert "client-id=throttled" not in strata("quota", "list", "-b", b.bootstrap)
    finally:
        b.kill()


def alter_v0(port, entity, key, value):
    """AlterClientQuotas v0 of one entry with one op -> (error code, message)."""
    body = (wire.i32(1) + wire.i32(len(entity))
            + b"".join(wire.string(kind) + wire.string(name) for kind, name in entity)
            + wire.i32(1) + wire.string(key) + wire.struct.pack(">d", value) + wire.i8(0)
            + wire.i8(0))  # validate_only
    with wire.connect(port, T) as s:
        s.sendall(wire.frame(wire.request_header_v1(ALTER_CLIENT_QUOTAS, 0, 5) + body))
        _, response = wire.read_response(s, T)
    r = wire.Reader(response)
    r.i32()  # throttle_time_ms
    assert r.i32() == 1
    code, message = r.i16(), r.string()
    return code, message


def test_quotas_this_build_does_not_enforce_are_refused_not_stored(tmp_path):
    b = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        code, message = alter_v0(b.port, [("user", "alice")], "controller_mutation_rate", 10.0)
        assert code == INVALID_REQUEST and "not enforced" in message, (code, message)
        code, message = alter_v0(b.port, [("user", "alice")], "request_percentage", -1.0)
        assert code == INVALID_REQUEST and "positive Double" in message, (code, message)
        code, message = alter_v0(b.port, [], "producer_byte_rate", 1000.0)
        assert code == INVALID_REQUEST, (code, message)
        code, message = alter_v0(b.port, [("user", None)], "producer_byte_rate", 1.5)
        assert code == INVALID_REQUEST, (code, message)
        assert alter_v0(b.port, [("user", None)], "producer_byte_rate", 5000.0) == (0, None)
        listed = strata("quota", "list", "-b", b.bootstrap)
        assert "controller_mutation_rate" not in listed and "alice" not in listed, listed
        assert any(line.split() == ["user=<default>", "producer_byte_rate", "5000"]
                   for line in listed.splitlines()), listed
    finally:
        b.kill()


class Reader(threading.Thread):
    """A consumer reading `topic` from the start for `seconds`: (time, bytes) of each message,
    and the throttle events seen."""

    def __init__(self, bootstrap, topic, client_id, seconds):
        super().__init__(daemon=True)
        self.read, self.throttles, self.errors = [], [], []
        self.seconds = seconds
        self.consumer = ck.Consumer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "throttle_cb": self.throttles.append, "error_cb": self.errors.append})
        self.consumer.subscribe([topic])

    def run(self):
        self.started = time.monotonic()
        end = self.started + self.seconds
        try:
            while time.monotonic() < end:
                m = self.consumer.poll(0.2)
                if m is not None and m.error() is None:
                    self.read.append((time.monotonic(), len(m.value())))
        finally:
            self.consumer.close()

    def rate(self, start, end):
        window = [n for t, n in self.read if start <= t - self.started < end]
        return sum(window) / (end - start)


def test_a_consumer_quota_holds_a_consumer_to_it_and_leaves_others_alone(tmp_path):
    quota = 2 * QUOTA
    b = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        create_topic(b.bootstrap, "backlog", 2)
        producer = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
        for _ in range(40_000):
            while True:
                try:
                    producer.produce("backlog", value=PAYLOAD)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(T) == 0
        strata("quota", "set", "--client-id", "slow-reader", "--consumer-byte-rate", str(quota),
               "-b", b.bootstrap)
        seconds = WARM_UP + MEASURED
        slow = Reader(b.bootstrap, "backlog", "slow-reader", seconds)
        fast = Reader(b.bootstrap, "backlog", "fast-reader", seconds)
        slow.start()
        fast.start()
        slow.join(seconds + T)
        fast.join(seconds + T)
        rate = slow.rate(WARM_UP, seconds)
        total_fast = sum(n for _, n in fast.read)
        print("slow-reader: %.0f B/s over %.0f s after %.0f s (quota %d); %d throttle events; "
              "fast-reader read %d bytes in all" % (rate, MEASURED, WARM_UP, quota,
                                                    len(slow.throttles), total_fast))
        assert 0.8 * quota <= rate <= 1.2 * quota, "%.0f B/s against a quota of %d" % (rate, quota)
        assert slow.throttles and max(e.throttle_time for e in slow.throttles) > 0
        # The other consumer read the whole 40 MB backlog (at least 5x the quota's pace).
        assert total_fast >= 40_000 * len(PAYLOAD), total_fast
        assert not fast.throttles, "a client without a quota was throttled"
    finally:
        b.kill()


METADATA = 3


class MetadataLoop(threading.Thread):
    """Metadata v4 (every topic) back to back on one connection as `client_id`, for
    `seconds`: the requests answered and the throttle times (ms) the answers carried."""

    def __init__(self, port, client_id, seconds):
        super().__init__(daemon=True)
        self.port, self.client_id, self.seconds = port, client_id, seconds
        self.answered, self.throttles, self.errors = 0, [], []

    def run(self):
        try:
            with wire.connect(self.port, T) as s:
                deadline = time.monotonic() + self.seconds
                correlation_id = 0
                while time.monotonic() < deadline:
                    correlation_id += 1
                    header = wire.request_header_v1(METADATA, 4, correlation_id, self.client_id)
                    s.sendall(wire.frame(header + wire.i32(-1) + wire.i8(0)))
                    got, body = wire.read_response(s, T)
                    assert got == correlation_id, (got, correlation_id)
                    throttle = wire.Reader(body).i32()
                    if throttle > 0:
                        self.throttles.append(throttle)
                    self.answered += 1
        except Exception as e:  # reported by the test
            self.errors.append(e)


def side_by_side(port, seconds=5.0):
    busy, free = MetadataLoop(port, "busy", seconds), MetadataLoop(port, "free", seconds)
    busy.start()
    free.start()
    busy.join(seconds + T)
    free.join(seconds + T)
    assert not busy.errors and not free.errors, (busy.errors, free.errors)
    return busy, free


def test_a_request_percentage_quota_holds_a_client_to_its_share_of_handler_time(tmp_path):
    b = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        for i in range(20):  # Metadata for every topic: some work per request
            create_topic(b.bootstrap, "rq-%d" % i, 4)
        out = strata("quota", "set", "--client-id", "busy", "--request-percentage", "2",
                     "-b", b.bootstrap)
        assert "request_percentage=2" in out, out
        listed = strata("quota", "list", "-b", b.bootstrap)
        assert any(line.split() == ["client-id=busy", "request_percentage", "2"]
                   for line in listed.splitlines()), listed
        busy, free = side_by_side(b.port)
        print("request_percentage=2 on busy: busy %d requests (%d throttled, max %d ms), "
              "free %d requests in 5 s" % (busy.answered, len(busy.throttles),
                                           max(busy.throttles, default=0), free.answered))
        assert busy.throttles and max(busy.throttles) > 0, "no throttle_time_ms reported"
        assert not free.throttles, free.throttles[:5]
        assert busy.answered * 4 <= free.answered, (busy.answered, free.answered)

        strata("quota", "delete", "--client-id", "busy", "--key", "request_percentage",
               "-b", b.bootstrap)
        busy, free = side_by_side(b.port)
        print("quota deleted: busy %d, free %d requests in 5 s" % (busy.answered, free.answered))
        assert not busy.throttles, busy.throttles[:5]
        assert busy.answered * 2 >= free.answered, (busy.answered, free.answered)
    finally:
        b.kill()
