"""Log compaction (cleanup.policy=compact): after the broker's cleaner runs, consumers of both
clients read, from the start, the latest value of every key at the offset it was produced at
(superseded records and old tombstones gone, emptied batches skipped), the result survives a
SIGKILL restart, and a record without a key is refused with INVALID_RECORD."""
import time

import confluent_kafka as ck
import kafka

from clients import ck_consumer, ck_produce, kp_consumer
from conftest import _stop, strata_bin
from test_acceptance import TunedBroker, create_topic

KEYS = 20
ROUNDS = 30


def read_all_confluent(bootstrap, topic):
    """(offset, key, value) of every record from offset 0 to the end of partition 0."""
    c = ck_consumer(bootstrap, **{"enable.partition.eof": True})
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    return out
                raise ck.KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
        raise AssertionError("no end of partition within 30 s (%d records)" % len(out))
    finally:
        c.close()


def read_all_kafka_python(bootstrap, topic, high_watermark):
    c = kp_consumer(bootstrap)
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out = []
        deadline = time.monotonic() + 30
        while c.position(tp) < high_watermark and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                out.extend((r.offset, r.key, r.value) for r in records)
        assert c.position(tp) >= high_watermark, "kafka-python stopped at %d" % c.position(tp)
        return out
    finally:
        c.close()


def test_compacted_topic_keeps_the_latest_value_per_key(tmp_path, topic_name):
    b = TunedBroker(strata_bin(), tmp_path / "broker", ["--retention-check-interval-ms", "200"])
    b.start()
    try:
        create_topic(b.bootstrap, topic_name, 1, {"cleanup.policy": "compact", "segment.bytes": "4096",
                                                  "delete.retention.ms": "0"})
        msgs = [(b"key-%d" % (i % KEYS), b"value-%d-round-%d" % (i % KEYS, i // KEYS), [])
                for i in range(KEYS * ROUNDS)]
        offsets = ck_produce(b.bootstrap, topic_name, msgs, partition=0)
        # key-0 is deleted with a tombstone, then more records push it into a sealed segment.
        tomb = ck.Producer({"bootstrap.servers": b.bootstrap})
        tomb.produce(topic_name, key=b"key-0", value=None, partition=0)
        assert tomb.flush(10) == 0
        filler = [(b"key-%d" % (1 + i % (KEYS - 1)), b"late-%d" % i, []) for i in range(200)]
        offsets += [-1] + ck_produce(b.bootstrap, topic_name, filler, partition=0)
        produced = msgs + [(b"key-0", None, [])] + filler
        latest = {}
        for offset, (key, value, _) in zip(range(len(produced)), produced):
            latest[key] = (offset, value)
        assert offsets[:len(msgs)] == list(range(len(msgs)))

        def cleaned():
            return any("compacted" in line and topic_name in line for line in b.stderr_tail(400).splitlines())

        deadline = time.monotonic() + 20
        while not cleaned() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cleaned(), "the cleaner ran on the topic"
        time.sleep(1.0)  # let a second pass cover segments sealed by the filler
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % b.admin_port, timeout=10) as r:
            metrics = r.read().decode()
        removed = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                      if line.startswith("strata_compacted_records_total{"))
        assert removed >= KEYS * (ROUNDS - 2), "/metrics counts the records compaction removed: %r" % removed

        for attempt in range(2):
            got = read_all_confluent(b.bootstrap, topic_name)
            assert len(got) < len(produced) / 2, "superseded records are gone (%d left)" % len(got)
            offsets_seen = [o for o, _, _ in got]
            assert offsets_seen == sorted(set(offsets_seen)), "offsets strictly increase"
            last_seen = {}
            for offset, key, value in got:
                assert produced[offset][0] == key and produced[offset][1] == value, \
                    "offset %d holds what was produced there" % offset
                last_seen[key] = (offset, value)
            for key, (offset, value) in latest.items():
                if value is None:
                    assert key not in last_seen or last_seen[key][1] is None
                else:
                    assert last_seen.get(key) == (offset, value), key
            assert b"key-0" not in last_seen, "the tombstone (delete.retention.ms=0) and key-0 are gone"
            high = len(produced)
            kp = read_all_kafka_python(b.bootstrap, topic_name, high)
            assert kp == got, "kafka-python reads the same compacted log"
            if attempt == 0:
                b.restart()  # SIGKILL: the compacted segments are what is on disk

        keyless = ck.Producer({"bootstrap.servers": b.bootstrap, "retries": 0})
        errors = []
        keyless.produce(topic_name, value=b"no key", partition=0,
                        on_delivery=lambda err, m: errors.append(err))
        keyless.flush(10)
        assert errors and errors[0] is not None and errors[0].code() == ck.KafkaError.INVALID_RECORD, errors
    finally:
        _stop(b)


def test_keyless_records_on_a_compacted_topic_are_named_per_record(shared_broker, topic_name):
    """KIP-467 (librdkafka's test 0011): a batch with keyless records sent to a compacted topic
    is refused with INVALID_RECORD, and record_errors names each keyless record, so the client
    reports those with the broker's reason and nothing of the batch is stored."""
    import confluent_kafka as ck
    from confluent_kafka import KafkaError

    create_topic(shared_broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact"})
    reports = {}
    p = ck.Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 200, "retries": 0,
                     "enable.idempotence": False})
    keys = [b"k0", None, b"k2", None, b"k4"]
    for i, key in enumerate(keys):
        p.produce(topic_name, key=key, value=b"v%d" % i, partition=0,
                  on_delivery=lambda err, m, i=i: reports.__setitem__(i, err))
    assert p.flush(10) == 0
    assert sorted(reports) == list(range(5))
    # librdkafka fails the named records with the broker's INVALID_RECORD, and the others of
    # the batch with its local "an invalid record in the same batch" (without record_errors,
    # every one of them would be INVALID_RECORD).
    codes = {i: err.code() for i, err in reports.items()}
    assert codes == {0: KafkaError._INVALID_DIFFERENT_RECORD, 1: KafkaError.INVALID_RECORD,
                     2: KafkaError._INVALID_DIFFERENT_RECORD, 3: KafkaError.INVALID_RECORD,
                     4: KafkaError._INVALID_DIFFERENT_RECORD}, reports
    c = ck.Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "unused"})
    try:
        assert c.get_watermark_offsets(ck.TopicPartition(topic_name, 0), timeout=10) == (0, 0)
    finally:
        c.close()
