"""Cross-checks the hand-written raw-protocol helpers in wire.py against kafka-python's
independent encoder/decoder, so the raw-socket broker tests stand on a verified
encoder. Needs no broker."""

import wire
from kafka.protocol.api_versions import ApiVersionsRequest_v0, ApiVersionsRequest_v3
from kafka.protocol.fetch import FetchRequest_v4
from kafka.protocol.metadata import MetadataRequest_v1
from kafka.protocol.parser import KafkaProtocol
from kafka.protocol.produce import ProduceRequest_v3
from kafka.record import _crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder


def _kp_frame(request, correlation_id):
    proto = KafkaProtocol(client_id="strata-interop")
    proto.send_request(request, correlation_id=correlation_id)
    return proto.send_bytes()


def test_crc32c_known_vectors_and_matches_kafka_python():
    assert wire.crc32c(b"123456789") == 0xE3069283
    assert wire.crc32c(bytes(32)) == 0x8A9136AA
    for data in (b"", b"a", bytes(range(256)) * 3):
        assert wire.crc32c(data) == _crc32c.crc(data)


def test_selfcheck_runs():
    wire._selfcheck()


def test_request_encoding_matches_kafka_python():
    assert wire.api_versions_request(5, 0) == _kp_frame(ApiVersionsRequest_v0(), 5)
    assert wire.api_versions_request(6, 3) == _kp_frame(
        ApiVersionsRequest_v3(client_software_name="strata-interop",
                              client_software_version="1.0", _tagged_fields={}), 6)
    assert wire.metadata_v1_request(7) == _kp_frame(MetadataRequest_v1(topics=None), 7)
    assert wire.metadata_v1_request(8, ["a", "bb"]) == _kp_frame(MetadataRequest_v1(topics=["a", "bb"]), 8)
    batch = wire.record_batch([(b"k", b"v")], base_timestamp=1234)
    assert wire.produce_v3_request(9, "t", 2, batch, acks=-1, timeout_ms=5000) == _kp_frame(
        ProduceRequest_v3(transactional_id=None, required_acks=-1, timeout=5000,
                          topics=[("t", [(2, batch)])]), 9)
    assert wire.fetch_v4_request(10, "t", 1, 42, max_wait_ms=250, min_bytes=1, max_bytes=1000,
                                 partition_max_bytes=500) == _kp_frame(
        FetchRequest_v4(replica_id=-1, max_wait_time=250, min_bytes=1, max_bytes=1000,
                        isolation_level=0, topics=[("t", [(1, 42, 500)])]), 10)


def test_our_record_batch_decodes_with_kafka_python():
    records = [(b"key-%d" % i, b"value-%d" % i * 10, [("h", b"%d" % i), ("dup", b""), ("dup", b"x")],
                1_600_000_000_000 + i * 7) for i in range(20)]
    records.append((None, None, [], 1_600_000_000_000))
    raw = wire.record_batch(records, base_timestamp=1_600_000_000_000)
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    want = [(i, r[3], r[0], r[1], list(r[2])) for i, r in enumerate(records)]
    assert got == want


def test_kafka_python_record_batch_decodes_with_ours():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    want = []
    for i in range(15):
        key, value, headers, ts = b"k%d" % i, b"v" * i, [("a", b"%d" % i)], 1_700_000_000_000 + i
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
        want.append((i, ts, key, value, headers))
    (batch,) = wire.parse_record_batches(bytes(builder.build()))
    assert batch["crc_ok"]
    assert batch["records"] == want


def test_corrupted_batch_fails_crc_in_both_decoders():
    raw = bytearray(wire.record_batch([(b"k", b"some value bytes")]))
    idx = raw.find(b"some value bytes") + 3
    raw[idx] ^= 0xFF
    assert not wire.parse_record_batches(bytes(raw))[0]["crc_ok"]
    assert not DefaultRecordBatch(raw).validate_crc()
