"""Pipelining (issue #13): a connection runs several Produce and Fetch requests at once, and
must stay invisible to clients: answers in request order, every other request a barrier, two
produces to one partition appended in request order, acks=0 answered never."""
import gzip
import struct
import time

import wire
from test_bad_input import _create_topic


def _gzip_batch(value, records=1):
    """One gzip batch (attributes 1) of `records` records holding `value`: a value of repeated
    bytes compresses ~1000x, so a large one is checked on the offload threads."""
    now = int(time.time() * 1000)
    encoded = b"".join(wire.encode_record(i, 0, None, value) for i in range(records))
    body = gzip.compress(encoded)
    after_crc = (wire.i16(1) + wire.i32(records - 1) + wire.i64(now) + wire.i64(now)
                 + wire.i64(-1) + wire.i16(-1) + wire.i32(-1) + wire.i32(records) + body)
    return (wire.i64(0) + wire.i32(4 + 1 + 4 + len(after_crc)) + wire.i32(0) + wire.i8(2)
            + struct.pack(">I", wire.crc32c(after_crc)) + after_crc)


def _list_offsets_v1_request(correlation_id, topic, partition, timestamp=-1):
    partitions = [wire.i32(partition) + wire.i64(timestamp)]
    body = wire.i32(-1) + wire.array([wire.string(topic) + wire.array(partitions)])
    return wire.frame(wire.request_header_v1(wire.LIST_OFFSETS, 1, correlation_id) + body)


def _parse_list_offsets_v1(body):
    r = wire.Reader(body)
    out = {}
    for name, parts in r.array(lambda r: (r.string(), r.array(
            lambda r: (r.i32(), r.i16(), r.i64(), r.i64())))):
        for p, err, _timestamp, offset in parts:
            out[(name, p)] = (err, offset)
    return out


def _read_all(sock, count, timeout=30.0):
    return [wire.read_response(sock, timeout) for _ in range(count)]


def test_pipelined_requests_are_answered_in_request_order(broker):
    """A slow long-poll Fetch first, then quick requests of every kind, all sent at once: the
    quick ones complete first inside the broker, and are still answered after it, in order."""
    _create_topic(broker, "ordered")
    requests, kinds = [], []
    for correlation_id in range(1, 61):
        kind = ["fetch", "produce1", "metadata", "produce-all", "versions", "produce1"][correlation_id % 6]
        if kind == "fetch":  # waits its full max wait: nothing past the end arrives
            requests.append(wire.fetch_v4_request(correlation_id, "ordered", 0, 10 ** 9,
                                                  max_wait_ms=200, min_bytes=1 << 30))
        elif kind.startswith("produce"):
            batch = wire.record_batch([(None, b"%d" % correlation_id)])
            acks = -1 if kind == "produce-all" else 1
            requests.append(wire.produce_v3_request(correlation_id, "ordered", 0, batch, acks=acks))
        elif kind == "metadata":
            requests.append(wire.metadata_v1_request(correlation_id, ["ordered"]))
        else:
            requests.append(wire.api_versions_request(correlation_id, 0))
        kinds.append(kind)
    with wire.connect(broker.port, timeout=60) as sock:
        sock.sendall(b"".join(requests))
        answers = _read_all(sock, len(requests))
    assert [correlation_id for correlation_id, _ in answers] == list(range(1, 61))
    offsets = []
    for (correlation_id, body), kind in zip(answers, kinds):
        if kind.startswith("produce"):
            error, base = wire.parse_produce_v3_response(body)[("ordered", 0)]
            assert error == wire.NONE, (correlation_id, error)
            offsets.append(base)
        elif kind == "fetch":
            info = wire.parse_fetch_v4_response(body)[("ordered", 0)]
            assert info["error"] == wire.OFFSET_OUT_OF_RANGE, info
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets) == 30


def test_pipelined_produces_to_one_partition_land_in_request_order(broker):
    """200 produces to one partition sent at once, every third one a gzip batch that inflates
    past the inline check budget (checked on an offload thread, so it finishes its checks
    after the small batch behind it): the log holds them in request order."""
    _create_topic(broker, "inorder")
    requests = []
    for number in range(200):
        if number % 3 == 0:
            value = (b"%06d" % number) + b"x" * (600 << 10)
            batch = _gzip_batch(value)
        else:
            batch = wire.record_batch([(None, b"%06d" % number)])
        acks = [1, -1][number % 2]
        requests.append(wire.produce_v3_request(number + 1, "inorder", 0, batch, acks=acks))
    with wire.connect(broker.port, timeout=60) as sock:
        sock.sendall(b"".join(requests))
        answers = _read_all(sock, len(requests), timeout=60)
    bases = []
    for correlation_id, body in answers:
        error, base = wire.parse_produce_v3_response(body)[("inorder", 0)]
        assert error == wire.NONE, (correlation_id, error)
        bases.append(base)
    assert [c for c, _ in answers] == list(range(1, 201))
    assert bases == list(range(200)), "offsets follow the request order"
    # The stored order, read back (uncompressed batches decode here; compressed ones are
    # checked by their position: offset n holds number n).
    numbers = []
    offset = 0
    while offset < 200:
        body = wire.roundtrip(broker.port, wire.fetch_v4_request(
            7, "inorder", 0, offset, partition_max_bytes=8 << 20, max_bytes=8 << 20))
        data = wire.parse_fetch_v4_response(body)[("inorder", 0)]["records"]
        batches = wire.parse_record_batches(data)
        assert batches, "fetch at %d returned nothing" % offset
        for batch in batches:
            if batch["attributes"] & 0x07 == 1:
                value = gzip.decompress(_records_section(data, batch))
                numbers.append((batch["base_offset"], int(_first_value(value)[:6])))
            else:
                for record_offset, _ts, _key, value, _headers in batch["records"]:
                    numbers.append((record_offset, int(value)))
            offset = batch["base_offset"] + batch["count"]
    assert numbers == [(n, n) for n in range(200)]


def _records_section(data, batch):
    """The compressed records of `batch` inside the fetched `data` (after the 61-byte header)."""
    start = _find_batch(data, batch["base_offset"])
    return data[start + 61:start + batch["size"]]


def _find_batch(data, base_offset):
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if base == base_offset:
            return pos
        pos += 12 + length
    raise AssertionError("batch %d not in the fetched data" % base_offset)


def _first_value(records):
    r = wire.Reader(records)
    r.varint(), r.i8(), r.varint(), r.varint()
    key_length = r.varint()
    if key_length > 0:
        r.raw(key_length)
    return r.raw(r.varint())


def test_a_barrier_sees_every_pipelined_request_before_it(broker):
    """Produces (acks=1, all and 0) pipelined with a ListOffsets after them on one connection:
    ListOffsets is a barrier, so it reports every record before it, including acks=0 ones,
    which get no answer at all."""
    _create_topic(broker, "barrier")
    requests = []
    expected_answers = []
    for number in range(30):
        acks = [1, -1, 0][number % 3]
        batch = wire.record_batch([(None, b"%d" % number)] * 2)
        requests.append(wire.produce_v3_request(100 + number, "barrier", 0, batch, acks=acks))
        if acks != 0:
            expected_answers.append(100 + number)
    requests.append(_list_offsets_v1_request(999, "barrier", 0))
    expected_answers.append(999)
    with wire.connect(broker.port, timeout=60) as sock:
        sock.sendall(b"".join(requests))
        answers = _read_all(sock, len(expected_answers))
        assert [c for c, _ in answers] == expected_answers
        error, latest = _parse_list_offsets_v1(answers[-1][1])[("barrier", 0)]
        assert (error, latest) == (wire.NONE, 60), "ListOffsets ran after every produce before it"
        sock.settimeout(0.5)
        try:
            extra = sock.recv(1)
        except OSError:
            extra = b""
        assert extra == b"", "acks=0 produces were answered"
