"""Transactions (KIP-98, issue #17) with confluent-kafka (librdkafka) against one broker.

These tests check what a client sees of a transaction:
  * A transaction that spans two topics and four partitions: once committed, a read_committed
    consumer sees all of it, in produce order. Once aborted, it sees none of it. A
    read_uncommitted consumer sees every data record of both and never a control record.
    Each commit or abort marker takes one offset in every partition of its transaction.
  * An open transaction holds the last stable offset (LSO) at its first record. That is the
    high offset ListOffsets gives read_committed, and read_committed consumers stop there.
  * InitProducerId for a transactional id that is already in use aborts the open transaction
    and fences the old producer: its commit fails as fenced, which is fatal.
  * A transaction.timeout.ms above the broker's transaction.max.timeout.ms (Kafka's default
    is 900000) is refused with INVALID_TRANSACTION_TIMEOUT.
  * A producer that is restarted under the same transactional id finds the transaction it
    left open aborted on every partition it touched.

The transaction coordinator may write markers after EndTxn has been answered (Kafka does).
So a test waits for the LSO to reach its expected value before it reads with read_committed.
"""

import time

import confluent_kafka as ck
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from clients import ck_admin, ck_consumer, wait_until

T = 30  # seconds: every client call and wait in this module is bounded by it
FENCED = (KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.PRODUCER_FENCED)


def create_topics(bootstrap, names, partitions):
    admin = ck_admin(bootstrap)  # keep the handle alive until the futures resolve
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names],
                                  request_timeout=T)
    for f in futures.values():
        f.result(timeout=T)


def txn_producer(bootstrap, txn_id, extra=None):
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    conf.update(extra or {})
    return ck.Producer(conf)


def produce(producer, records):
    """Produces (topic, partition, value) records in order. Waits for every delivery report
    and fails on any delivery error. Returns the offsets in send order."""
    reports = [None] * len(records)
    for i, (topic, partition, value) in enumerate(records):
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, m, i=i: reports.__setitem__(
                             i, (err, None if err else m.offset())))
    left = producer.flush(T)
    assert left == 0, "%d records still undelivered after %d s" % (left, T)
    errors = [(i, r) for i, r in enumerate(reports) if r is None or r[0] is not None]
    assert not errors, "%d deliveries failed, first: %r" % (len(errors), errors[:3])
    return [offset for _err, offset in reports]


def consume_to_end(bootstrap, tps, isolation, settle=0.0, timeout=T):
    """Reads every (topic, partition) in tps from the beginning at `isolation` until each has
    reported its end (PARTITION_EOF: at the high watermark, or for read_committed at the last
    stable offset). It then keeps polling for `settle` more seconds.
    Returns {(topic, partition): [values]}. Any consume error other than EOF fails the test."""
    c = ck_consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True})
    got = {tp: [] for tp in tps}
    ended = set()

    def take(batch):
        for m in batch:
            err = m.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise AssertionError("%s consumer error on %s[%s]: %s"
                                         % (isolation, m.topic(), m.partition(), err))
                ended.add((m.topic(), m.partition()))
                continue
            got[(m.topic(), m.partition())].append(m.value())

    try:
        c.assign([ck.TopicPartition(t, p, ck.OFFSET_BEGINNING) for t, p in tps])
        deadline = time.monotonic() + timeout
        while len(ended) < len(tps):
            assert time.monotonic() < deadline, \
                "%s: the end of %r not reached within %d s (read %r)" % (
                    isolation, sorted(set(tps) - ended), timeout,
                    {tp: len(v) for tp, v in got.items()})
            take(c.consume(num_messages=1000, timeout=0.5))
        settled = time.monotonic() + settle
        while time.monotonic() < settled:
            left = max(0.0, settled - time.monotonic())
            take(c.consume(num_messages=1000, timeout=min(0.5, left)))
        return got
    finally:
        c.close()


def watermarks(bootstrap, tps, isolation):
    """{(topic, partition): (low, high)} from ListOffsets at `isolation`. For read_committed
    the high offset is the last stable offset."""
    c = ck_consumer(bootstrap, **{"isolation.level": isolation})
    try:
        return {(t, p): c.get_watermark_offsets(ck.TopicPartition(t, p), timeout=10, cached=False)
                for t, p in tps}
    finally:
        c.close()


def wait_for_stable(bootstrap, expected, timeout=T):
    """Waits until every partition's last stable offset is at its expected high offset, i.e.
    the last transaction's markers are in. `expected` maps (topic, partition) to (low, high)."""
    seen = {}

    def reached():
        seen["marks"] = watermarks(bootstrap, list(expected), "read_committed")
        return seen["marks"] == expected

    try:
        wait_until(reached, timeout=timeout, interval=0.2, message="the last stable offsets")
    except AssertionError:
        raise AssertionError("read_committed watermarks %r, expected %r"
                             % (seen.get("marks"), expected)) from None


@pytest.mark.timeout(150)
def test_committed_and_aborted_transactions_across_topics(shared_broker, topic_name):
    """One transaction commits 1000 records spread over two topics of 2 partitions each. A
    second transaction writes 1000 more to the same partitions and aborts. read_committed
    sees exactly the committed 1000, each partition's in produce order. read_uncommitted sees
    all 2000 data records and no control records. Each marker takes one offset: the committed
    records of a partition are at 0..249, its commit marker at 250, the aborted ones at
    251..500 and the abort marker at 501. Both isolation levels list (0, 502)."""
    bootstrap = shared_broker.bootstrap
    topics = [topic_name + "-a", topic_name + "-b"]
    create_topics(bootstrap, topics, 2)
    tps = [(t, p) for t in topics for p in range(2)]
    n = 1000
    per = n // len(tps)

    def where(i):
        return topics[i % 2], (i // 2) % 2

    committed = [(*where(i), b"committed-%04d" % i) for i in range(n)]
    aborted = [(*where(i), b"aborted-%04d" % i) for i in range(n)]

    p = txn_producer(bootstrap, topic_name + "-txn")
    p.init_transactions(T)
    p.begin_transaction()
    committed_offsets = produce(p, committed)
    p.commit_transaction(T)
    p.begin_transaction()
    aborted_offsets = produce(p, aborted)
    p.abort_transaction(T)

    for tp in tps:
        mine = [i for i in range(n) if where(i) == tp]
        assert [committed_offsets[i] for i in mine] == list(range(per)), tp
        assert [aborted_offsets[i] for i in mine] == list(range(per + 1, 2 * per + 1)), tp

    marks = {tp: (0, 2 * per + 2) for tp in tps}
    wait_for_stable(bootstrap, marks)
    assert watermarks(bootstrap, tps, "read_uncommitted") == marks

    want_committed = {tp: [v for t, q, v in committed if (t, q) == tp] for tp in tps}
    want_all = {tp: want_committed[tp] + [v for t, q, v in aborted if (t, q) == tp] for tp in tps}
    got = consume_to_end(bootstrap, tps, "read_committed")
    for tp in tps:
        assert got[tp] == want_committed[tp], "%s: read_committed read %d records, %d aborted" % (
            tp, len(got[tp]), sum(v.startswith(b"aborted") for v in got[tp]))
    got = consume_to_end(bootstrap, tps, "read_uncommitted")
    produced = {v for _t, _p, v in committed + aborted}
    strangers = [v for vs in got.values() for v in vs if v not in produced]
    assert not strangers, "records the test did not produce (control records?): %r" % strangers[:5]
    for tp in tps:
        assert got[tp] == want_all[tp], "%s: read_uncommitted read %d of %d records" % (
            tp, len(got[tp]), len(want_all[tp]))


def test_an_open_transaction_holds_back_read_committed_consumers(shared_broker, topic_name):
    """While a transaction with 10 records is open, the last stable offset stays at 0. So
    ListOffsets at read_committed answers a high offset of 0, and a read_committed consumer
    reads nothing (in 3 s). ListOffsets at read_uncommitted answers 10, and a read_uncommitted
    consumer reads the 10. After the commit the LSO and the high watermark are both 11 (the
    10 records and the commit marker), and read_committed reads all 10."""
    bootstrap = shared_broker.bootstrap
    create_topics(bootstrap, [topic_name], 1)
    tp = (topic_name, 0)
    values = [b"open-%d" % i for i in range(10)]

    p = txn_producer(bootstrap, topic_name + "-txn")
    p.init_transactions(T)
    p.begin_transaction()
    assert produce(p, [(topic_name, 0, v) for v in values]) == list(range(10))

    assert watermarks(bootstrap, [tp], "read_committed") == {tp: (0, 0)}, "LSO held at the open txn"
    assert watermarks(bootstrap, [tp], "read_uncommitted") == {tp: (0, 10)}
    assert consume_to_end(bootstrap, [tp], "read_committed", settle=3.0) == {tp: []}
    assert consume_to_end(bootstrap, [tp], "read_uncommitted") == {tp: values}

    p.commit_transaction(T)
    wait_for_stable(bootstrap, {tp: (0, 11)})
    assert watermarks(bootstrap, [tp], "read_uncommitted") == {tp: (0, 11)}
    assert consume_to_end(bootstrap, [tp], "read_committed") == {tp: values}


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(shared_broker,
                                                                          topic_name):
    """Producer A has an open transaction with 5 records. Producer B then calls
    init_transactions with the same transactional id. This aborts A's transaction (abort marker
    at offset 5) and bumps the epoch, so A's commit fails as fenced (PRODUCER_FENCED or
    INVALID_PRODUCER_EPOCH from the broker; librdkafka turns both into a fatal _FENCED). B's
    own transaction of 3 records is committed at offsets 6..8 (marker at 9). read_committed
    sees B's 3 and none of A's."""
    bootstrap = shared_broker.bootstrap
    create_topics(bootstrap, [topic_name], 1)
    tp = (topic_name, 0)
    txn_id = topic_name + "-txn"
    a_values = [b"a-%d" % i for i in range(5)]
    b_values = [b"b-%d" % i for i in range(3)]

    a = txn_producer(bootstrap, txn_id)
    a.init_transactions(T)
    a.begin_transaction()
    assert produce(a, [(topic_name, 0, v) for v in a_values]) == list(range(5))

    b = txn_producer(bootstrap, txn_id)
    b.init_transactions(T)

    with pytest.raises(ck.KafkaException) as raised:
        a.commit_transaction(T)
    err = raised.value.args[0]
    assert err.code() in FENCED, "A's commit failed with %s, not as fenced" % err
    assert err.fatal(), "fencing is fatal to the old producer: %s" % err
    del a

    b.begin_transaction()
    assert produce(b, [(topic_name, 0, v) for v in b_values]) == [6, 7, 8]
    b.commit_transaction(T)

    wait_for_stable(bootstrap, {tp: (0, 10)})
    assert watermarks(bootstrap, [tp], "read_uncommitted") == {tp: (0, 10)}
    assert consume_to_end(bootstrap, [tp], "read_committed") == {tp: b_values}
    assert consume_to_end(bootstrap, [tp], "read_uncommitted") == {tp: a_values + b_values}


def test_transaction_timeout_out_of_range_is_refused(shared_broker, topic_name):
    """InitProducerId with a transaction timeout above transaction.max.timeout.ms (900000 by
    default) is answered INVALID_TRANSACTION_TIMEOUT. librdkafka raises it from
    init_transactions as a fatal error. This holds just past the limit and at librdkafka's
    maximum (2147483647). The same transactional id then initialises at exactly the limit."""
    bootstrap = shared_broker.bootstrap
    txn_id = topic_name + "-txn"
    for timeout_ms in (900_001, 2_147_483_647):
        p = txn_producer(bootstrap, txn_id, {"transaction.timeout.ms": timeout_ms})
        with pytest.raises(ck.KafkaException) as raised:
            p.init_transactions(T)
        err = raised.value.args[0]
        assert err.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT, (timeout_ms, err)
        assert err.fatal(), (timeout_ms, err)
        del p
    p = txn_producer(bootstrap, txn_id, {"transaction.timeout.ms": 900_000})
    p.init_transactions(T)


def test_a_restarted_transactional_producer_finds_its_open_transaction_aborted(shared_broker,
                                                                              topic_name):
    """Producer A leaves a transaction open over two partitions (3 records in partition 0, 2
    in partition 1) and is never used again. A new producer with the same transactional id
    initialises. The broker aborts A's transaction, with an abort marker in each of the two
    partitions, and the new producer commits 2 records to partition 0 (offsets 4 and 5,
    marker at 6). read_committed sees exactly those 2. Partition 1's LSO moves past A's
    records to 3 although the new producer never wrote there."""
    bootstrap = shared_broker.bootstrap
    create_topics(bootstrap, [topic_name], 2)
    tps = [(topic_name, 0), (topic_name, 1)]
    txn_id = topic_name + "-txn"
    left_open = [(topic_name, i % 2, b"left-open-%d" % i) for i in range(5)]
    restarted = [(topic_name, 0, b"restarted-%d" % i) for i in range(2)]

    a = txn_producer(bootstrap, txn_id)
    a.init_transactions(T)
    a.begin_transaction()
    assert produce(a, left_open) == [0, 0, 1, 1, 2]
    # A is abandoned from here on: it is not closed, committed or aborted, and stays alive
    # until the end of the test, so only the broker can end its transaction.

    p = txn_producer(bootstrap, txn_id)
    p.init_transactions(T)
    p.begin_transaction()
    assert produce(p, restarted) == [4, 5]
    p.commit_transaction(T)

    marks = {tps[0]: (0, 7), tps[1]: (0, 3)}
    wait_for_stable(bootstrap, marks)
    assert watermarks(bootstrap, tps, "read_uncommitted") == marks
    assert consume_to_end(bootstrap, tps, "read_committed") == {
        tps[0]: [v for _t, _p, v in restarted], tps[1]: []}
    assert consume_to_end(bootstrap, tps, "read_uncommitted") == {
        tps[0]: [b"left-open-0", b"left-open-2", b"left-open-4"] + [v for _t, _p, v in restarted],
        tps[1]: [b"left-open-1", b"left-open-3"]}
    del a
