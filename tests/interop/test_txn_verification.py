"""Partition verification (KIP-890 part 1, issue #17): the guard against hanging transactions.

A transactional batch whose producer has no transaction open on the partition would open
one. If the batch is late (its transaction already ended) or its producer never added the
partition (AddPartitionsToTxn), no marker would ever close it: the partition's last stable
offset (LSO) would hang, and read_committed consumers would stop there for good. With
`transaction.partition.verification.enable` (on by default, as in Kafka 3.6+), the partition
leader first asks the transaction coordinator. If the partition is not in the producer's
ongoing transaction, the batch is refused with INVALID_TXN_STATE, and a fenced epoch with
INVALID_PRODUCER_EPOCH.

The tests speak the protocol on raw sockets (wire.py). A client would never send these
batches, which is the point. On a cluster (STRATA_INTEROP_CLUSTER=3), the partition is chosen
on a broker other than the transaction's coordinator, so its leader verifies with
AddPartitionsToTxn v4 `verify_only` across brokers. The last test turns verification off and
shows the hanging LSO it prevents: the same late batch is accepted there, and the LSO stays
behind.
"""

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import NewTopic

import wire
from clients import ck_admin, ck_consumer, wait_until
from conftest import CLUSTER_SIZE, Broker, strata_bin

T = 30  # seconds: every call and wait here is bounded by it

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 10, 22, 24, 26
ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT = 25, 28
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49
PRODUCER_FENCED = 90
# Answers a coordinator gives while it loads or moves: asked again.
RETRIABLE = {14, 15, 16, 51}
TRANSACTIONAL = 0x10  # record batch attribute bit


def request(api_key, version, body, correlation_id=1):
    header = (wire.request_header_v2 if (api_key, version) == (ADD_PARTITIONS_TO_TXN, 4)
              else wire.request_header_v1)
    return wire.frame(header(api_key, version, correlation_id) + body)


def call(address, frame):
    host, port = address
    with wire.connect(port, T, host) as s:
        s.sendall(frame)
        _, body = wire.read_response(s, T)
        return wire.Reader(body)


def find_coordinator(bootstrap, key, key_type=1):
    """(host, port) of a transaction coordinator (FindCoordinator v1, key type 1) or a group
    coordinator (key type 0)."""
    found = {}

    def ask():
        r = call(bootstrap, request(FIND_COORDINATOR, 1, wire.string(key) + wire.i8(key_type)))
        r.i32()
        error, _message, _node = r.i16(), r.string(), r.i32()
        host, port = r.string(), r.i32()
        assert error in RETRIABLE | {0}, "FindCoordinator: error %d" % error
        found["at"] = (host, port)
        return error == 0

    wait_until(ask, timeout=T, interval=0.3, message="the coordinator of %s" % key)
    return found["at"]


def with_retries(what, attempt):
    """Calls attempt() -> (code, value) until the code is not a coordinator's retriable one."""
    seen = {}

    def once():
        seen["code"], seen["value"] = attempt()
        return seen["code"] not in RETRIABLE

    wait_until(once, timeout=T, interval=0.3, message=what)
    return seen["code"], seen["value"]


def init_producer_id(coordinator, txn_id):
    def attempt():
        r = call(coordinator, request(INIT_PRODUCER_ID, 1, wire.string(txn_id) + wire.i32(60000)))
        r.i32()
        return r.i16(), (r.i64(), r.i16())

    code, ids = with_retries("InitProducerId", attempt)
    assert code == 0, "InitProducerId: error %d" % code
    return ids


def add_partitions(coordinator, txn_id, pid, epoch, topic, partitions):
    body = (wire.string(txn_id) + wire.i64(pid) + wire.i16(epoch)
            + wire.array([wire.string(topic) + wire.array([wire.i32(p) for p in partitions])]))

    def attempt():
        r = call(coordinator, request(ADD_PARTITIONS_TO_TXN, 1, body))
        r.i32()
        codes = {p: e for _name, results in r.array(lambda r: (r.string(), r.array(
            lambda r: (r.i32(), r.i16())))) for p, e in results}
        return max(codes.values()), codes

    return with_retries("AddPartitionsToTxn", attempt)[1]


def end_txn(coordinator, txn_id, pid, epoch, commit):
    body = wire.string(txn_id) + wire.i64(pid) + wire.i16(epoch) + wire.i8(1 if commit else 0)

    def attempt():
        r = call(coordinator, request(END_TXN, 1, body))
        r.i32()
        return r.i16(), None

    return with_retries("EndTxn", attempt)[0]


def add_offsets(coordinator, txn_id, pid, epoch, group):
    body = wire.string(txn_id) + wire.i64(pid) + wire.i16(epoch) + wire.string(group)

    def attempt():
        r = call(coordinator, request(ADD_OFFSETS_TO_TXN, 1, body))
        r.i32()
        return r.i16(), None

    return with_retries("AddOffsetsToTxn", attempt)[0]


def txn_offset_commit(group_coordinator, txn_id, group, pid, epoch, topic, partition, offset):
    """TxnOffsetCommit v0 of one offset -> its error code."""
    partitions = [wire.i32(partition) + wire.i64(offset) + wire.string(None)]
    body = (wire.string(txn_id) + wire.string(group) + wire.i64(pid) + wire.i16(epoch)
            + wire.array([wire.string(topic) + wire.array(partitions)]))

    def attempt():
        r = call(group_coordinator, request(TXN_OFFSET_COMMIT, 0, body))
        r.i32()
        codes = [e for _name, parts in r.array(lambda r: (r.string(), r.array(
            lambda r: (r.i32(), r.i16())))) for _p, e in parts]
        return codes[0], None

    return with_retries("TxnOffsetCommit", attempt)[0]


def verify_only(coordinator, txn_id, pid, epoch, topic, partitions):
    """AddPartitionsToTxn v4 with verify_only, as a partition leader sends it:
    -> (top-level error, {partition: code})."""
    compact_array = lambda items: wire.uvarint(len(items) + 1) + b"".join(items)
    tags = wire.EMPTY_TAGGED_FIELDS
    topics = compact_array([wire.compact_string(topic)
                            + compact_array([wire.i32(p) for p in partitions]) + tags])
    transaction = (wire.compact_string(txn_id) + wire.i64(pid) + wire.i16(epoch) + wire.i8(1)
                   + topics + tags)
    r = call(coordinator, request(ADD_PARTITIONS_TO_TXN, 4, compact_array([transaction]) + tags))
    r.skip_tagged_fields()  # response header v1
    r.i32()
    error = r.i16()
    compact_string = lambda r: r.raw(r.uvarint() - 1).decode()

    def partition(r):
        p, e = r.i32(), r.i16()
        r.skip_tagged_fields()
        return p, e

    def topic_result(r):
        name, results = compact_string(r), r.compact_array(partition)
        r.skip_tagged_fields()
        return name, results

    def transaction_result(r):
        txn, topics = compact_string(r), r.compact_array(topic_result)
        r.skip_tagged_fields()
        return txn, topics

    results = r.compact_array(transaction_result) or []
    codes = {p: e for txn, topics in results if txn == txn_id
             for _name, parts in (topics or []) for p, e in (parts or [])}
    return error, codes


def produce_txn(leader, txn_id, topic, partition, pid, epoch, sequence, values):
    """A transactional batch (Produce v3) -> error code."""
    batch = wire.record_batch([(None, v) for v in values], attributes=TRANSACTIONAL,
                              producer_id=pid, producer_epoch=epoch, base_sequence=sequence)
    topics = [wire.string(topic) + wire.array([wire.i32(partition) + wire.bytes_(batch)])]
    body = wire.string(txn_id) + wire.i16(-1) + wire.i32(10000) + wire.array(topics)
    out = None
    r = call(leader, request(wire.PRODUCE, 3, body))
    for _name, parts in r.array(lambda r: (r.string(), r.array(
            lambda r: (r.i32(), r.i16(), r.i64(), r.i64())))):
        for p, error, _base, _time in parts:
            if p == partition:
                out = error
    assert out is not None, "no answer for %s[%d]" % (topic, partition)
    return out


def leaders(bootstrap, topic):
    """{partition: (host, port)} of the topic's leaders, and the broker addresses by id."""
    r = call(bootstrap, wire.metadata_v1_request(1, [topic]))
    md = wire.parse_metadata_v1_response(r.raw(r.remaining()))
    brokers = {node: (host, port) for node, host, port, _rack in md["brokers"]}
    (t,) = md["topics"]
    return {p["partition"]: brokers[p["leader"]] for p in t["partitions"]
            if p["leader"] in brokers}


def marks(bootstrap, topic, partition, isolation):
    c = ck_consumer(bootstrap, **{"isolation.level": isolation})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=10,
                                       cached=False)
    finally:
        c.close()


def stable(bootstrap, topic, partition):
    """(last stable offset, high watermark)."""
    return (marks(bootstrap, topic, partition, "read_committed")[1],
            marks(bootstrap, topic, partition, "read_uncommitted")[1])


def create_topic(bootstrap, name, partitions):
    admin = ck_admin(bootstrap)
    for f in admin.create_topics([NewTopic(name, partitions, -1)], request_timeout=T).values():
        f.result(timeout=T)


def address(bootstrap):
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def setup(bootstrap, topic_name, txn_id):
    """Creates a 3-partition topic; -> (coordinator, partition, its leader), the partition
    led by another broker than the coordinator where there is one."""
    create_topic(bootstrap, topic_name, 3)
    coordinator = find_coordinator(address(bootstrap), txn_id)
    led = wait_until(lambda: (lambda l: l if len(l) == 3 else None)(
        leaders(address(bootstrap), topic_name)), timeout=T, message="leaders")
    elsewhere = [p for p, at in sorted(led.items()) if at != coordinator]
    partition = elsewhere[0] if elsewhere else 0
    return coordinator, partition, led[partition]


@pytest.mark.timeout(120)
def test_a_batch_outside_the_ongoing_transaction_is_refused_and_nothing_hangs(
        shared_broker, topic_name):
    bootstrap = shared_broker.bootstrap
    txn_id = "verify-" + topic_name
    coordinator, p, leader = setup(bootstrap, topic_name, txn_id)
    if CLUSTER_SIZE >= 2:
        assert leader != coordinator, "the partition should be led away from the coordinator"
    pid, epoch = init_producer_id(coordinator, txn_id)

    # A batch for a partition the producer never added is refused: no transaction opens.
    assert produce_txn(leader, txn_id, topic_name, p, pid, epoch, 0, [b"stray"]) \
        == INVALID_TXN_STATE
    assert stable(bootstrap, topic_name, p) == (0, 0)

    # Added, it is taken; the coordinator confirms it (and only it) when asked as a leader
    # asks.
    other = (p + 1) % 3
    assert add_partitions(coordinator, txn_id, pid, epoch, topic_name, [p]) == {p: 0}
    assert produce_txn(leader, txn_id, topic_name, p, pid, epoch, 0, [b"in-txn"]) == 0
    assert verify_only(coordinator, txn_id, pid, epoch, topic_name, [p, other]) \
        == (0, {p: 0, other: INVALID_TXN_STATE})
    assert stable(bootstrap, topic_name, p) == (0, 1), "the open transaction holds the LSO"

    # Aborted (its marker takes offset 1), the transaction is over...
    assert end_txn(coordinator, txn_id, pid, epoch, commit=False) == 0
    wait_until(lambda: stable(bootstrap, topic_name, p) == (2, 2), timeout=T,
               message="the abort marker")
    assert verify_only(coordinator, txn_id, pid, epoch, topic_name, [p]) \
        == (0, {p: INVALID_TXN_STATE})
    # ... so a late batch of it (the next sequence, as a delayed retry would carry) is refused
    # instead of opening a transaction no marker will ever close.
    assert produce_txn(leader, txn_id, topic_name, p, pid, epoch, 1, [b"late"]) \
        == INVALID_TXN_STATE
    time.sleep(0.5)
    assert stable(bootstrap, topic_name, p) == (2, 2), "the LSO must not hang"

    # A fenced epoch (a newer producer took the id) is INVALID_PRODUCER_EPOCH for the batch,
    # PRODUCER_FENCED for the verification question (v4); an unknown producer id is
    # INVALID_PRODUCER_ID_MAPPING.
    _pid, new_epoch = init_producer_id(coordinator, txn_id)
    assert new_epoch == epoch + 1
    assert produce_txn(leader, txn_id, topic_name, p, pid, epoch, 1, [b"zombie"]) \
        == INVALID_PRODUCER_EPOCH
    assert verify_only(coordinator, txn_id, pid, epoch, topic_name, [p]) \
        == (0, {p: PRODUCER_FENCED})
    assert verify_only(coordinator, txn_id, pid + 1000, new_epoch, topic_name, [p]) \
        == (0, {p: INVALID_PRODUCER_ID_MAPPING})
    assert stable(bootstrap, topic_name, p) == (2, 2)

    # The new producer's own transaction on the partition goes through.
    assert add_partitions(coordinator, txn_id, pid, new_epoch, topic_name, [p]) == {p: 0}
    assert produce_txn(leader, txn_id, topic_name, p, pid, new_epoch, 0, [b"new"]) == 0
    # Transactional offsets are verified the same way: the group's __consumer_offsets
    # partition must be in the transaction (AddOffsetsToTxn) first.
    group = "verify-group-" + topic_name
    group_coordinator = find_coordinator(address(bootstrap), group, key_type=0)
    assert txn_offset_commit(group_coordinator, txn_id, group, pid, new_epoch, topic_name, p,
                             1) == INVALID_TXN_STATE
    assert add_offsets(coordinator, txn_id, pid, new_epoch, group) == 0
    assert txn_offset_commit(group_coordinator, txn_id, group, pid, new_epoch, topic_name, p,
                             1) == 0
    assert end_txn(coordinator, txn_id, pid, new_epoch, commit=True) == 0
    wait_until(lambda: stable(bootstrap, topic_name, p) == (4, 4), timeout=T,
               message="the commit marker")


class _UnverifiedBroker(Broker):
    def command(self):
        return super().command() + ["--set", "transaction.partition.verification.enable=false"]


@pytest.mark.single_node
@pytest.mark.timeout(90)
def test_without_verification_a_late_batch_leaves_the_lso_hanging(tmp_path, topic_name):
    b = _UnverifiedBroker(strata_bin(), tmp_path / "broker").start()
    try:
        bootstrap = b.bootstrap
        txn_id = "unverified-" + topic_name
        coordinator, p, leader = setup(bootstrap, topic_name, txn_id)
        pid, epoch = init_producer_id(coordinator, txn_id)
        assert add_partitions(coordinator, txn_id, pid, epoch, topic_name, [p]) == {p: 0}
        assert produce_txn(leader, txn_id, topic_name, p, pid, epoch, 0, [b"in-txn"]) == 0
        assert end_txn(coordinator, txn_id, pid, epoch, commit=False) == 0
        wait_until(lambda: stable(bootstrap, topic_name, p) == (2, 2), timeout=T,
                   message="the abort marker")
        # The late batch is taken, and opens a transaction nothing will end.
        assert produce_txn(leader, txn_id, topic_name, p, pid, epoch, 1, [b"late"]) == 0
        time.sleep(0.5)
        assert stable(bootstrap, topic_name, p) == (2, 3)
    finally:
        b.kill()


@pytest.mark.skipif(CLUSTER_SIZE < 2, reason="a cluster creates __transaction_state with "
                    "transaction.state.log.min.isr; a single node's has one replica")
def test_a_cluster_creates_transaction_state_with_its_min_isr(shared_broker, topic_name):
    bootstrap = shared_broker.bootstrap
    find_coordinator(address(bootstrap), "min-isr-" + topic_name)  # creates the topic
    admin = ck_admin(bootstrap)
    resource = ck.admin.ConfigResource("topic", "__transaction_state")
    (future,) = admin.describe_configs([resource], request_timeout=T).values()
    configs = future.result(timeout=T)
    assert configs["min.insync.replicas"].value == "2"  # Kafka's default, below RF 3
