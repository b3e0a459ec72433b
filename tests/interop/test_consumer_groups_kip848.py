"""KIP-848 consumer groups (issue #39) with confluent-kafka's `group.protocol=consumer`
(librdkafka's KIP-848 consumer): the broker assigns, members reconcile through
ConsumerGroupHeartbeat.

On a 3-node cluster with `__consumer_offsets` at RF=3: members join, leave, are killed (kill -9
of the client process) and come back, and the coordinator's node is killed, while every record
is read and committed one by one; every record is read, none is committed twice, a record is
read twice only when its first reader's commit failed or its reader was killed before the
commit's answer, and the group ends with every partition committed to its end. The `range`
assignor gives co-partitioned topics the same partition numbers on each member; a static member
that restarts within its session gets its partitions back without a new group epoch (both on
the 3-node cluster too). On one node, a live classic group upgrades to the consumer protocol
member by member and back, keeping its offsets."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import Cluster, wait_for
from conftest import strata_bin

pytestmark = pytest.mark.timeout(300)

# Short timeouts, so a killed member's partitions move in seconds.
GROUP_SETTINGS = ["--set", "group.consumer.session.timeout.ms=6000",
                  "--set", "group.consumer.heartbeat.interval.ms=500"]

# A member: reads one record at a time and commits it synchronously; prints `read P O` before
# the commit and `committed P O` or `failed P O` after; stops on SIGTERM with a clean close.
MEMBER = textwrap.dedent("""
    import signal, sys
    from confluent_kafka import Consumer, KafkaException
    bootstrap, topic, group, name, instance, assignor, protocol = sys.argv[1:8]
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": name}
    if protocol == "classic":
        conf.update({"partition.assignment.strategy": "cooperative-sticky",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    if instance != "-":
        conf["group.instance.id"] = instance
    if assignor != "-":
        conf["group.remote.assignor"] = assignor
    consumer = Consumer(conf)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    consumer.subscribe(topic.split(","))
    print("started", flush=True)
    while not stopping:
        message = consumer.poll(0.2)
        if message is None:
            parts = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
            print("assigned", ",".join("%s:%d" % p for p in parts), flush=True)
            continue
        if message.error():
            continue
        print("read", message.partition(), message.offset(), flush=True)
        try:
            consumer.commit(message=message, asynchronous=False)
            print("committed", message.partition(), message.offset(), flush=True)
        except KafkaException as error:
            print("failed", message.partition(), message.offset(), error, flush=True)
    consumer.close()
    print("closed", flush=True)
""")


class Member:
    def __init__(self, bootstrap, topic, group, name, instance="-", assignor="-", protocol="consumer"):
        self.name = name
        self.log_path = "/tmp/kip848-%s-%s.log" % (group, name)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MEMBER, bootstrap, topic, group, name, instance, assignor, protocol],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.killed = False

    def lines(self):
        with open(self.log_path) as f:
            return [line.split() for line in f if line.strip()]

    def assigned(self):
        """The member's last printed assignment, as a set of (topic, partition)."""
        last = [l for l in self.lines() if l[0] == "assigned"]
        if not last or len(last[-1]) < 2:
            return set()
        return {(t, int(p)) for t, p in (x.rsplit(":", 1) for x in last[-1][1].split(","))}

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.killed = True

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def produce(bootstrap, topic, count, start=0, partitions=12):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(60) == 0


def committed_count(members):
    """Records covered by the members' commits: per partition, one past the highest offset
    committed (a commit covers the records before it, so a failed commit of one record is
    made good by the next one's)."""
    ends = {}
    for m in members:
        for line in m.lines():
            if line[0] == "committed":
                partition, offset = int(line[1]), int(line[2])
                ends[partition] = max(ends.get(partition, 0), offset + 1)
    return sum(ends.values())


def check_exactly_once(members, ends):
    """Every record read; none committed twice; a record read twice only after its earlier
    read's commit failed or its reader was killed before the commit's answer."""
    reads, commits = {}, {}
    for m in members:
        lines = m.lines()
        for i, line in enumerate(lines):
            if line[0] not in ("read", "committed"):
                continue
            key = (int(line[1]), int(line[2]))
            if line[0] == "committed":
                commits.setdefault(key, []).append(m.name)
                continue
            after = [l for l in lines[i + 1:] if l[0] in ("committed", "failed", "read")]
            if after and after[0][0] == "committed":
                outcome = "committed"
            elif after and after[0][0] == "failed":
                outcome = "failed"
            else:
                outcome = "killed" if m.killed else "open"
            reads.setdefault(key, []).append((m.name, outcome))
    for partition, end in ends.items():
        for offset in range(end):
            key = (partition, offset)
            assert key in reads, "record %s never read" % (key,)
            assert len(commits.get(key, [])) <= 1, "record %s committed twice: %s" % (key, commits[key])
            committed_reads = [r for r in reads[key] if r[1] == "committed"]
            assert len(committed_reads) <= 1, "record %s read and committed twice: %s" % (key, reads[key])
            for name, outcome in reads[key][:-1]:
                assert outcome in ("failed", "killed"), (
                    "record %s read again after %s's read ended %s: %s" % (key, name, outcome, reads[key]))


def metric_sum(nodes, name):
    """`name` summed over every shard of every running node's /metrics."""
    import urllib.request
    total = 0.0
    for node in nodes:
        if not node.running():
            continue
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % node.admin_port, timeout=10).read().decode()
        total += sum(float(line.split()[-1]) for line in text.splitlines()
                     if line.startswith(name + "{") or line.startswith(name + " "))
    return total


def group_description(bootstrap, group):
    out = subprocess.run([strata_bin(), "group", "describe", "--bootstrap", bootstrap.split(",")[0],
                          group, "--format", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=["--set", "offsets.topic.replication.factor=3"] + GROUP_SETTINGS).start()
    yield c
    c.stop()


def test_a_consumer_group_reads_every_record_once_through_joins_leaves_kills_and_a_coordinator_kill(cluster):
    topic, group = "kip848-" + uuid.uuid4().hex[:8], "g-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 12, 3)])[topic].result(30)
    produce(cluster.bootstrap, topic, 1200)
    members = []
    try:
        start = lambda name: members.append(Member(cluster.bootstrap, topic, group, name)) or members[-1]
        a, b = start("a"), start("b")
        wait_for(lambda: committed_count(members) >= 200, 60, "two members consuming")
        c = start("c")  # joins a busy group
        wait_for(lambda: c.assigned(), 30, "the third member's assignment")
        wait_for(lambda: committed_count(members) >= 500, 60, "three members consuming")
        a.stop()  # leaves cleanly
        b.kill()  # crashes: its partitions move after the session timeout
        d = start("d")  # comes back
        wait_for(lambda: committed_count(members) >= 800, 90, "consuming after a leave and a kill")
        coordinator = group_description(cluster.bootstrap, group)
        assert coordinator["protocol"] == "consumer", coordinator
        described = admin.describe_consumer_groups([group])[group].result(30)
        victim = described.coordinator.id
        cluster.kill(victim)
        survivors = ",".join("127.0.0.1:%d" % n.kafka_port for i, n in cluster.nodes.items() if i != victim)
        produce(survivors, topic, 1200, start=1200)
        wait_for(lambda: committed_count(members) >= 2400, 120,
                 "every record committed after the coordinator's node was killed")
        ends = {p: 200 for p in range(12)}
        check_exactly_once(members, ends)
        # The group's committed offsets are at the end of every partition.
        probe = Consumer({"bootstrap.servers": survivors, "group.id": group})
        from confluent_kafka import TopicPartition
        committed = probe.committed([TopicPartition(topic, p) for p in range(12)], timeout=30)
        probe.close()
        assert all(tp.offset == 200 for tp in committed), committed
        alive = [m for m in members if m.proc.poll() is None]
        assert {m.name for m in alive} == {"c", "d"}
        # The two members settle on disjoint assignments covering all 12 partitions (a member
        # prints its assignment when a poll finds nothing, so the last line may lag a little).
        def settled():
            owned = [m.assigned() for m in alive]
            return not (owned[0] & owned[1]) and len(owned[0] | owned[1]) == 12
        wait_for(settled, 60, "two members owning all 12 partitions, disjointly")
    finally:
        for m in members:
            m.cleanup()


@pytest.fixture
def single(tmp_path):
    c = Cluster(tmp_path, size=1,
                extra=["--set", "offsets.topic.replication.factor=1"] + GROUP_SETTINGS).start()
    yield c
    c.stop()


def test_the_range_assignor_gives_co_partitioned_topics_the_same_partitions(cluster):
    topics = ["range-a-" + uuid.uuid4().hex[:6], "range-b-" + uuid.uuid4().hex[:6]]
    group = "range-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(t, 6, 3) for t in topics]).values():
        f.result(30)
    members = [Member(cluster.bootstrap, ",".join(topics), group, n, assignor="range") for n in "xyz"]
    try:
        def settled():
            owned = [m.assigned() for m in members]
            return sum(len(o) for o in owned) == 12 and all(len(o) == 4 for o in owned)
        wait_for(settled, 60, "three members with four partitions each")
        for m in members:
            by_topic = [{p for t, p in m.assigned() if t == topic} for topic in topics]
            assert by_topic[0] == by_topic[1], (m.name, m.assigned())
        described = group_description(cluster.bootstrap, group)
        assert described["consumer_group"]["assignor"] == "range", described
        nodes = cluster.nodes.values()
        assert metric_sum(nodes, "strata_consumer_group_rebalances_total") >= 3
        assert metric_sum(nodes, "strata_consumer_group_assignments_total") >= 3
        assert metric_sum(nodes, "strata_consumer_group_rebalances_completed_total") >= 1
        assert metric_sum(nodes, "strata_consumer_group_rebalance_microseconds_total") > 0
    finally:
        for m in members:
            m.cleanup()


def test_a_static_member_restarting_within_its_session_keeps_its_partitions_without_a_rebalance(cluster):
    topic, group = "static-" + uuid.uuid4().hex[:6], "static-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
    members = {n: Member(cluster.bootstrap, topic, group, n, instance="instance-" + n) for n in "pqr"}
    try:
        wait_for(lambda: all(len(m.assigned()) == 2 for m in members.values()), 60,
                 "three static members with two partitions each")
        before = group_description(cluster.bootstrap, group)["consumer_group"]
        held = members["q"].assigned()
        members["q"].stop()  # a static member's close leaves for now (epoch -2)
        members["q"] = Member(cluster.bootstrap, topic, group, "q2", instance="instance-q")
        wait_for(lambda: members["q"].assigned(), 30, "the restarted member's assignment")
        assert members["q"].assigned() == held
        after = group_description(cluster.bootstrap, group)["consumer_group"]
        assert after["group_epoch"] == before["group_epoch"], (before, after)
        assert {m["instance_id"] for m in after["members"]} == {"instance-p", "instance-q", "instance-r"}
    finally:
        for m in members.values():
            m.cleanup()


def test_a_live_group_upgrades_to_the_consumer_protocol_and_back_member_by_member(single):
    """A classic group (cooperative-sticky) whose members restart one by one with
    group.protocol=consumer becomes a consumer group while it consumes, its classic members
    served from the consumer group meanwhile; restarted one by one with the classic protocol
    it becomes classic again. Committed offsets stay, and every record is read once (twice only
    after a failed commit or a stopped reader)."""
    topic, group = "upgrade-" + uuid.uuid4().hex[:6], "upgrade-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": single.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    members, produced = [], [0]

    def more(count=150):
        produce(single.bootstrap, topic, count, start=produced[0], partitions=6)
        produced[0] += count

    def start(name, protocol):
        members.append(Member(single.bootstrap, topic, group, name, protocol=protocol))
        return members[-1]

    def protocol_of():
        return group_description(single.bootstrap, group)["protocol"]

    try:
        more()
        live = [start("c%d" % i, "classic") for i in range(3)]
        wait_for(lambda: committed_count(members) >= 150, 60, "the classic group consuming")
        assert protocol_of() == "classic"
        for step, protocol in enumerate(["consumer"] * 3 + ["classic"] * 3):
            leaving = live.pop(0)
            leaving.stop()
            live.append(start("%s%d" % (protocol[:3], step), protocol))
            more()
            wait_for(lambda: committed_count(members) >= produced[0], 60,
                     "every record committed after restart %d (%s)" % (step, protocol))
            owned = [m.assigned() for m in live]
            wait_for(lambda: sum(len(m.assigned()) for m in live) == 6, 60, "all partitions owned")
            if step == 0:
                assert protocol_of() == "consumer", "converted when the first consumer member joined"
            if step == 2:
                described = group_description(single.bootstrap, group)
                assert {m["client_id"] for m in described["consumer_group"]["members"]} == {"con0", "con1", "con2"}
        assert protocol_of() == "classic", "back to classic once the last consumer member left"
        nodes = single.nodes.values()
        assert metric_sum(nodes, "strata_classic_group_rebalances_total") >= 1
        assert metric_sum(nodes, "strata_classic_group_rebalance_microseconds_total") > 0
        check_exactly_once(members, {p: produced[0] // 6 for p in range(6)})
        probe = Consumer({"bootstrap.servers": single.bootstrap, "group.id": group})
        from confluent_kafka import TopicPartition
        committed = probe.committed([TopicPartition(topic, p) for p in range(6)], timeout=30)
        probe.close()
        assert all(tp.offset == produced[0] // 6 for tp in committed), committed
        del owned
    finally:
        for m in members:
            m.cleanup()
