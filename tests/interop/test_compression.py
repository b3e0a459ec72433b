"""Compressed record batches (gzip, snappy, lz4, zstd) written by each client are
stored and served so that both clients read back identical messages."""

import random

import pytest

from clients import Msg, ck_consume, ck_produce, ck_watermarks, kp_consume, kp_produce

CODECS = ["gzip", "snappy", "lz4", "zstd"]
N = 300


def _messages(codec, producer):
    rnd = random.Random("%s-%s" % (codec, producer))
    words = [b"strata", b"kafka", b"broker", b"segment", b"offset", b"batch", b"record"]
    out = []
    for i in range(N):
        if i % 3 == 0:  # incompressible
            value = rnd.randbytes(rnd.randint(0, 1500))
        else:  # compressible text
            value = b" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 400)))
        out.append(Msg(b"%s-%d" % (codec.encode(), i), value, [("codec", codec.encode())]))
    return out


@pytest.mark.parametrize("producer", ["confluent", "kafka-python"])
@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_round_trip_to_both_clients(shared_broker, topic_name, codec, producer):
    bootstrap = shared_broker.bootstrap
    msgs = _messages(codec, producer)
    if producer == "confluent":
        # linger so that many records share a compressed batch
        ck_produce(bootstrap, topic_name, msgs, **{"compression.type": codec, "linger.ms": 50})
    else:
        # One request in flight: without idempotence, a retried batch (UNKNOWN_TOPIC_OR_PARTITION
        # while an auto-created topic reaches every broker of a cluster) would otherwise land
        # after later ones, as it does with Kafka, and this test reads the order back.
        kp_produce(bootstrap, topic_name, msgs, compression_type=codec, linger_ms=50,
                   max_in_flight_requests_per_connection=1)
    assert ck_watermarks(bootstrap, topic_name) == (0, N)

    from_ck = ck_consume(bootstrap, topic_name, N)
    from_kp = kp_consume(bootstrap, topic_name, N)
    assert from_ck == msgs
    assert from_kp == msgs

    # every record keeps its own offset inside compressed batches: read from the middle
    mid = N // 2 + 1
    assert ck_consume(bootstrap, topic_name, N - mid, offset=mid) == msgs[mid:]
    assert kp_consume(bootstrap, topic_name, N - mid, offset=mid) == msgs[mid:]


def _stored_codecs(broker, topic):
    """The codec bits of every batch stored in partition 0 (a raw Fetch of everything)."""
    import wire
    body = wire.roundtrip(broker.port, wire.fetch_v4_request(1, topic, 0, 0, partition_max_bytes=16 << 20))
    data = wire.parse_fetch_v4_response(body)[(topic, 0)]["records"]
    return {batch["attributes"] & 0x07 for batch in wire.parse_record_batches(data)}


@pytest.mark.parametrize("topic_codec,sent,stored", [
    ("zstd", ["none", "gzip", "lz4"], {4}),
    ("uncompressed", ["lz4", "snappy"], {0}),
    ("gzip", ["gzip", "none"], {1}),
    ("producer", ["gzip", "snappy"], {1, 2}),
])
def test_topic_compression_type_recompresses_on_append(shared_broker, topic_name, topic_codec, sent, stored):
    """compression.type on the topic (Kafka's semantics): `producer` keeps each batch as sent,
    a codec re-compresses every batch in another codec on append (records, keys, values and
    headers kept; the consumer checks the CRCs), and `uncompressed` stores plain batches."""
    from confluent_kafka.admin import NewTopic
    from clients import ck_admin

    admin = ck_admin(shared_broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"compression.type": topic_codec})],
                        request_timeout=10)[topic_name].result(timeout=10)
    expected = []
    for codec in sent:
        # compressible records only: librdkafka sends a batch plain when its codec does not
        # shrink it (a lone random record), which would blur what the broker stored
        msgs = [m for i, m in enumerate(_messages(codec, topic_codec)) if i % 3][:100]
        ck_produce(shared_broker.bootstrap, topic_name, msgs, partition=0,
                   **{"compression.type": codec, "linger.ms": 50})
        expected += msgs
    assert ck_consume(shared_broker.bootstrap, topic_name, len(expected), **{"check.crcs": True}) == expected
    assert kp_consume(shared_broker.bootstrap, topic_name, len(expected)) == expected
    assert _stored_codecs(shared_broker, topic_name) == stored


def test_zstd_batches_need_produce_v7(shared_broker, topic_name):
    """As Kafka (KIP-110): a zstd batch in a Produce request older than v7 is refused with
    UNSUPPORTED_COMPRESSION_TYPE (76); clients that send zstd use v7+ (the round trip above)."""
    import wire
    from confluent_kafka.admin import NewTopic
    from clients import ck_admin

    admin = ck_admin(shared_broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)], request_timeout=10)[topic_name].result(timeout=10)
    zstd = wire.record_batch([(b"k", b"v")], attributes=4)
    body = wire.roundtrip(shared_broker.port, wire.produce_v3_request(1, topic_name, 0, zstd))
    assert wire.parse_produce_v3_response(body)[(topic_name, 0)][0] == 76
    assert ck_watermarks(shared_broker.bootstrap, topic_name) == (0, 0)
