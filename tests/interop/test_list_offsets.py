"""ListOffsets: earliest (-2), latest (-1) and by timestamp (first offset whose
timestamp >= target) through confluent-kafka (consumer and AdminClient) and
kafka-python."""

import time

import confluent_kafka as ck
import kafka
import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TopicPartition
from confluent_kafka.admin import OffsetSpec

from clients import (Msg, ck_admin, ck_consume, ck_consumer, ck_produce, ck_watermarks, kp_consumer,
                     kp_produce, wait_until)

N = 100
STEP_MS = 1000
T = 10


@pytest.fixture
def timestamped_topic(shared_broker, topic_name):
    """N messages with timestamps base + i*STEP_MS (strictly increasing)."""
    base = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000  # an hour ago, whole second
    stamps = [base + i * STEP_MS for i in range(N)]
    msgs = [Msg(b"k%d" % i, b"v%d" % i) for i in range(N)]
    ck_produce(shared_broker.bootstrap, topic_name, msgs, partition=0, timestamps=stamps)
    return topic_name, stamps


def _ck_offsets_for_times(bootstrap, topic, ts):
    c = ck_consumer(bootstrap)
    try:
        (tp,) = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=T)
        assert tp.error is None, tp.error
        return tp.offset
    finally:
        c.close()


def _first_at_or_after(stamps, target):
    return next((i for i, ts in enumerate(stamps) if ts >= target), -1)


def _targets(stamps):
    base, last = stamps[0], stamps[-1]
    return [base - 10_000, base, base + 1, base + 10 * STEP_MS, base + 10 * STEP_MS + 500,
            last, last + 1, last + 3_600_000]


def test_timestamps_are_stored_as_create_time(shared_broker, timestamped_topic):
    topic, stamps = timestamped_topic
    got = ck_consume(shared_broker.bootstrap, topic, N, raw=True)
    assert [m.timestamp() for m in got] == [(TIMESTAMP_CREATE_TIME, ts) for ts in stamps]


def test_offsets_for_times_confluent(shared_broker, timestamped_topic):
    topic, stamps = timestamped_topic
    for target in _targets(stamps):
        want = _first_at_or_after(stamps, target)  # -1: no such message -> latest (-1)
        assert _ck_offsets_for_times(shared_broker.bootstrap, topic, target) == want, target


def test_offsets_for_times_kafka_python(shared_broker, timestamped_topic):
    topic, stamps = timestamped_topic
    c = kp_consumer(shared_broker.bootstrap)
    try:
        tp = kafka.TopicPartition(topic, 0)
        for target in _targets(stamps):
            want = _first_at_or_after(stamps, target)
            got = c.offsets_for_times({tp: target})[tp]
            if want < 0:
                assert got is None, (target, got)
            else:
                assert (got.offset, got.timestamp) == (want, stamps[want]), target
    finally:
        c.close()


def test_list_offsets_admin_api(shared_broker, timestamped_topic):
    topic, stamps = timestamped_topic
    admin = ck_admin(shared_broker.bootstrap)
    tp = TopicPartition(topic, 0)
    cases = [(OffsetSpec.earliest(), 0), (OffsetSpec.latest(), N),
             (OffsetSpec.for_timestamp(stamps[0] + 42 * STEP_MS - 1), 42)]
    for spec, want in cases:
        info = admin.list_offsets({tp: spec}, request_timeout=T)[tp].result(timeout=T)
        assert info.offset == want, (spec, info)


def test_earliest_and_latest(shared_broker, timestamped_topic):
    topic, _ = timestamped_topic
    bootstrap = shared_broker.bootstrap
    assert ck_watermarks(bootstrap, topic) == (0, N)
    c = kp_consumer(bootstrap)
    try:
        tp = kafka.TopicPartition(topic, 0)
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: N}
    finally:
        c.close()

    # latest moves with new writes (kafka-python producer this time)
    kp_produce(bootstrap, topic, [Msg(b"late", b"x")] * 5, partition=0)
    assert ck_watermarks(bootstrap, topic) == (0, N + 5)


def test_offsets_for_times_with_out_of_order_timestamps(shared_broker, topic_name):
    """Timestamps need not be monotonic: the answer is the *first* offset whose
    timestamp is >= target, not the first index entry past it."""
    base = (int(time.time() * 1000) - 7_200_000) // 1000 * 1000
    # a zig-zag: 0, 50, 10, 60, 20, 70, ... (seconds)
    stamps = [base + (i // 2) * 10_000 + (50_000 if i % 2 else 0) for i in range(40)]
    msgs = [Msg(b"k%d" % i, b"v%d" % i) for i in range(len(stamps))]
    bootstrap = shared_broker.bootstrap
    ck_produce(bootstrap, topic_name, msgs, partition=0, timestamps=stamps)
    for target in (base + 5_000, base + 55_000, base + 100_000, base + 240_000, base + 245_000):
        assert _ck_offsets_for_times(bootstrap, topic_name, target) == \
            _first_at_or_after(stamps, target), target


def test_max_timestamp_is_the_first_record_with_the_largest_timestamp(shared_broker, topic_name):
    """OffsetSpec.max_timestamp() (ListOffsets timestamp -3, KIP-734): the largest timestamp
    sits in the middle of the log, and appears twice; the first of the two is answered."""
    base = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
    stamps = [base + s * 1000 for s in (1, 5, 3, 9, 2, 9, 4)]
    msgs = [Msg(b"k%d" % i, b"v%d" % i) for i in range(len(stamps))]
    ck_produce(shared_broker.bootstrap, topic_name, msgs, partition=0, timestamps=stamps)
    admin = ck_admin(shared_broker.bootstrap)
    tp = TopicPartition(topic_name, 0)
    info = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=T)[tp].result(timeout=T)
    assert (info.offset, info.timestamp) == (3, base + 9000), info


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_log_append_time_stamps_batches_with_the_broker_clock(shared_broker, topic_name, codec):
    """message.timestamp.type=LogAppendTime: the broker sets each batch's timestamp type and
    max timestamp to its clock (and the CRC, which the consumer checks), answers it in the
    produce response, and does not check the records' own times; ListOffsets by time and
    MAX_TIMESTAMP see the broker's times."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(shared_broker.bootstrap)
    config = {"message.timestamp.type": "LogAppendTime",
              # an hour-old record would be refused under CreateTime
              "message.timestamp.before.max.ms": "60000"}
    admin.create_topics([NewTopic(topic_name, 1, 1, config=config)],
                        request_timeout=T)[topic_name].result(timeout=T)
    old = int(time.time() * 1000) - 3_600_000
    before = int(time.time() * 1000)
    reports = []
    p = ck.Producer({"bootstrap.servers": shared_broker.bootstrap, "compression.type": codec,
                     "linger.ms": 20, "enable.idempotence": False})
    for i in range(20):
        p.produce(topic_name, value=b"v%d" % i, partition=0, timestamp=old,
                  on_delivery=lambda err, m: reports.append((err, m.timestamp())))
    assert p.flush(T) == 0
    after = int(time.time() * 1000)
    assert all(err is None for err, _ in reports), reports
    assert all(kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after
               for _, (kind, ts) in reports), reports
    got = ck_consume(shared_broker.bootstrap, topic_name, 20, raw=True, **{"check.crcs": True})
    stamps = [m.timestamp() for m in got]
    assert all(kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after for kind, ts in stamps), stamps
    tp = TopicPartition(topic_name, 0)
    info = admin.list_offsets({tp: OffsetSpec.for_timestamp(before)}, request_timeout=T)[tp].result(timeout=T)
    assert info.offset == 0, info
    info = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=T)[tp].result(timeout=T)
    assert before <= info.timestamp <= after, info


def _leader_known(producer, topic):
    md = producer.list_topics(topic, timeout=T).topics.get(topic)
    return md is not None and md.error is None and 0 in md.partitions and md.partitions[0].leader >= 0


def test_out_of_bounds_timestamps_are_named_per_record(shared_broker, topic_name):
    """KIP-467 for INVALID_TIMESTAMP: with message.timestamp.before.max.ms=60000, the two
    hour-old records of a batch are named in record_errors; nothing of the batch is stored."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(shared_broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"message.timestamp.before.max.ms": "60000"})],
                        request_timeout=T)[topic_name].result(timeout=T)
    now = int(time.time() * 1000)
    stamps = [now, now - 3_600_000, now, now - 3_600_000]
    reports = {}
    p = ck.Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 1000, "retries": 0,
                     "enable.idempotence": False})
    # the four records must share one batch: let the producer learn the partition's leader first
    # (in a cluster a record queued before that could leave alone in a batch of its own)
    wait_until(lambda: _leader_known(p, topic_name), timeout=T, message="the producer knows the leader")
    for i, ts in enumerate(stamps):
        p.produce(topic_name, value=b"v", partition=0, timestamp=ts,
                  on_delivery=lambda err, m, i=i: reports.__setitem__(i, err))
    assert p.flush(T) == 0
    # librdkafka fails the records record_errors names as INVALID_RECORD and the rest of the
    # batch with its local "an invalid record in the same batch".
    codes = {i: (err.code() if err else None) for i, err in reports.items()}
    assert codes == {0: KafkaError._INVALID_DIFFERENT_RECORD, 1: KafkaError.INVALID_RECORD,
                     2: KafkaError._INVALID_DIFFERENT_RECORD, 3: KafkaError.INVALID_RECORD}, reports
    assert ck_watermarks(shared_broker.bootstrap, topic_name) == (0, 0)
