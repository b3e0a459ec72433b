"""Raw-socket protocol tests: malformed and hostile frames, unsupported versions,
pipelining, and per-partition error codes for crafted Produce/Fetch requests.
Frames are built by wire.py (verified against kafka-python in test_wire_encoding.py)."""

import random
import struct
import time

import pytest
from confluent_kafka.admin import NewTopic

import wire
from clients import ck_admin

# APIs the broker contract says are supported, by key
CONTRACT_APIS = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions",
    19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 32: "DescribeConfigs",
    33: "AlterConfigs", 37: "CreatePartitions", 44: "IncrementalAlterConfigs", 60: "DescribeCluster",
}


def _assert_alive(broker):
    """The broker still serves new connections (a bad client must not take it down)."""
    assert broker.running(), "strata died:\n" + broker.stderr_tail()
    err, apis = wire.parse_api_versions_response(
        wire.roundtrip(broker.port, wire.api_versions_request(4242, 0)), 0)
    assert err == 0 and wire.API_VERSIONS in apis


def _create_topic(broker, name, config=None):
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=config or {})],
                        request_timeout=10)[name].result(timeout=10)


def _produce(broker, topic, batch, correlation_id=11, acks=-1):
    """Produce v7 (the first version that may carry zstd batches, which these tests send)."""
    body = wire.roundtrip(broker.port, wire.produce_v3_request(correlation_id, topic, 0, batch, acks=acks,
                                                               version=7))
    return wire.parse_produce_v3_response(body, version=7)[(topic, 0)]


def _fetch(broker, topic, offset, **kw):
    body = wire.roundtrip(broker.port, wire.fetch_v4_request(12, topic, 0, offset, **kw))
    return wire.parse_fetch_v4_response(body)[(topic, 0)]


# --- connection-level garbage -----------------------------------------------
@pytest.mark.parametrize("size", [100 * 1024 * 1024 + 1, 0x7FFFFFFF, -1],
                         ids=["100MiB+1", "int32-max", "negative"])
def test_oversized_length_prefix_closes_connection(shared_broker, size):
    with wire.connect(shared_broker.port) as s:
        s.sendall(struct.pack(">i", size) + wire.request_header_v1(wire.API_VERSIONS, 0, 1))
        assert wire.wait_closed(s, timeout=10), "connection still open after a %d-byte length prefix" % size
    _assert_alive(shared_broker)


@pytest.mark.parametrize("case", ["random-bytes", "metadata-huge-array", "produce-truncated",
                                  "unknown-api-key"])
def test_undecodable_request_closes_connection(shared_broker, case):
    rnd = random.Random(case)
    if case == "random-bytes":
        # api key 0x7f7f does not exist; the rest is noise
        payload = b"\x7f\x7f" + bytes(rnd.randrange(256) for _ in range(200))
    elif case == "metadata-huge-array":
        # valid Metadata v1 header, then a topics array claiming 2^30 entries
        payload = wire.request_header_v1(wire.METADATA, 1, 1) + wire.i32(1 << 30) + b"\x00\x05ab"
    elif case == "produce-truncated":
        full = wire.produce_v3_request(1, "t", 0, wire.record_batch([(b"k", b"v")]))[4:]
        payload = full[:len(full) // 2]
    else:
        payload = wire.request_header_v1(1000, 0, 1)
    with wire.connect(shared_broker.port) as s:
        s.sendall(wire.frame(payload))
        assert wire.wait_closed(s, timeout=10), "connection still open after %s" % case
    _assert_alive(shared_broker)


def test_unsupported_api_versions_version_gets_v0_error_response(shared_broker):
    with wire.connect(shared_broker.port) as s:
        s.sendall(wire.api_versions_request(77, version=99))
        corr, body = wire.read_response(s)
    assert corr == 77
    err, apis = wire.parse_api_versions_response(body, 99)
    assert err == wire.UNSUPPORTED_VERSION
    # the error response still lists the supported ranges, so the client can retry
    assert wire.API_VERSIONS in apis and apis[wire.API_VERSIONS][0] == 0


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_advertises_contract_apis(shared_broker, version):
    with wire.connect(shared_broker.port) as s:
        s.sendall(wire.api_versions_request(5, version=version))
        corr, body = wire.read_response(s)
    assert corr == 5
    err, apis = wire.parse_api_versions_response(body, version)
    assert err == 0
    missing = {k: n for k, n in CONTRACT_APIS.items() if k not in apis}
    assert not missing, "not advertised: %s" % missing
    for key, (lo, hi) in apis.items():
        assert 0 <= lo <= hi, (key, lo, hi)
    # what the raw tests below send must be inside the advertised ranges
    for key, ver in ((wire.PRODUCE, 3), (wire.FETCH, 4), (wire.METADATA, 1), (wire.API_VERSIONS, 3)):
        assert apis[key][0] <= ver <= apis[key][1], (CONTRACT_APIS[key], ver, apis[key])


def test_pipelined_requests_are_answered_in_order(shared_broker):
    versions = [0, 3, 0, 3, 3]
    burst = b"".join(wire.api_versions_request(cid, v) for cid, v in zip(range(1, 6), versions))
    with wire.connect(shared_broker.port) as s:
        s.sendall(burst)  # one write, five requests
        responses = [wire.read_response(s) for _ in range(5)]
    assert [c for c, _ in responses] == [1, 2, 3, 4, 5]
    for (_, body), v in zip(responses, versions):
        assert wire.parse_api_versions_response(body, v)[0] == 0


def test_pipelined_mixed_requests_are_answered_in_order(shared_broker):
    reqs = []
    for cid in range(1, 21):
        reqs.append(wire.metadata_v1_request(cid) if cid % 2 else wire.api_versions_request(cid, 0))
    with wire.connect(shared_broker.port) as s:
        s.sendall(b"".join(reqs))
        responses = [wire.read_response(s) for _ in range(20)]
    assert [c for c, _ in responses] == list(range(1, 21))
    for cid, body in responses:
        if cid % 2:
            md = wire.parse_metadata_v1_response(body)
            assert [b[0] for b in md["brokers"]] == [0]
        else:
            assert wire.parse_api_versions_response(body, 0)[0] == 0


def test_request_split_across_writes_is_reassembled(shared_broker):
    req = wire.metadata_v1_request(9)
    with wire.connect(shared_broker.port) as s:
        for chunk in (req[:2], req[2:7], req[7:]):
            s.sendall(chunk)
            time.sleep(0.1)
        corr, body = wire.read_response(s)
    assert corr == 9
    md = wire.parse_metadata_v1_response(body)
    assert md["controller"] == 0
    assert md["brokers"][0][1:3] == ("127.0.0.1", shared_broker.port)


# --- Produce / Fetch error codes ----------------------------------------------
def test_raw_produce_and_fetch_round_trip(shared_broker, topic_name):
    """Sanity for the error-code tests below: a well-formed raw batch is accepted
    and fetched back intact."""
    _create_topic(shared_broker, topic_name)
    batch = wire.record_batch([(b"k1", b"v1", [("h", b"1")]), (None, b"v2")])
    assert _produce(shared_broker, topic_name, batch) == (0, 0)
    part = _fetch(shared_broker, topic_name, 0)
    assert part["error"] == 0 and part["high_watermark"] == 2
    (got,) = wire.parse_record_batches(part["records"])
    assert got["crc_ok"]
    assert [(o, k, v, h) for o, _ts, k, v, h in got["records"]] == [
        (0, b"k1", b"v1", [("h", b"1")]), (1, None, b"v2", [])]


@pytest.mark.parametrize("where", ["value-byte", "crc-field"])
def test_corrupted_batch_crc_is_rejected(shared_broker, topic_name, where):
    _create_topic(shared_broker, topic_name)
    good = wire.record_batch([(b"key", b"payload-that-will-be-corrupted")])
    assert _produce(shared_broker, topic_name, good) == (0, 0)

    bad = bytearray(wire.record_batch([(b"key", b"payload-that-will-be-corrupted")]))
    if where == "value-byte":
        bad[bad.find(b"payload") + 4] ^= 0xFF
    else:
        bad[17] ^= 0x01  # the CRC field sits at bytes 17..20 of the batch
    err, _ = _produce(shared_broker, topic_name, bytes(bad))
    assert err == wire.CORRUPT_MESSAGE
    # nothing of the corrupt batch became visible
    assert _fetch(shared_broker, topic_name, 0)["high_watermark"] == 1
    _assert_alive(shared_broker)


def test_batch_larger_than_max_message_bytes_is_rejected(shared_broker, topic_name):
    _create_topic(shared_broker, topic_name, config={"max.message.bytes": "1024"})
    assert _produce(shared_broker, topic_name, wire.record_batch([(b"k", b"x" * 100)])) == (0, 0)
    err, _ = _produce(shared_broker, topic_name, wire.record_batch([(b"k", b"x" * 4000)]))
    assert err == wire.MESSAGE_TOO_LARGE
    assert _fetch(shared_broker, topic_name, 0)["high_watermark"] == 1


def test_produce_to_invalid_topic_name_fails(shared_broker):
    err, _ = _produce(shared_broker, "bad/name", wire.record_batch([(b"k", b"v")]))
    assert err in (wire.INVALID_TOPIC_EXCEPTION, wire.UNKNOWN_TOPIC_OR_PARTITION), err


def test_fetch_unknown_topic_is_unknown_topic_or_partition(shared_broker, topic_name):
    part = _fetch(shared_broker, topic_name + "-never-created", 0)
    assert part["error"] == wire.UNKNOWN_TOPIC_OR_PARTITION
    assert not part["records"]


def test_fetch_far_beyond_end_is_offset_out_of_range(shared_broker, topic_name):
    _create_topic(shared_broker, topic_name)
    assert _produce(shared_broker, topic_name, wire.record_batch([(b"k", b"v")])) == (0, 0)
    part = _fetch(shared_broker, topic_name, 10 ** 9)
    assert part["error"] == wire.OFFSET_OUT_OF_RANGE
    assert not part["records"]
    # a negative offset is out of range too
    assert _fetch(shared_broker, topic_name, -5)["error"] == wire.OFFSET_OUT_OF_RANGE
    # and the partition itself is fine
    assert _fetch(shared_broker, topic_name, 0)["error"] == 0
