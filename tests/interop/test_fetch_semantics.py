"""Fetch v4 semantics over raw sockets: long polling (max_wait_ms / min_bytes) and
size limits (partition max_bytes, response max_bytes, always at least one batch)."""

import threading
import time

from confluent_kafka.admin import NewTopic

import wire
from clients import ck_admin


def _create_topic(broker, name):
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)],
                        request_timeout=10)[name].result(timeout=10)


def _produce_one(broker, topic, value, corr=1):
    body = wire.roundtrip(broker.port, wire.produce_v3_request(corr, topic, 0,
                                                               wire.record_batch([(b"k", value)])))
    return wire.parse_produce_v3_response(body)[(topic, 0)]


def _timed_fetch(broker, topic, offset, **kw):
    t0 = time.monotonic()
    body = wire.roundtrip(broker.port, wire.fetch_v4_request(3, topic, 0, offset, **kw), timeout=30)
    return time.monotonic() - t0, wire.parse_fetch_v4_response(body)[(topic, 0)]


def test_fetch_at_end_waits_for_max_wait(shared_broker, topic_name):
    _create_topic(shared_broker, topic_name)
    assert _produce_one(shared_broker, topic_name, b"v") == (0, 0)
    elapsed, part = _timed_fetch(shared_broker, topic_name, 1, max_wait_ms=1000, min_bytes=1)
    assert part["error"] == 0 and not part["records"] and part["high_watermark"] == 1
    # allow for coarse timers, but an immediate empty answer is a busy-poll bug
    assert 0.8 <= elapsed < 10, elapsed


def test_fetch_with_min_bytes_zero_returns_immediately(shared_broker, topic_name):
    _create_topic(shared_broker, topic_name)
    elapsed, part = _timed_fetch(shared_broker, topic_name, 0, max_wait_ms=5000, min_bytes=0)
    assert part["error"] == 0 and not part["records"]
    assert elapsed < 3, elapsed


def test_fetch_with_data_available_returns_without_waiting(shared_broker, topic_name):
    _create_topic(shared_broker, topic_name)
    _produce_one(shared_broker, topic_name, b"v")
    elapsed, part = _timed_fetch(shared_broker, topic_name, 0, max_wait_ms=5000, min_bytes=1)
    assert part["records"] and elapsed < 3, elapsed


def test_long_poll_wakes_up_on_new_data(shared_broker, topic_name):
    _create_topic(shared_broker, topic_name)
    result = {}

    def fetcher():
        result["elapsed"], result["part"] = _timed_fetch(shared_broker, topic_name, 0,
                                                         max_wait_ms=8000, min_bytes=1)

    t = threading.Thread(target=fetcher, daemon=True)
    t.start()
    time.sleep(0.5)  # let the fetch park
    assert _produce_one(shared_broker, topic_name, b"wake-up", corr=2) == (0, 0)
    t.join(timeout=20)
    assert not t.is_alive(), "fetch did not return"
    (batch,) = wire.parse_record_batches(result["part"]["records"])
    assert batch["records"][0][3] == b"wake-up"
    # woke up on the produce, well before the 8 s max wait
    assert result["elapsed"] < 6, result["elapsed"]


def test_fetch_respects_max_bytes_but_returns_at_least_one_batch(shared_broker, topic_name):
    _create_topic(shared_broker, topic_name)
    for i in range(10):
        assert _produce_one(shared_broker, topic_name, bytes([65 + i]) * 1000, corr=i)[0] == 0

    # unlimited: all ten batches
    _, part = _timed_fetch(shared_broker, topic_name, 0)
    batches = wire.parse_record_batches(part["records"])
    assert [b["base_offset"] for b in batches] == list(range(10))
    batch_size = batches[0]["size"]

    # partition limit of ~2.5 batches: a prefix, no more bytes than the limit
    limit = batch_size * 5 // 2
    _, part = _timed_fetch(shared_broker, topic_name, 0, partition_max_bytes=limit)
    got = wire.parse_record_batches(part["records"])
    assert len(part["records"]) <= limit
    assert 1 <= len(got) <= 2 and got[0]["base_offset"] == 0

    # response limit behaves the same way
    _, part = _timed_fetch(shared_broker, topic_name, 3, max_bytes=limit)
    got = wire.parse_record_batches(part["records"])
    assert len(part["records"]) <= limit
    assert 1 <= len(got) <= 2 and got[0]["base_offset"] == 3

    # limits smaller than one batch still return the first whole batch (KIP-74)
    for kw in ({"partition_max_bytes": 10}, {"max_bytes": 10}):
        _, part = _timed_fetch(shared_broker, topic_name, 5, **kw)
        got = wire.parse_record_batches(part["records"])
        assert got and got[0]["base_offset"] == 5 and got[0]["records"][0][3] == b"F" * 1000, kw


def test_fetch_max_bytes_bounds_the_whole_response_across_partitions(shared_broker, topic_name):
    """librdkafka's test 0082: fetch.max.bytes=1,000,000 with max.partition.fetch.bytes of 20 MB.
    Only the first batch of the first partition with data may pass the response limit; the
    broker once added a second ~900 KB partition after the first (1.84 MB), and librdkafka
    failed the fetch ("Invalid response size") and stalled."""
    import confluent_kafka as ck
    from clients import ck_consumer, ck_produce, Msg

    admin = ck_admin(shared_broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, num_partitions=4, replication_factor=1)],
                        request_timeout=10)[topic_name].result(timeout=10)
    value = b"v" * 300_000
    per_partition = 6
    for partition in range(4):
        # ~900 KB batches: three 300 KB messages each
        ck_produce(shared_broker.bootstrap, topic_name, [Msg(None, value)] * per_partition,
                   partition=partition, **{"batch.size": 1_000_000, "linger.ms": 100})
    consumer = ck_consumer(shared_broker.bootstrap, **{"fetch.max.bytes": 1_000_000,
                                                      "max.partition.fetch.bytes": 20_000_000,
                                                      "receive.message.max.bytes": 1_000_512})
    try:
        consumer.assign([ck.TopicPartition(topic_name, p, ck.OFFSET_BEGINNING) for p in range(4)])
        got, errors = 0, []
        deadline = time.monotonic() + 30
        while got < 4 * per_partition and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                errors.append(message.error())
                continue
            assert message.value() == value
            got += 1
        assert not errors, errors
        assert got == 4 * per_partition, got
    finally:
        consumer.close()

    # The same over a raw Fetch of two partitions: the second partition's batch does not fit
    # what the first left of max_bytes, so it answers no records (but its offsets).
    body = wire.roundtrip(shared_broker.port, _fetch_v4_two_partitions(topic_name, max_bytes=1_000_000))
    parts = wire.parse_fetch_v4_response(body)
    first, second = parts[(topic_name, 0)], parts[(topic_name, 1)]
    assert first["records"] and len(first["records"]) > 500_000
    assert second["error"] == 0 and not second["records"] and second["high_watermark"] == per_partition
    assert len(wire.parse_record_batches(first["records"])) == 1


def _fetch_v4_two_partitions(topic, max_bytes):
    partitions = [wire.i32(p) + wire.i64(0) + wire.i32(20_000_000) for p in (0, 1)]
    topics = [wire.string(topic) + wire.array(partitions)]
    body = (wire.i32(-1) + wire.i32(100) + wire.i32(1) + wire.i32(max_bytes) + wire.i8(0)
            + wire.array(topics))
    return wire.frame(wire.request_header_v1(wire.FETCH, 4, 9) + body)


def test_a_fetch_of_many_partitions_answers_what_reading_them_in_order_answers(
        shared_broker, topic_name):
    """The broker reads a fetch's partitions a window at a time, at once, then cuts each answer
    to the budget left before it in the request's order. The answer must be what reading them
    one by one answers (KIP-74): whole batches while they fit the partition's and the
    response's limits, past the first partition with data no batch that does not fit, the
    partitions past the budget with their offsets and no records. And the records counted out
    (strata_topic_*_out_total) are those sent, not those read and cut.

    40 partitions: the first holds one 5,000-byte batch, the others three batches of ~1 KB;
    partition_max_bytes fits two small batches, max_bytes 22,000. The expected answer is
    worked out here, one partition after another."""
    partitions = 40
    admin = ck_admin(shared_broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, num_partitions=partitions, replication_factor=1)],
                        request_timeout=10)[topic_name].result(timeout=10)
    stored = {}  # partition -> [batch bytes]
    for p in range(partitions):
        values = [b"B" * 5000] if p == 0 else [b"%c" % (65 + n) * 1000 for n in range(3)]
        stored[p] = []
        for n, value in enumerate(values):
            batch = wire.record_batch([(b"k", value)], base_offset=0)
            body = wire.roundtrip(shared_broker.port,
                                  wire.produce_v3_request(p * 10 + n, topic_name, p, batch))
            assert wire.parse_produce_v3_response(body)[(topic_name, p)][0] == 0
            stored[p].append(len(batch))
    partition_max, max_bytes = 2 * stored[1][0] + 100, 22_000

    # The rule, one partition after another.
    expected, total = {}, 0
    for p in range(partitions):
        budget = min(partition_max, max_bytes - total)
        kept, size = 0, 0
        for length in stored[p]:
            if size + length > budget and not (kept == 0 and total == 0):
                break
            kept, size = kept + 1, size + length
        expected[p] = kept
        total += size
    assert expected[0] == 1 and expected[1] == 2 and 0 < sum(expected.values()) < 2 * partitions
    assert any(expected[p] == 1 for p in range(1, partitions)), "a partition cut to one batch"

    topic = wire.string(topic_name) + wire.array(
        [wire.i32(p) + wire.i64(0) + wire.i32(partition_max) for p in range(partitions)])
    body = (wire.i32(-1) + wire.i32(100) + wire.i32(1) + wire.i32(max_bytes) + wire.i8(0)
            + wire.array([topic]))
    answer = wire.parse_fetch_v4_response(wire.roundtrip(
        shared_broker.port, wire.frame(wire.request_header_v1(wire.FETCH, 4, 11) + body)))
    got = {p: len(wire.parse_record_batches(answer[(topic_name, p)]["records"]))
           for p in range(partitions)}
    assert got == expected
    for p in range(partitions):
        info = answer[(topic_name, p)]
        assert info["error"] == 0, (p, info["error"])
        # Partitions read and cut answer their offsets; past the budget they may answer -1.
        assert info["high_watermark"] in (len(stored[p]), -1), (p, info["high_watermark"])
    sent_bytes = sum(len(answer[(topic_name, p)]["records"] or b"") for p in range(partitions))
    assert sent_bytes == sum(sum(stored[p][:expected[p]]) for p in range(partitions))

    from test_disk_full import _admin_get

    def out(name):
        status, text = _admin_get(shared_broker, "/metrics")
        assert status == 200, status
        label = '%s{topic="%s"} ' % (name, topic_name)
        values = [float(line[len(label):]) for line in text.splitlines() if line.startswith(label)]
        return values[0] if values else 0.0

    assert out("strata_topic_messages_out_total") == sum(expected.values())
    assert out("strata_topic_bytes_out_total") == sent_bytes
