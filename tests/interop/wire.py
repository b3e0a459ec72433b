"""Tiny hand-written Kafka wire-protocol encoder/decoder for raw-socket tests.

Only what test_bad_input.py / test_fetch_raw.py need: request headers v1/v2,
ApiVersions v0/v3, Metadata v1, Produce v3, Fetch v4, and record batches
(magic v2) with CRC-32C. Independent of both client libraries on purpose, so a
bug in a client cannot hide a broker bug (test_wire_encoding.py cross-checks
this module against kafka-python's encoder/decoder).

Run `python tests/interop/wire.py` for the self-checks.
"""

import io
import socket
import struct
import time

# --- API keys ---------------------------------------------------------------
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
OFFSET_FOR_LEADER_EPOCH = 23

# --- error codes ------------------------------------------------------------
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35


# --- CRC-32C (Castagnoli, reflected poly 0x82F63B78), table-driven ----------
def _make_crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _make_crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --- primitive encoders -----------------------------------------------------
def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    """STRING / NULLABLE_STRING (int16 length)."""
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def bytes_(b):
    """BYTES / NULLABLE_BYTES (int32 length)."""
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def array(items):
    """ARRAY of already-encoded items (int32 count); None -> null array."""
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(items)


def uvarint(v):
    assert v >= 0
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v):
    """Signed zigzag varint (works for 32- and 64-bit values)."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


EMPTY_TAGGED_FIELDS = uvarint(0)


# --- request framing --------------------------------------------------------
def request_header_v1(api_key, api_version, correlation_id, client_id="strata-interop"):
    return i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)


def request_header_v2(api_key, api_version, correlation_id, client_id="strata-interop"):
    return request_header_v1(api_key, api_version, correlation_id, client_id) + EMPTY_TAGGED_FIELDS


def frame(payload):
    return i32(len(payload)) + payload


def api_versions_request(correlation_id, version=0):
    """ApiVersions request. v0-v2 have an empty body (header v1); v3+ is flexible
    (header v2, compact client software name/version, tagged fields). Any version
    number can be passed (e.g. 99) to provoke UNSUPPORTED_VERSION."""
    if version >= 3:
        body = compact_string("strata-interop") + compact_string("1.0") + EMPTY_TAGGED_FIELDS
        return frame(request_header_v2(API_VERSIONS, version, correlation_id) + body)
    return frame(request_header_v1(API_VERSIONS, version, correlation_id))


def metadata_v1_request(correlation_id, topics=None):
    """Metadata v1; topics=None asks for all topics."""
    body = array(None if topics is None else [string(t) for t in topics])
    return frame(request_header_v1(METADATA, 1, correlation_id) + body)


def produce_v3_request(correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000, version=3):
    """Produce v3-v8 (one layout); zstd batches need v7+, as in Kafka."""
    return produce_v3_request_partitions(correlation_id, topic, [(partition, batch)], acks, timeout_ms,
                                         version)


def produce_v3_request_partitions(correlation_id, topic, partitions, acks=-1, timeout_ms=10000, version=3):
    """Produce v3-v8 to several partitions of one topic: partitions = [(index, records bytes)],
    in that order."""
    entries = [i32(index) + bytes_(records) for index, records in partitions]
    topics = [string(topic) + array(entries)]
    body = string(None) + i16(acks) + i32(timeout_ms) + array(topics)
    return frame(request_header_v1(PRODUCE, version, correlation_id) + body)


def fetch_v4_request(correlation_id, topic, partition, offset, max_wait_ms=100, min_bytes=1,
                     max_bytes=16 * 1024 * 1024, partition_max_bytes=1024 * 1024):
    partitions = [i32(partition) + i64(offset) + i32(partition_max_bytes)]
    topics = [string(topic) + array(partitions)]
    body = (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0)
            + array(topics))
    return frame(request_header_v1(FETCH, 4, correlation_id) + body)


def fetch_v9_request(correlation_id, topic, partition, offset, current_leader_epoch=-1,
                     max_wait_ms=100, partition_max_bytes=1024 * 1024):
    """Fetch v9 (KIP-320: the partition carries the leader epoch the client knows)."""
    partitions = [i32(partition) + i32(current_leader_epoch) + i64(offset) + i64(-1)
                  + i32(partition_max_bytes)]
    topics = [string(topic) + array(partitions)]
    body = (i32(-1) + i32(max_wait_ms) + i32(1) + i32(16 * 1024 * 1024) + i8(0)
            + i32(0) + i32(-1) + array(topics) + array([]))
    return frame(request_header_v1(FETCH, 9, correlation_id) + body)


def offset_for_leader_epoch_v2_request(correlation_id, topic, partition, leader_epoch,
                                       current_leader_epoch=-1):
    """OffsetForLeaderEpoch v2 (KIP-320: with the epoch the client knows as the leader's)."""
    partitions = [i32(partition) + i32(current_leader_epoch) + i32(leader_epoch)]
    body = array([string(topic) + array(partitions)])
    return frame(request_header_v1(OFFSET_FOR_LEADER_EPOCH, 2, correlation_id) + body)


def parse_offset_for_leader_epoch_v2(body):
    """OffsetForLeaderEpoch v2 answer -> {(topic, partition): (error, leader_epoch, end_offset)}"""
    r = Reader(body)
    r.i32()  # throttle_time_ms
    out = {}
    for name, parts in r.array(lambda r: (r.string(), r.array(
            lambda r: (r.i16(), r.i32(), r.i32(), r.i64())))):
        for err, p, epoch, end in parts:
            out[(name, p)] = (err, epoch, end)
    return out


def parse_fetch_v9_errors(body):
    """Fetch v9 answer -> {(topic, partition): error_code}"""
    r = Reader(body)
    r.i32()  # throttle_time_ms
    r.i16()  # error_code
    r.i32()  # session_id
    out = {}

    def partition(r):
        p, err = r.i32(), r.i16()
        r.i64(), r.i64(), r.i64()  # high watermark, last stable offset, log start offset
        r.array(lambda r: (r.i64(), r.i64()))  # aborted transactions
        r.bytes_()
        return p, err

    for name, parts in r.array(lambda r: (r.string(), r.array(partition))):
        for p, err in parts:
            out[(name, p)] = err
    return out


# --- record batch v2 --------------------------------------------------------
def encode_record(offset_delta, timestamp_delta, key, value, headers=()):
    body = bytearray()
    body += i8(0)  # attributes
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    for b in (key, value):
        if b is None:
            body += varint(-1)
        else:
            body += varint(len(b)) + b
    body += varint(len(headers))
    for hk, hv in headers:
        hk = hk.encode()
        body += varint(len(hk)) + hk
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + bytes(body)


def record_batch(records, base_offset=0, base_timestamp=None, attributes=0,
                 partition_leader_epoch=-1, producer_id=-1, producer_epoch=-1,
                 base_sequence=-1):
    """Build an uncompressed magic-v2 record batch.

    records: list of (key, value) or (key, value, headers) or
             (key, value, headers, timestamp_ms) tuples.
    """
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    encoded = []
    max_ts = base_timestamp
    for i, rec in enumerate(records):
        key, value = rec[0], rec[1]
        headers = rec[2] if len(rec) > 2 else ()
        ts = rec[3] if len(rec) > 3 else base_timestamp
        max_ts = max(max_ts, ts)
        encoded.append(encode_record(i, ts - base_timestamp, key, value, headers))
    # everything the CRC covers: attributes .. end of records
    after_crc = (i16(attributes) + i32(len(records) - 1) + i64(base_timestamp) + i64(max_ts)
                 + i64(producer_id) + i16(producer_epoch) + i32(base_sequence)
                 + i32(len(records)) + b"".join(encoded))
    # batchLength counts from partitionLeaderEpoch to the end
    batch_length = 4 + 1 + 4 + len(after_crc)
    return (i64(base_offset) + i32(batch_length) + i32(partition_leader_epoch) + i8(2)
            + struct.pack(">I", crc32c(after_crc)) + after_crc)


# --- decoding ---------------------------------------------------------------
class Reader:
    def __init__(self, data):
        self.buf = io.BytesIO(data)
        self.size = len(data)

    def _take(self, n):
        b = self.buf.read(n)
        if len(b) != n:
            raise ValueError("short read: wanted %d bytes, got %d" % (n, len(b)))
        return b

    def i8(self):
        return struct.unpack(">b", self._take(1))[0]

    def i16(self):
        return struct.unpack(">h", self._take(2))[0]

    def i32(self):
        return struct.unpack(">i", self._take(4))[0]

    def u32(self):
        return struct.unpack(">I", self._take(4))[0]

    def i64(self):
        return struct.unpack(">q", self._take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def bytes_(self):
        n = self.i32()
        return None if n < 0 else self._take(n)

    def raw(self, n):
        return self._take(n)

    def array(self, item):
        n = self.i32()
        return None if n < 0 else [item(self) for _ in range(n)]

    def uvarint(self):
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def varint(self):
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def compact_array(self, item):
        n = self.uvarint()
        return None if n == 0 else [item(self) for _ in range(n - 1)]

    def skip_tagged_fields(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def remaining(self):
        return self.size - self.buf.tell()


def parse_api_versions_response(body, version):
    """-> (error_code, {api_key: (min, max)}). A v0-format body is expected when
    version is unsupported (that is what brokers send back on error 35)."""
    r = Reader(body)
    error = r.i16()
    if version >= 3 and error != UNSUPPORTED_VERSION:
        entries = r.compact_array(lambda r: (r.i16(), r.i16(), r.i16(), r.skip_tagged_fields()))
    else:
        entries = r.array(lambda r: (r.i16(), r.i16(), r.i16()))
    return error, {k: (lo, hi) for k, lo, hi, *_ in (entries or [])}


def parse_metadata_v1_response(body):
    r = Reader(body)
    brokers = r.array(lambda r: (r.i32(), r.string(), r.i32(), r.string()))
    controller = r.i32()

    def partition(r):
        return dict(error=r.i16(), partition=r.i32(), leader=r.i32(),
                    replicas=r.array(Reader.i32), isr=r.array(Reader.i32))

    def topic(r):
        return dict(error=r.i16(), name=r.string(), internal=r.i8() != 0,
                    partitions=r.array(partition))

    topics = r.array(topic)
    return dict(brokers=brokers, controller=controller, topics=topics)


def parse_produce_v3_response(body, version=3):
    """Produce v3-v7 answers -> {(topic, partition): (error_code, base_offset)}"""
    r = Reader(body)
    out = {}
    if version >= 5:  # log_start_offset
        partition = lambda r: (r.i32(), r.i16(), r.i64(), r.i64(), r.i64())
    else:
        partition = lambda r: (r.i32(), r.i16(), r.i64(), r.i64())
    for name, parts in r.array(lambda r: (r.string(), r.array(partition))):
        for p, err, base, *_ in parts:
            out[(name, p)] = (err, base)
    return out


def parse_fetch_v4_response(body):
    """-> {(topic, partition): dict(error, high_watermark, records)}"""
    r = Reader(body)
    r.i32()  # throttle_time_ms
    out = {}

    def partition(r):
        p, err, hw, lso = r.i32(), r.i16(), r.i64(), r.i64()
        r.array(lambda r: (r.i64(), r.i64()))  # aborted transactions
        return p, dict(error=err, high_watermark=hw, last_stable_offset=lso, records=r.bytes_())

    for name, parts in r.array(lambda r: (r.string(), r.array(partition))):
        for p, info in parts:
            out[(name, p)] = info
    return out


def parse_record_batches(data):
    """Decode the complete, uncompressed v2 batches in `data` (a Fetch records
    field). A trailing partial batch (allowed by the protocol) is ignored.
    -> list of dict(base_offset, crc_ok, attributes, records=[(offset, ts, key, value, headers)])"""
    batches = []
    pos = 0
    data = data or b""
    while len(data) - pos >= 12:
        base_offset, batch_length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + batch_length
        if end > len(data):
            break  # partial trailing batch
        r = Reader(data[pos + 12:end])
        r.i32()  # partition leader epoch
        magic = r.i8()
        if magic != 2:
            raise ValueError("unexpected magic %d" % magic)
        crc = r.u32()
        crc_ok = crc32c(data[pos + 21:end]) == crc
        attributes = r.i16()
        r.i32()  # last offset delta
        base_ts = r.i64()
        r.i64()  # max timestamp
        r.i64(), r.i16(), r.i32()  # producer id / epoch / base sequence
        count = r.i32()
        records = []
        if attributes & 0x07 == 0:
            for _ in range(count):
                r.varint()  # length
                r.i8()  # attributes
                ts_delta = r.varint()
                off_delta = r.varint()
                klen = r.varint()
                key = None if klen < 0 else r.raw(klen)
                vlen = r.varint()
                value = None if vlen < 0 else r.raw(vlen)
                headers = []
                for _ in range(r.varint()):
                    hk = r.raw(r.varint()).decode()
                    hl = r.varint()
                    headers.append((hk, None if hl < 0 else r.raw(hl)))
                records.append((base_offset + off_delta, base_ts + ts_delta, key, value, headers))
        batches.append(dict(base_offset=base_offset, crc_ok=crc_ok, attributes=attributes,
                            count=count, size=end - pos, records=records))
        pos = end
    return batches


# --- socket helpers ---------------------------------------------------------
def connect(port, timeout=10.0, host="127.0.0.1"):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout)
    return s


def recv_exact(sock, n, deadline):
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out after %d of %d bytes" % (len(buf), n))
        sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def read_response(sock, timeout=10.0):
    """-> (correlation_id, body) of one response with header v0."""
    deadline = time.monotonic() + timeout
    (size,) = struct.unpack(">i", recv_exact(sock, 4, deadline))
    if not 4 <= size <= 64 * 1024 * 1024:
        raise ValueError("implausible response size %d" % size)
    payload = recv_exact(sock, size, deadline)
    return struct.unpack(">i", payload[:4])[0], payload[4:]


def roundtrip(port, request, timeout=10.0, host="127.0.0.1"):
    """Open a connection, send one framed request, return the response body."""
    with connect(port, timeout, host) as s:
        s.sendall(request)
        _, body = read_response(s, timeout)
        return body


def wait_closed(sock, timeout=10.0):
    """True if the peer closes (EOF or reset) within timeout; data received
    before the close is discarded. False on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


# --- self-checks ------------------------------------------------------------
def _selfcheck():
    assert crc32c(b"123456789") == 0xE3069283, hex(crc32c(b"123456789"))
    assert crc32c(b"") == 0
    # RFC 3720 (iSCSI) B.4 test vector: 32 bytes of zeros
    assert crc32c(bytes(32)) == 0x8A9136AA, hex(crc32c(bytes(32)))
    assert uvarint(300) == b"\xac\x02"
    assert varint(-1) == b"\x01" and varint(1) == b"\x02" and varint(-64) == b"\x7f"
    r = Reader(varint(-123456789) + varint(2 ** 40) + uvarint(0))
    assert (r.varint(), r.varint(), r.uvarint()) == (-123456789, 2 ** 40, 0)
    # ApiVersions v0 request: size 24 = key(2) + version(2) + corr id(4) + client id(2 + 14)
    req = api_versions_request(7, 0)
    assert req == b"\x00\x00\x00\x18\x00\x12\x00\x00\x00\x00\x00\x07\x00\x0estrata-interop", req
    batch = record_batch([(b"k", b"v", [("h", b"x")], 1000), (None, b"w", (), 1005)],
                         base_timestamp=1000)
    (decoded,) = parse_record_batches(batch)
    assert decoded["crc_ok"] and decoded["count"] == 2
    assert decoded["records"] == [(0, 1000, b"k", b"v", [("h", b"x")]), (1, 1005, None, b"w", [])]
    corrupted = bytearray(batch)
    corrupted[-2] ^= 0xFF
    assert not parse_record_batches(bytes(corrupted))[0]["crc_ok"]
    print("wire.py self-checks OK")


if __name__ == "__main__":
    _selfcheck()
