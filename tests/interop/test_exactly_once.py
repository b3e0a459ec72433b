"""Exactly-once across crashes (KIP-98, issue #17): a read-process-write loop killed with
SIGKILL at seeded random points, a transaction left hanging by a killed producer, and a broker
killed between a transaction's decision and its markers."""

import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import NewTopic

from clients import ck_admin, wait_until
from conftest import Broker, strata_bin

T = 30
ROUNDS = int(os.environ.get("STRATA_EOS_ROUNDS", "10"))
SEED = int(os.environ.get("SEED", "17"))

# The loop: consume `in` (read_committed, offsets from the group), write one `out` record per
# input and commit the consumed offsets inside each transaction. With `until` > 0 it exits once
# the group's committed offsets cover `until` inputs; otherwise it runs until killed.
LOOP = textwrap.dedent("""
    import sys, time
    import confluent_kafka as ck
    bootstrap, source, sink, group, txn_id, until = sys.argv[1:7]
    until = int(until)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                            "linger.ms": 2, "transaction.timeout.ms": 10000})
    producer.init_transactions(30)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "isolation.level": "read_committed", "enable.auto.commit": False,
                            "auto.offset.reset": "earliest"})
    parts = consumer.list_topics(source, timeout=30).topics[source].partitions
    tps = [ck.TopicPartition(source, p) for p in parts]
    committed = consumer.committed(tps, timeout=30)
    consumer.assign(committed)
    done = sum(max(tp.offset, 0) for tp in committed)
    print("start", done, flush=True)
    deadline = time.time() + 120
    while time.time() < deadline and (until <= 0 or done < until):
        msgs = [m for m in consumer.consume(5, 0.5) if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(sink, key=m.key(), value=m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        done += len(msgs)
        print("done", done, flush=True)
    consumer.close()
""")


def _consume_all(bootstrap, topic, partitions, isolation, deadline_s=T, want=0):
    """Every record of `topic` up to the end (EOF on every partition, and at least `want`
    records: a read_committed end moves once a transaction completes): {partition: [values]}."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-%f" % time.time(),
                            "isolation.level": isolation, "enable.auto.commit": False,
                            "enable.partition.eof": True})
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    out = {p: [] for p in range(partitions)}
    ended = set()
    deadline = time.time() + deadline_s
    while (len(ended) < partitions or sum(map(len, out.values())) < want) \
            and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                ended.add(m.partition())
                continue
            raise AssertionError("consume error: %s" % m.error())
        out[m.partition()].append(m.value())
        ended.discard(m.partition())
    consumer.close()
    assert len(ended) == partitions, "did not reach the end of %s within %d s: %r" % (
        topic, deadline_s, {p: len(v) for p, v in out.items()})
    return out


def _loop(bootstrap, source, sink, group, txn_id, until):
    return subprocess.Popen([sys.executable, "-c", LOOP, bootstrap, source, sink, group, txn_id,
                             str(until)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.timeout(400)
def test_read_process_write_holds_each_input_once_across_kill_9_of_the_loop(shared_broker,
                                                                           topic_name):
    """Issue #17, acceptance 3: the loop is SIGKILLed at seeded random points (ROUNDS rounds)
    and restarted with the same transactional id; its output, read_committed, holds every input
    exactly once, in each partition's order."""
    bootstrap = shared_broker.bootstrap
    source, sink = topic_name + "-in", topic_name + "-out"
    admin = ck_admin(bootstrap)
    for name in (source, sink):
        admin.create_topics([NewTopic(name, 2, 1)], request_timeout=T)[name].result(timeout=T)
    # Each round adds input, starts the loop on it and kills it once it has committed a
    # transaction (plus a random pause): the kill lands anywhere in the next transactions.
    per_round = 60
    n = per_round * ROUNDS
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                            "linger.ms": 20})
    rng = random.Random(SEED)
    group, txn_id = topic_name + "-group", topic_name + "-txn"
    for round_ in range(ROUNDS):
        for i in range(round_ * per_round, (round_ + 1) * per_round):
            producer.produce(source, value=b"%05d" % i, partition=i % 2)
        assert producer.flush(T) == 0
        loop = _loop(bootstrap, source, sink, group, txn_id, 0)
        lines = queue.Queue()
        threading.Thread(target=lambda out=loop.stdout: [lines.put(l) for l in out],
                         daemon=True).start()
        deadline = time.time() + T
        line = ""
        while time.time() < deadline and not line.startswith("done"):
            try:
                line = lines.get(timeout=max(deadline - time.time(), 0.01))
            except queue.Empty:
                break
        time.sleep(rng.uniform(0.0, 0.3))
        loop.send_signal(signal.SIGKILL)
        loop.wait(timeout=10)
    expected = {p: [b"%05d" % i for i in range(n) if i % 2 == p] for p in range(2)}
    finish = _loop(bootstrap, source, sink, group, txn_id, n)
    output, _ = finish.communicate(timeout=150)
    assert finish.returncode == 0, output
    got = _consume_all(bootstrap, sink, 2, "read_committed")
    for p in range(2):
        assert got[p] == expected[p], "partition %d: %d records, %d distinct, %d expected" % (
            p, len(got[p]), len(set(got[p])), len(expected[p]))


PRODUCE_AND_HANG = textwrap.dedent("""
    import sys, time
    import confluent_kafka as ck
    bootstrap, topic, txn_id = sys.argv[1:4]
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"hanging-%d" % i, partition=0)
    p.flush(30)
    print("produced", flush=True)
    time.sleep(600)
""")


@pytest.mark.timeout(120)
def test_a_transaction_left_open_by_a_killed_producer_is_aborted_at_its_timeout(shared_broker,
                                                                               topic_name):
    """Issue #17, acceptance 4: a producer killed inside its transaction leaves it open; the
    coordinator aborts it once transaction.timeout.ms (3 s) has passed (it checks every
    transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s): read_committed readers
    then get past it and never see its records."""
    bootstrap = shared_broker.bootstrap
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)], request_timeout=T)[topic_name].result(timeout=T)
    hanging = subprocess.Popen([sys.executable, "-c", PRODUCE_AND_HANG, bootstrap, topic_name,
                                topic_name + "-txn"], stdout=subprocess.PIPE, text=True)
    try:
        assert hanging.stdout.readline().startswith("produced")
    finally:
        hanging.send_signal(signal.SIGKILL)
        hanging.wait(timeout=10)
    committed_view = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name,
                                  "isolation.level": "read_committed"})
    uncommitted_view = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name,
                                    "isolation.level": "read_uncommitted"})
    tp = ck.TopicPartition(topic_name, 0)
    assert uncommitted_view.get_watermark_offsets(tp, timeout=T)[1] == 5
    assert committed_view.get_watermark_offsets(tp, timeout=T)[1] == 0, "held at the open txn"
    # Aborted: the marker takes offset 5 and the last stable offset passes it.
    wait_until(lambda: committed_view.get_watermark_offsets(tp, timeout=T)[1] == 6, timeout=40,
               message="the coordinator aborts the timed-out transaction")
    assert _consume_all(bootstrap, topic_name, 1, "read_committed") == {0: []}
    assert len(_consume_all(bootstrap, topic_name, 1, "read_uncommitted")[0]) == 5
    committed_view.close()
    uncommitted_view.close()


@pytest.mark.single_node
@pytest.mark.timeout(240)
def test_a_commit_decided_before_a_broker_crash_completes_after_the_restart(tmp_path, topic_name):
    """Issue #17, acceptance 4: the broker is SIGKILLed after the coordinator made the commit
    durable (PrepareCommit) and before any marker (STRATA_TEST_TXN_MARKER_DELAY_MS holds them
    back); after the restart the coordinator finds the transaction prepared, writes its markers
    and completes it: read_committed readers see every record."""
    os.environ["STRATA_TEST_TXN_MARKER_DELAY_MS"] = "60000"
    broker = Broker(strata_bin(), tmp_path / "broker")
    try:
        broker.start()
    finally:
        del os.environ["STRATA_TEST_TXN_MARKER_DELAY_MS"]
    try:
        bootstrap = broker.bootstrap
        admin = ck_admin(bootstrap)
        admin.create_topics([NewTopic(topic_name, 2, 1)], request_timeout=T)[topic_name].result(timeout=T)
        committer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import sys
            import confluent_kafka as ck
            bootstrap, topic = sys.argv[1:3]
            p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "crash-txn"})
            p.init_transactions(30)
            p.begin_transaction()
            for i in range(10):
                p.produce(topic, value=b"committed-%d" % i, partition=i % 2)
            p.flush(30)
            p.commit_transaction(120)
        """), bootstrap, topic_name], stdout=subprocess.PIPE, text=True)
        wait_until(lambda: "markers delayed" in broker.stderr_tail(200), timeout=60,
                   message="the commit is prepared")
        reader = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name,
                              "isolation.level": "read_committed"})
        tp = ck.TopicPartition(topic_name, 0)
        assert reader.get_watermark_offsets(tp, timeout=T)[1] == 0, "no marker yet"
        reader.close()
        broker.kill()
        committer.send_signal(signal.SIGKILL)
        committer.wait(timeout=10)
        broker.start()
        got = _consume_all(bootstrap, topic_name, 2, "read_committed", deadline_s=60, want=10)
        values = sorted(v for vs in got.values() for v in vs)
        assert values == sorted(b"committed-%d" % i for i in range(10)), values
    finally:
        broker.kill()


@pytest.mark.single_node
def test_aborted_transactions_stay_invisible_across_a_restart_and_segment_rolls(broker, topic_name):
    """Issue #17, acceptance 7: transactions committed and aborted in turn over several
    segments (segment.bytes 16 KiB); after a SIGKILL and a restart a read_committed consumer
    from the start still drops every aborted record (the aborted-transaction list is rebuilt
    from the producer snapshots and the log), and after DeleteRecords moves the log start
    past the first transactions, reading from the new start still does."""
    bootstrap = broker.bootstrap
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"segment.bytes": "16384"})],
                        request_timeout=T)[topic_name].result(timeout=T)
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name + "-txn"})
    p.init_transactions(T)
    committed = []
    for t in range(12):
        p.begin_transaction()
        values = [b"%s-%02d-%02d" % (b"c" if t % 2 == 0 else b"a", t, i) + b"x" * 500
                  for i in range(10)]
        for value in values:
            p.produce(topic_name, value=value, partition=0)
        p.flush(T)
        if t % 2 == 0:
            p.commit_transaction(T)
            committed += values
        else:
            p.abort_transaction(T)
    before = _consume_all(bootstrap, topic_name, 1, "read_committed")[0]
    assert before == committed
    broker.restart()
    after = _consume_all(bootstrap, topic_name, 1, "read_committed")[0]
    assert after == committed
    assert len(_consume_all(bootstrap, topic_name, 1, "read_uncommitted")[0]) == 120
    # Retention's DeleteRecords past the first four transactions (their data and markers).
    # Each transaction is 10 records and a marker (11 offsets): 44 is where the fifth begins.
    result = admin.delete_records([ck.TopicPartition(topic_name, 0, 44)], request_timeout=T)
    list(result.values())[0].result(timeout=T)
    trimmed = _consume_all(bootstrap, topic_name, 1, "read_committed")[0]
    assert trimmed == committed[20:], len(trimmed)


def test_strata_txn_list_describe_and_abort_a_hanging_transaction(shared_broker, topic_name):
    """`strata txn list|describe|abort` (kafka-transactions.sh's view): an open transaction is
    listed Ongoing with its producer, described with its partitions and age, and aborted by
    `abort` (its producer fenced), after which read_committed readers get past it."""
    bootstrap = shared_broker.bootstrap
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic_name, 2, 1)], request_timeout=T)[topic_name].result(timeout=T)
    txn_id = topic_name + "-txn"
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(T)
    p.begin_transaction()
    p.produce(topic_name, value=b"open", partition=1)
    p.flush(T)

    def strata(*args):
        out = subprocess.run([str(strata_bin()), "txn", *args, "--bootstrap", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    listed = [line.split() for line in strata("list").splitlines()]
    assert [txn_id, "Ongoing"] in [row[:2] for row in listed], listed
    described = strata("describe", txn_id)
    assert "state:             Ongoing" in described, described
    assert "partitions:        %s [1]" % topic_name in described, described
    assert "open for:" in described
    aborted = strata("abort", txn_id)
    assert "fenced" in aborted, aborted
    assert "CompleteAbort" in strata("describe", txn_id) or "Empty" in strata("describe", txn_id)
    reader = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name,
                          "isolation.level": "read_committed"})
    assert reader.get_watermark_offsets(ck.TopicPartition(topic_name, 1), timeout=T)[1] == 2
    reader.close()
    with pytest.raises(ck.KafkaException):
        p.commit_transaction(T)  # fenced by the abort


@pytest.mark.single_node
@pytest.mark.timeout(300)
def test_a_prepared_commit_completes_on_a_new_coordinator_when_the_old_one_is_killed(tmp_path,
                                                                                    topic_name):
    """Issue #17, acceptance 4 on three brokers: the transaction coordinator is SIGKILLed after
    the commit is durable in `__transaction_state` (replicated, RF=3) and before any marker;
    the broker that takes over its partition replays the prepared commit and writes the markers
    (to the partitions' new leaders where the dead broker led them): read_committed readers see
    every record. Own cluster, so skipped in the STRATA_INTEROP_CLUSTER run (single_node)."""
    from cluster import Cluster
    from test_replication import EXTRA, create_replicated
    os.environ["STRATA_TEST_TXN_MARKER_DELAY_MS"] = "120000"
    try:
        c = Cluster(tmp_path, extra=EXTRA).start()
    finally:
        del os.environ["STRATA_TEST_TXN_MARKER_DELAY_MS"]
    try:
        create_replicated(c.bootstrap, topic_name, 2)
        committer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import sys
            import confluent_kafka as ck
            bootstrap, topic = sys.argv[1:3]
            p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "failover-txn"})
            p.init_transactions(60)
            p.begin_transaction()
            for i in range(10):
                p.produce(topic, value=b"committed-%d" % i, partition=i % 2)
            p.flush(30)
            p.commit_transaction(200)
        """), c.bootstrap, topic_name], stdout=subprocess.PIPE, text=True)
        try:
            victim = wait_until(
                lambda: next((i for i, n in c.nodes.items()
                              if "markers delayed" in n.stderr_tail(300)), None),
                timeout=90, message="the commit is prepared on its coordinator")
            c.kill(victim)
        finally:
            committer.send_signal(signal.SIGKILL)
            committer.wait(timeout=10)
        survivors = ",".join("127.0.0.1:%d" % n.port for i, n in c.nodes.items() if i != victim)
        got = _consume_all(survivors, topic_name, 2, "read_committed", deadline_s=120, want=10)
        values = sorted(v for vs in got.values() for v in vs)
        assert values == sorted(b"committed-%d" % i for i in range(10)), (values, c.log_tails())
    finally:
        c.stop()


class _ExpiringBroker(Broker):
    """A broker that forgets idle transactional ids after 2 s (checked every 0.5 s)."""

    def command(self):
        return super().command() + [
            "--set", "transactional.id.expiration.ms=2000",
            "--set", "transaction.remove.expired.transaction.cleanup.interval.ms=500",
            "--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        ]


@pytest.mark.single_node
def test_an_idle_transactional_id_expires_and_starts_afresh(tmp_path, topic_name):
    """transactional.id.expiration.ms: an id with no open transaction and no request for that
    long is forgotten (a tombstone in __transaction_state, so it stays forgotten after a
    restart): DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND and the next producer with
    the id gets a new producer id at epoch 0. An id with an open transaction is not expired."""
    broker = _ExpiringBroker(strata_bin(), tmp_path / "broker")
    broker.start()
    try:
        bootstrap = broker.bootstrap
        admin = ck_admin(bootstrap)
        admin.create_topics([NewTopic(topic_name, 1, 1)], request_timeout=T)[topic_name].result(timeout=T)

        def describe(txn_id):
            out = subprocess.run([str(strata_bin()), "txn", "describe", txn_id, "--bootstrap",
                                  bootstrap], capture_output=True, text=True, timeout=60)
            return out.returncode, out.stdout + out.stderr

        idle = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "idle-txn"})
        idle.init_transactions(T)
        idle.begin_transaction()
        idle.produce(topic_name, value=b"v", partition=0)
        idle.commit_transaction(T)
        busy = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "busy-txn",
                            "transaction.timeout.ms": 60000})
        busy.init_transactions(T)
        busy.begin_transaction()
        busy.produce(topic_name, value=b"open", partition=0)
        busy.flush(T)
        code, text = describe("idle-txn")
        assert code == 0 and "CompleteCommit" in text, text
        wait_until(lambda: "TRANSACTIONAL_ID_NOT_FOUND" in describe("idle-txn")[1], timeout=20,
                   message="the idle id expires")
        code, text = describe("busy-txn")
        assert code == 0 and "Ongoing" in text, text
        broker.restart()
        assert "TRANSACTIONAL_ID_NOT_FOUND" in describe("idle-txn")[1]
        assert "Ongoing" in describe("busy-txn")[1]
    finally:
        broker.kill()
