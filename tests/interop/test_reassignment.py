"""Reassignment (issue #16): AlterPartitionReassignments, ListPartitionReassignments and
`strata topic move` on three real brokers. A partition moves from brokers [1, 2] to [2, 3]
while an acks=all producer writes to it: the new replica copies the log and joins the ISR,
then the controller finishes the move (the replicas become the target, the leaving leader
hands over) and broker 1 deletes its copy. Every acknowledged record is read once at its
offset, and the replicas hold identical batches. A move that cannot finish (its new replica
is frozen) is listed as running and can be cancelled; bad targets get Kafka's errors."""

import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import Cluster, metadata_from, wait_for
from conftest import strata_bin
from test_replication import batches_on_disk, read_all

pytestmark = pytest.mark.timeout(300)

EXTRA = ["--set", "broker.session.timeout.ms=6000", "--set", "broker.heartbeat.interval.ms=500"]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=EXTRA).start()
    yield c
    c.stop()


def strata(*args, check=True):
    out = subprocess.run([str(strata_bin()), *args], capture_output=True, text=True, timeout=120)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def metric(node, name):
    """An unlabelled gauge from the node's /metrics."""
    import urllib.request
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % node.admin_port, timeout=10).read()
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no %s in /metrics" % name)


def layout(node, topic):
    """(leader, replicas in order, isr sorted) of partition 0 as `node` answers."""
    for t in metadata_from(node, [topic])["topics"]:
        if t["name"] == topic:
            for p in t["partitions"]:
                if p["partition"] == 0:
                    return p["leader"], list(p["replicas"]), sorted(p["isr"])
    return None


def create_on(bootstrap, topic, replicas):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, 1, replica_assignment=[replicas], config={"min.insync.replicas": "1"})
    admin.create_topics([new])[topic].result(30)


class Writer(threading.Thread):
    """An idempotent acks=all producer writing `count` records as fast as they are acked."""

    def __init__(self, bootstrap, topic, prefix, count):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.prefix, self.count = bootstrap, topic, prefix, count
        self.acked, self.failed = {}, {}

    def run(self):
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 60000})

        def report(error, message):
            if error is None:
                self.acked[message.value()] = message.offset()
            else:
                self.failed[message.value()] = error

        for i in range(self.count):
            value = b"%s-%06d" % (self.prefix, i)
            while True:
                try:
                    producer.produce(self.topic, value, partition=0, callback=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if i % 100 == 99:
                time.sleep(0.02)  # spread the writes over the move
        producer.flush(90)


def test_a_partition_moves_to_other_brokers_under_load_and_loses_nothing(cluster):
    topic = "moved"
    create_on(cluster.bootstrap, topic, [1, 2])
    node2 = cluster.nodes[2]
    wait_for(lambda: (layout(node2, topic) or (None,))[0] == 1, 30, "the topic led by 1")
    before = Writer(cluster.bootstrap, topic, b"before", 2000)
    before.run()
    assert len(before.acked) == 2000 and not before.failed
    # The log starts at 1000 now (inside a batch, most likely): the new replica, empty, is
    # below the leader's range and must start again at its log start.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deleted = admin.delete_records([TopicPartition(topic, 0, 1000)], request_timeout=30)
    for future in deleted.values():
        assert future.result(30).low_watermark == 1000

    during = Writer(cluster.bootstrap, topic, b"during", 3000)
    during.start()
    time.sleep(0.5)
    moved = strata("topic", "move", topic, "-p", "0", "--to", "2,3", "--wait", "90",
                   "-b", cluster.bootstrap)
    assert "moved %s-0" % topic in moved.stdout, moved.stdout
    during.join(120)
    assert not during.is_alive()
    assert len(during.acked) == 3000 and not during.failed, during.failed

    leader, replicas, isr = layout(node2, topic)
    assert (replicas, isr) == ([2, 3], [2, 3]), (leader, replicas, isr)
    assert leader == 2, "the first in-sync target replica leads after 1 leaves"
    wait_for(lambda: not (cluster.nodes[1].data_dir / ("%s-0" % topic)).exists(), 30,
             "broker 1 deletes the copy it no longer holds")

    records, ends = read_all(cluster.bootstrap, topic, 1)
    by_value = {}
    for (_, offset), value in records.items():
        assert value not in by_value, "%r at %d and %d" % (value, by_value[value], offset)
        by_value[value] = offset
    acked = {v: o for v, o in before.acked.items() if o >= 1000}
    acked.update(during.acked)
    lost = [v for v in acked if v not in by_value]
    assert not lost, "%d acknowledged records lost, e.g. %r" % (len(lost), lost[:3])
    moved_offsets = [v for v, offset in acked.items() if by_value[v] != offset]
    assert not moved_offsets, "%d records not at their acknowledged offsets" % len(moved_offsets)
    assert ends[0] == 5000

    cluster.stop()
    old, new = [batches_on_disk(cluster.nodes[n].data_dir, topic, 0) for n in (2, 3)]
    # Broker 3 holds the leader's batches from the one holding offset 1000 on.
    assert new and struct.unpack(">q", new[0][:8])[0] <= 1000, "broker 3 starts past 1000"
    assert old[len(old) - len(new):] == new, "the new replica's batches differ"


def test_a_move_that_cannot_finish_is_listed_and_cancelled_and_bad_targets_are_refused(cluster):
    # The replica to add is frozen (SIGSTOP), so the move cannot finish. It must not be the
    # controller leader: a frozen leader holds up every metadata change until it is voted out.
    wait_for(lambda: sum(metric(n, "strata_controller_is_leader") for n in cluster.nodes.values()) == 1,
             30, "one controller leader")
    leader_node = next(i for i, n in cluster.nodes.items() if metric(n, "strata_controller_is_leader"))
    frozen = next(i for i in (3, 2, 1) if i != leader_node)
    a, b_ = [i for i in (1, 2, 3) if i != frozen]
    topic = "stuck"
    create_on(cluster.bootstrap, topic, [a, b_])
    first = cluster.nodes[a]
    wait_for(lambda: (layout(first, topic) or (None,))[0] == a, 30, "the topic led by %d" % a)
    writer = Writer(cluster.bootstrap, topic, b"v", 500)
    writer.run()
    assert len(writer.acked) == 500

    b = cluster.bootstrap
    bad = strata("topic", "move", topic, "-p", "0", "--to", "%d,9" % a, "-b", b, check=False)
    assert bad.returncode != 0 and "INVALID_REPLICA_ASSIGNMENT" in bad.stderr, bad.stderr
    bad = strata("topic", "move", topic, "-p", "0", "--to", "%d,%d" % (a, a), "-b", b, check=False)
    assert bad.returncode != 0 and "INVALID_REPLICA_ASSIGNMENT" in bad.stderr, bad.stderr
    none = strata("topic", "move", topic, "-p", "0", "--cancel", "-b", b, check=False)
    assert none.returncode != 0 and "NO_REASSIGNMENT_IN_PROGRESS" in none.stderr, none.stderr
    unknown = strata("topic", "move", topic, "-p", "7", "--to", "1,2", "-b", b, check=False)
    assert unknown.returncode != 0 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr, unknown.stderr

    stopped = cluster.nodes[frozen]
    stopped.stop_process()
    target = "%d,%d" % (frozen, a)
    try:
        strata("topic", "move", topic, "-p", "0", "--to", target, "-b", b)
        running = strata("topic", "move", topic, "-p", "0", "--to", target, "--wait", "3",
                         "-b", b, check=False)
        # ListPartitionReassignments: the full replica list, the frozen one being added, the
        # other old replica being removed.
        assert running.returncode != 0, running.stdout
        listed = "replicas [%d, %d, %d], adding [%d], removing [%d]" % (frozen, a, b_, frozen, b_)
        assert listed in running.stderr, running.stderr
        assert layout(first, topic) == (a, [frozen, a, b_], sorted([a, b_]))
        assert metric(first, "strata_partitions_reassigning") == 1
        strata("topic", "move", topic, "-p", "0", "--cancel", "--wait", "30", "-b", b)
        assert layout(first, topic) == (a, [a, b_], sorted([a, b_]))
        assert metric(first, "strata_partitions_reassigning") == 0
    finally:
        stopped.continue_process()
    # The frozen broker never keeps a copy of the cancelled move.
    wait_for(lambda: not (stopped.data_dir / ("%s-0" % topic)).exists(), 30,
             "broker %d deletes the partition the cancelled move gave it" % frozen)
    records, ends = read_all(b, topic, 1)
    assert ends[0] == 500 and len(set(records.values())) == 500
