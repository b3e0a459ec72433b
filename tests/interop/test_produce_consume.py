"""Produce/consume round trips through real clients: confluent-kafka (librdkafka)
and kafka-python, each way and across clients, with acks all/1/0."""

import time

import kafka
import pytest
from kafka.client_async import KafkaClient

from clients import (ck_admin, ck_consume, ck_produce, ck_topic_partitions, ck_watermarks, is_subsequence,
                     kp_consume, kp_produce, make_messages, wait_until)

N = 2000

PRODUCE = {"confluent": ck_produce, "kafka-python": kp_produce}
CONSUME = {"confluent": ck_consume, "kafka-python": kp_consume}
# acks spelled per client: librdkafka takes strings, kafka-python ints or 'all'
ACKS = {"all": ("all", "all"), "1": ("1", 1), "0": ("0", 0)}


def _acks_for(client, acks):
    return ACKS[acks][0 if client == "confluent" else 1]


@pytest.mark.parametrize("acks", ["all", "1"])
@pytest.mark.parametrize("producer,consumer", [
    ("confluent", "confluent"),
    ("kafka-python", "kafka-python"),
    ("confluent", "kafka-python"),
    ("kafka-python", "confluent"),
])
def test_keyed_messages_with_headers_round_trip_exactly(shared_broker, topic_name, producer,
                                                        consumer, acks):
    bootstrap = shared_broker.bootstrap
    msgs = make_messages(N, prefix="%s-%s" % (producer, acks))
    offsets = PRODUCE[producer](bootstrap, topic_name, msgs, acks=_acks_for(producer, acks))
    # acked writes get consecutive offsets from 0 on a fresh, auto-created topic
    assert offsets == list(range(N))
    # auto topic creation uses num.partitions=1 and the (default) partitioner put all on it
    assert ck_topic_partitions(bootstrap, topic_name) == 1
    # acks=1 is acknowledged by the leader alone: with replicas the high watermark follows
    # once the followers have fetched (at once on a single node), as in Kafka.
    wait_until(lambda: ck_watermarks(bootstrap, topic_name) == (0, N), timeout=15,
               message="high watermark at %d" % N)

    got = CONSUME[consumer](bootstrap, topic_name, N)
    assert len(got) == N
    for i, (g, m) in enumerate(zip(got, msgs)):
        assert g == m, "message %d differs: got %r, want %r" % (i, g, m)


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_acks_zero_delivers_an_in_order_subset(shared_broker, topic_name, client):
    bootstrap = shared_broker.bootstrap
    msgs = make_messages(N, prefix="acks0-%s" % client)
    # acks=0 loses whatever reaches a broker that does not lead the partition yet (the
    # connection is closed, as in Kafka). An auto-created topic in a cluster can be named in
    # Metadata before its leader has it, so the topic is made first, and used once its
    # leader answers for it.
    from confluent_kafka.admin import NewTopic
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(30)
    wait_until(lambda: ck_watermarks(bootstrap, topic_name) == (0, 0), timeout=15,
               message="the topic's leader answering for it")

    # No acks: before the producer closes its connections, wait (bounded) until the
    # high watermark reaches N or stops moving.
    state = {"hw": None, "since": None}

    def settled():
        hw = ck_watermarks(bootstrap, topic_name)[1]
        now = time.monotonic()
        if hw != state["hw"]:
            state["hw"], state["since"] = hw, now
        return hw == N or (hw > 0 and now - state["since"] > 1.0)

    # kafka-python 2.3 (acks=0) leaves the last Produce request queued until its I/O
    # thread next wakes up, which with nothing else to do is the metadata refresh timer;
    # a short refresh interval keeps that wait at ~1 s instead of 5 s.
    extra = {"metadata_max_age_ms": 1000} if client == "kafka-python" else {}
    PRODUCE[client](bootstrap, topic_name, msgs, acks=_acks_for(client, "0"),
                    before_close=lambda: wait_until(settled, timeout=20, interval=0.2,
                                                    message="high watermark to settle"),
                    **extra)
    low, high = ck_watermarks(bootstrap, topic_name)
    assert low == 0 and 0 < high <= N, (low, high)

    got = CONSUME[client](bootstrap, topic_name, high)
    assert is_subsequence(got, msgs), "acks=0 messages are not an in-order subset of those sent"


def test_kafka_python_sees_a_message_format_v2_broker(shared_broker):
    """kafka-python infers the broker version from the ApiVersions ranges (e.g. it
    needs Metadata v4+ or Fetch v7+ to assume >= 0.11 / 1.1). Below 0.11 it falls
    back to magic v0/v1 message sets and no headers, so the broker has to
    advertise enough for kafka-python to pick record batches v2."""
    client = KafkaClient(bootstrap_servers=shared_broker.bootstrap, api_version_auto_timeout_ms=15000,
                         request_timeout_ms=30000)
    try:
        version = client.check_version(timeout=15)
    finally:
        client.close()
    assert version >= (0, 11), "kafka-python identified the broker as %r" % (version,)
    assert kafka.KafkaProducer.max_usable_produce_magic(version) == 2


def test_a_failed_acks_zero_produce_closes_the_connection_as_kafka_does(shared_broker, topic_name):
    """acks=0 has no answer, so on a failure (here a partition that does not exist) Kafka
    closes the connection: the producer's only sign to refresh its metadata. A produce that
    succeeds leaves the connection open."""
    import wire
    ck_produce(shared_broker.bootstrap, topic_name, make_messages(1), acks=1)
    batch = wire.record_batch([(b"k", b"v")])
    sock = wire.connect(shared_broker.port)
    try:
        sock.sendall(wire.produce_v3_request(1, topic_name, 0, batch, acks=0))
        sock.sendall(wire.api_versions_request(2))
        correlation_id, _ = wire.read_response(sock)
        assert correlation_id == 2, "a good acks=0 produce keeps the connection"
        sock.sendall(wire.produce_v3_request(3, topic_name, 7, batch, acks=0))
        assert wire.wait_closed(sock, timeout=10), "a failed acks=0 produce closes it"
    finally:
        sock.close()
    assert ck_watermarks(shared_broker.bootstrap, topic_name) == (0, 2)
