"""Incremental fetch sessions (KIP-227, issue #16): the broker side with kafka-python's own
Fetch v11 codec over one raw connection, and kafka-python's consumer, which uses sessions
whenever the broker gives one. Followers use them too (`test_replication.py` checks their
gauges)."""

import time

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.fetch import FetchRequest_v11, FetchResponse_v11
from kafka.protocol.parser import KafkaProtocol

import wire
from clients import ck_admin
from test_acceptance import metrics

PARTITION_BYTES = 1 << 20


def _create(broker, name, partitions):
    admin = ck_admin(broker.bootstrap)  # kept alive until the topic exists
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                        request_timeout=10)[name].result(timeout=10)


def _produce(broker, topic, partition, count, tag):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, b"%s-%d" % (tag, i), partition=partition)
    assert producer.flush(10) == 0


class Session:
    """One connection sending Fetch v11 with session fields."""

    def __init__(self, broker):
        self.sock = wire.connect(broker.port)
        self.correlation = 0

    def fetch(self, session_id, epoch, topic, partitions, forgotten=(), max_wait_ms=0,
              min_bytes=0):
        self.correlation += 1
        request = FetchRequest_v11(
            replica_id=-1, max_wait_time=max_wait_ms, min_bytes=min_bytes,
            max_bytes=16 << 20, isolation_level=0, session_id=session_id,
            session_epoch=epoch,
            topics=[(topic, [(p, -1, offset, -1, PARTITION_BYTES) for p, offset in partitions])]
            if partitions else [],
            forgotten_topics_data=[(topic, list(forgotten))] if forgotten else [],
            rack_id="")
        protocol = KafkaProtocol(client_id="strata-sessions")
        protocol.send_request(request, correlation_id=self.correlation)
        self.sock.sendall(protocol.send_bytes())
        correlation, body = wire.read_response(self.sock, timeout=15)
        assert correlation == self.correlation
        response = FetchResponse_v11.decode(bytes(body))
        listed = {}
        for _, parts in response.topics:
            for p in parts:
                # (partition, error, high watermark, last stable, log start, aborted,
                # preferred replica, records)
                records = wire.parse_record_batches(p[7]) if p[7] else []
                values = [value for batch in records for (_, _, _, value, _) in batch["records"]]
                listed[p[0]] = (p[1], p[2], values)
        return response.error_code, response.session_id, listed

    def close(self):
        self.sock.close()


def _sum(values, name):
    return sum(v for k, v in values.items() if k == name or k.startswith(name + "{"))


def test_a_session_answers_only_what_changed_and_refuses_stale_epochs(broker, topic_name):
    _create(broker, topic_name, 2)
    _produce(broker, topic_name, 0, 3, b"a")
    _produce(broker, topic_name, 1, 3, b"b")
    s = Session(broker)
    try:
        # Epoch 0: a full fetch that makes a session.
        error, session, listed = s.fetch(0, 0, topic_name, [(0, 0), (1, 0)])
        assert error == 0 and session > 0, (error, session)
        assert listed == {0: (0, 3, [b"a-0", b"a-1", b"a-2"]), 1: (0, 3, [b"b-0", b"b-1", b"b-2"])}
        assert _sum(metrics(broker), "strata_fetch_sessions") == 1
        assert _sum(metrics(broker), "strata_fetch_session_partitions") == 2
        # New offsets, nothing new past them: nothing is listed.
        assert s.fetch(session, 1, topic_name, [(0, 3), (1, 3)]) == (0, session, {})
        # Nothing sent: the session reads both partitions at their kept offsets.
        assert s.fetch(session, 2, topic_name, []) == (0, session, {})
        # Only the partition with new records is listed; a parked fetch wakes up for it.
        _produce(broker, topic_name, 1, 2, b"c")
        error, _, listed = s.fetch(session, 3, topic_name, [], max_wait_ms=5000, min_bytes=1)
        assert (error, listed) == (0, {1: (0, 5, [b"c-0", b"c-1"])})
        # The session keeps partition 1's old offset until told otherwise.
        error, _, listed = s.fetch(session, 4, topic_name, [])
        assert listed == {1: (0, 5, [b"c-0", b"c-1"])}
        # Forgotten: partition 0's news are not listed any more.
        assert s.fetch(session, 5, topic_name, [(1, 5)], forgotten=[0]) == (0, session, {})
        _produce(broker, topic_name, 0, 1, b"d")
        assert s.fetch(session, 6, topic_name, []) == (0, session, {})
        assert _sum(metrics(broker), "strata_fetch_session_partitions") == 1
        # A stale or future epoch, an unknown id: refused with no partitions.
        assert s.fetch(session, 6, topic_name, []) == (71, 0, {})
        assert s.fetch(session, 9, topic_name, []) == (71, 0, {})
        other = session + 1 if session < 2**31 - 1 else session - 1
        assert s.fetch(other, 1, topic_name, []) == (70, 0, {})
        # The session still works at its epoch, and an added partition is listed.
        error, _, listed = s.fetch(session, 7, topic_name, [(0, 3)])
        assert (error, listed) == (0, {0: (0, 4, [b"d-0"])})
        # Epoch -1 closes it: a full fetch with no session.
        error, closed, listed = s.fetch(session, -1, topic_name, [(0, 4)])
        assert (error, closed, listed) == (0, 0, {0: (0, 4, [])})
        assert s.fetch(session, 8, topic_name, []) == (70, 0, {})
        assert _sum(metrics(broker), "strata_fetch_sessions") == 0
    finally:
        s.close()


def test_kafka_python_consumes_over_a_session_and_misses_nothing(broker, topic_name):
    _create(broker, topic_name, 4)
    for p in range(4):
        _produce(broker, topic_name, p, 250, b"p%d" % p)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=4096)
    try:
        consumer.assign([TopicPartition(topic_name, p) for p in range(4)])
        seen = {}
        deadline = time.monotonic() + 60
        while len(seen) < 1000 and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for m in messages:
                    assert (tp.partition, m.offset) not in seen, "read twice"
                    seen[(tp.partition, m.offset)] = m.value
        # More records while the consumer is in its session: they arrive too.
        for p in range(4):
            _produce(broker, topic_name, p, 50, b"q%d" % p)
        while len(seen) < 1200 and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for m in messages:
                    assert (tp.partition, m.offset) not in seen, "read twice"
                    seen[(tp.partition, m.offset)] = m.value
        values = metrics(broker)
        assert _sum(values, "strata_fetch_sessions") >= 1, "kafka-python used no session"
        assert _sum(values, "strata_fetch_session_partitions") >= 4
    finally:
        consumer.close()
    assert len(seen) == 1200
    for p in range(4):
        assert [seen[(p, o)] for o in range(300)] == (
            [b"p%d-%d" % (p, i) for i in range(250)] + [b"q%d-%d" % (p, i) for i in range(50)])
