"""Thin, bounded helpers around confluent-kafka (librdkafka) and kafka-python.

Broker limitations this works around (contract: no consumer groups, no
idempotent producer):
  * confluent-kafka refuses to build a Consumer without group.id, so a dummy one is
    set, and the consumer only ever uses assign(), never subscribe(), and never
    commits. librdkafka 2.16 still starts its group state machine, but only sends
    FindCoordinator to brokers that advertise it in ApiVersions; against a broker
    that does not, it stays in "query-coord" quietly and fetching an assigned
    partition at an explicit logical offset works (verified against a fake broker
    that logged every request).
  * producers: enable.idempotence=False (librdkafka) / enable_idempotence=False.
  * kafka-python consumers: group_id=None + assign().
Every loop here has a deadline.
"""

import time

import confluent_kafka as ck
import kafka
from confluent_kafka import KafkaError, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient

DEFAULT_TIMEOUT = 30.0


class Msg(tuple):
    """(key, value, headers) -- the client-independent view used for comparisons."""

    def __new__(cls, key, value, headers=()):
        return tuple.__new__(cls, (key, value, tuple((k, v) for k, v in (headers or ()))))


def make_messages(n, prefix="m", with_nulls=True):
    """n keyed messages with headers (including a duplicated header key and an
    empty header value); a few null keys and null values if with_nulls."""
    out = []
    for i in range(n):
        key = b"%s-key-%05d" % (prefix.encode(), i)
        value = b"%s-value-%05d-" % (prefix.encode(), i) + bytes((i * 7 + j) % 256 for j in range(i % 50))
        if with_nulls and i % 401 == 17:
            key = None
        if with_nulls and i % 503 == 29:
            value = None
        headers = [("idx", b"%d" % i), ("dup", b"first"), ("dup", b"second"), ("empty", b"")]
        out.append(Msg(key, value, headers))
    return out


def wait_until(predicate, timeout=10.0, interval=0.1, message="condition"):
    """Poll predicate() until truthy; returns its value, or raises AssertionError."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last_exc = e
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s (last error: %r)"
                                 % (timeout, message, last_exc))
        time.sleep(interval)


def is_subsequence(sub, seq):
    it = iter(seq)
    return all(any(x == y for y in it) for x in sub)


# --- confluent-kafka --------------------------------------------------------
def ck_admin(bootstrap, **extra):
    conf = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000}
    conf.update(extra)
    return AdminClient(conf)


def ck_producer(bootstrap, acks="all", **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": False,
        "linger.ms": 5,
        "message.timeout.ms": 30000,
        "socket.timeout.ms": 10000,
    }
    conf.update(extra)
    return ck.Producer(conf)


def ck_produce(bootstrap, topic, msgs, acks="all", partition=None, timestamps=None,
               timeout=DEFAULT_TIMEOUT, before_close=None, **extra):
    """Produce msgs, wait for every delivery report, raise on any delivery error.
    Returns the delivered offsets in send order (-1 when unknown, e.g. acks=0).
    before_close() runs after the flush while the producer (and its connections)
    is still alive: with acks=0, "delivered" only means "written to the socket"."""
    p = ck_producer(bootstrap, acks=acks, **extra)
    reports = [None] * len(msgs)

    def cb(i):
        def on_delivery(err, m):
            reports[i] = (err, m.offset() if err is None else None)
        return on_delivery

    deadline = time.monotonic() + timeout
    for i, m in enumerate(msgs):
        kwargs = dict(key=m[0], value=m[1], headers=list(m[2]) or None, on_delivery=cb(i))
        if partition is not None:
            kwargs["partition"] = partition
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise
                p.poll(0.1)
        p.poll(0)
    left = p.flush(max(0.1, deadline - time.monotonic()))
    assert left == 0, "%d messages still undelivered after %.0fs" % (left, timeout)
    errors = [(i, r[0]) for i, r in enumerate(reports) if r is None or r[0] is not None]
    assert not errors, "delivery failed for %d messages, first: %r" % (len(errors), errors[:3])
    if before_close is not None:
        before_close()
    return [r[1] for r in reports]


def ck_consumer(bootstrap, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        # required by confluent-kafka even for assign(); never used for group traffic
        "group.id": "strata-interop-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
        "session.timeout.ms": 10000,
    }
    conf.update(extra)
    return ck.Consumer(conf)


def ck_consume(bootstrap, topic, count, partition=0, offset=OFFSET_BEGINNING,
               timeout=DEFAULT_TIMEOUT, raw=False, **extra):
    """Assign (topic, partition) at `offset` and read `count` messages.
    Returns Msg tuples, or the confluent Message objects if raw=True."""
    c = ck_consumer(bootstrap, **extra)
    try:
        c.assign([ck.TopicPartition(topic, partition, offset)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError("consumed only %d of %d messages from %s[%d] in %.0fs"
                                     % (len(out), count, topic, partition, timeout))
            batch = c.consume(num_messages=min(500, count - len(out)), timeout=0.5)
            for m in batch:
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise ck.KafkaException(m.error())
                out.append(m if raw else Msg(m.key(), m.value(), m.headers()))
        return out
    finally:
        c.close()


def ck_watermarks(bootstrap, topic, partition=0, timeout=10.0):
    c = ck_consumer(bootstrap)
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=timeout,
                                       cached=False)
    finally:
        c.close()


def ck_topic_partitions(bootstrap, topic, timeout=10.0):
    """Partition count of topic from a full metadata request (never auto-creates),
    or None if the broker does not list it."""
    md = ck_admin(bootstrap).list_topics(timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return len(t.partitions)


# --- many partitions at once (one client for all of them) ---------------------
def ck_produce_each(bootstrap, records, acks="all", timeout=DEFAULT_TIMEOUT, tick=None, **extra):
    """Produce `records`, each (topic, partition, key, value), with one producer; wait for
    every delivery report and raise on any delivery error. Returns {(topic, partition):
    [offsets in delivery order]}. `tick()`, if given, runs about once a second meanwhile."""
    p = ck_producer(bootstrap, acks=acks, **extra)
    delivered, failed, reports = {}, [], [0]

    def on_delivery(err, m):
        reports[0] += 1
        if err is not None:
            failed.append((m.topic(), m.partition(), err))
        else:
            delivered.setdefault((m.topic(), m.partition()), []).append(m.offset())

    deadline = time.monotonic() + timeout
    next_tick = time.monotonic() + 1.0
    for topic, partition, key, value in records:
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=partition,
                          on_delivery=on_delivery)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise
                p.poll(0.1)
        p.poll(0)
        if tick is not None and time.monotonic() >= next_tick:
            tick()
            next_tick = time.monotonic() + 1.0
    while p.flush(1.0) > 0 and time.monotonic() < deadline:
        if tick is not None:
            tick()
    assert reports[0] == len(records), "%d of %d delivery reports after %.0fs" % (
        reports[0], len(records), timeout)
    assert not failed, "delivery failed for %d records, first: %r" % (len(failed), failed[:3])
    return delivered


def ck_consume_each(bootstrap, assignments, count, timeout=DEFAULT_TIMEOUT, settle=2.0,
                    tick=None, **extra):
    """Assign every (topic, partition, offset) of `assignments` to one consumer and read until
    `count` records arrived, then `settle` seconds more, so records beyond the expected ones
    show too. Returns {(topic, partition): [(offset, key, value)]}. `tick()`, if given, runs
    about once a second meanwhile."""
    c = ck_consumer(bootstrap, **extra)
    try:
        c.assign([ck.TopicPartition(topic, partition, offset)
                  for topic, partition, offset in assignments])
        got, total = {}, 0
        deadline = time.monotonic() + timeout
        settle_end = None
        next_tick = time.monotonic() + 1.0
        while True:
            now = time.monotonic()
            if settle_end is None and total >= count:
                settle_end = now + settle
            if settle_end is not None and now >= settle_end:
                return got
            if settle_end is None and now > deadline:
                missing = [(t, p) for t, p, _ in assignments if (t, p) not in got]
                raise AssertionError(
                    "consumed %d of %d records in %.0fs; %d assigned partitions gave nothing, "
                    "first: %r" % (total, count, timeout, len(missing), missing[:5]))
            for m in c.consume(num_messages=10000, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise ck.KafkaException(m.error())
                got.setdefault((m.topic(), m.partition()), []).append(
                    (m.offset(), m.key(), m.value()))
                total += 1
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + 1.0
    finally:
        c.close()


def ck_watermarks_each(bootstrap, partitions, timeout=10.0):
    """{(topic, partition): (low, high)} for every (topic, partition) of `partitions`, asked of
    the broker (not cached) by one consumer, each within `timeout`."""
    c = ck_consumer(bootstrap)
    try:
        return {(topic, partition): c.get_watermark_offsets(
                    ck.TopicPartition(topic, partition), timeout=timeout, cached=False)
                for topic, partition in partitions}
    finally:
        c.close()


# --- kafka-python -----------------------------------------------------------
KP_COMMON = dict(api_version_auto_timeout_ms=15000, request_timeout_ms=30000,
                 metadata_max_age_ms=5000, retry_backoff_ms=100)


def kp_producer(bootstrap, acks="all", **extra):
    conf = dict(KP_COMMON, bootstrap_servers=bootstrap, acks=acks, enable_idempotence=False,
                linger_ms=5, max_block_ms=30000, retries=3)
    conf.update(extra)
    return kafka.KafkaProducer(**conf)


def kp_produce(bootstrap, topic, msgs, acks="all", partition=None, timestamps=None,
               timeout=DEFAULT_TIMEOUT, before_close=None, **extra):
    """Produce msgs with kafka-python; raise on any failure. Returns offsets (-1 for acks=0).
    before_close: as for ck_produce."""
    p = kp_producer(bootstrap, acks=acks, **extra)
    try:
        futures = []
        for i, m in enumerate(msgs):
            futures.append(p.send(topic, key=m[0], value=m[1], headers=list(m[2]),
                                  partition=partition,
                                  timestamp_ms=None if timestamps is None else timestamps[i]))
        p.flush(timeout=timeout)
        deadline = time.monotonic() + timeout
        offsets = [f.get(timeout=max(0.1, deadline - time.monotonic())).offset for f in futures]
        if before_close is not None:
            before_close()
        return offsets
    finally:
        p.close(timeout=5)


def kp_consumer(bootstrap, **extra):
    conf = dict(KP_COMMON, bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                auto_offset_reset="earliest", fetch_max_wait_ms=100, consumer_timeout_ms=1000)
    conf.update(extra)
    return kafka.KafkaConsumer(**conf)


def kp_consume(bootstrap, topic, count, partition=0, offset=None, timeout=DEFAULT_TIMEOUT,
               raw=False, **extra):
    """Assign (topic, partition), seek to `offset` (None = beginning), read `count`
    records. Returns Msg tuples, or kafka-python ConsumerRecords if raw=True."""
    c = kp_consumer(bootstrap, **extra)
    try:
        tp = kafka.TopicPartition(topic, partition)
        c.assign([tp])
        if offset is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, offset)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError("kafka-python consumed only %d of %d messages from %s[%d] in %.0fs"
                                     % (len(out), count, topic, partition, timeout))
            for records in c.poll(timeout_ms=500, max_records=min(500, count - len(out))).values():
                for r in records:
                    out.append(r if raw else Msg(r.key, r.value, r.headers))
        return out
    finally:
        c.close()
