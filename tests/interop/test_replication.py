"""Replication (issue #16): RF=3 partitions on three brokers. Followers copy their leader's
batches byte for byte over per-shard peer streams (Kafka's replica Fetch); the high watermark
is the minimum durable end over the ISR; acks=all waits for it; a follower stopped past
`replica.lag.time.max.ms` leaves the ISR and comes back after it catches up; with too few in-sync
replicas acks=all is refused (NOT_ENOUGH_REPLICAS, 19) and nothing refused becomes visible; a
killed leader's partitions move to an in-sync follower and nothing acknowledged is lost."""

import os
import random
import struct
import time
import zlib

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import Cluster, metadata_from, wait_for

pytestmark = pytest.mark.timeout(600)

LAG_MS = 3000


def create_replicated(bootstrap, name, partitions, min_isr=2):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, 3, config={"min.insync.replicas": str(min_isr)})
    admin.create_topics([topic])[name].result(30)


def placement(node, topic):
    """{partition: (leader, replicas, isr)} as Metadata v1 on `node` answers."""
    for t in metadata_from(node, [topic])["topics"]:
        if t["name"] == topic:
            return {p["partition"]: (p["leader"], sorted(p["replicas"]), sorted(p["isr"]))
                    for p in t["partitions"]}
    return {}


def produce(bootstrap, topic, values, **config):
    """Produces `values` (acks=all, idempotent unless told otherwise); returns
    {value: (partition, offset)} of those acknowledged and the errors of the rest."""
    settings = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                "linger.ms": 5, "message.timeout.ms": 30000}
    settings.update(config)
    producer = Producer(settings)
    acked, failed = {}, {}

    def report(error, message):
        if error is None:
            acked[message.value()] = (message.partition(), message.offset())
        else:
            failed[message.value()] = error

    for value in values:
        while True:
            try:
                producer.produce(topic, value, callback=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(120)
    return acked, failed


def read_all(bootstrap, topic, partitions, timeout=60):
    """Every record of every partition from the start to its end now: {(partition, offset): value}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-%d" % random.random(),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ends = {}
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        ends[p] = high
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = {}
    # The next offset to read per partition (not a count: a log whose start was moved by
    # DeleteRecords holds fewer records than its end offset).
    positions = {p: 0 for p in ends}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and any(positions[p] < ends[p] for p in ends):
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            key = (message.partition(), message.offset())
            positions[key[0]] = max(positions[key[0]], key[1] + 1)
            records[key] = message.value()
    finally:
        consumer.close()
    return records, ends


def batches_on_disk(data_dir, topic, partition):
    """The record batches in a partition's segment files, in order (after a clean stop)."""
    directory = data_dir / ("%s-%d" % (topic, partition))
    out = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        at = 0
        while at + 12 <= len(data):
            (length,) = struct.unpack(">i", data[at + 8:at + 12])
            if length <= 0 or at + 12 + length > len(data):
                break
            out.append(data[at:at + 12 + length])
            at += 12 + length
    return out


EXTRA = ["--set", "replica.lag.time.max.ms=%d" % LAG_MS,
         "--set", "broker.session.timeout.ms=6000",
         "--set", "broker.heartbeat.interval.ms=500"]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=EXTRA).start()
    yield c
    c.stop()


@pytest.fixture
def five_voters(tmp_path):
    """Brokers 1-3 (voters too) and two controller-only voters, 4 and 5: with two brokers
    frozen the quorum still has three of five voters, so the ISR can still change."""
    roles = {1: "broker,controller", 2: "broker,controller", 3: "broker,controller",
             4: "controller", 5: "controller"}
    c = Cluster(tmp_path, extra=EXTRA, roles=roles).start()
    yield c
    c.stop()


def test_followers_hold_the_leaders_batches_byte_for_byte(cluster):
    node = cluster.nodes[1]
    create_replicated(cluster.bootstrap, "copied", 4)
    wait_for(lambda: len(placement(node, "copied")) == 4, 30, "topic on node 1")
    layout = placement(node, "copied")
    assert all(replicas == [1, 2, 3] and isr == [1, 2, 3] for _, replicas, isr in layout.values()), layout
    assert {leader for leader, _, _ in layout.values()} == {1, 2, 3}
    values = [b"v-%06d" % i for i in range(3000)]
    # Unkeyed records go to one sticky partition per batch; with no stickiness each record
    # picks a partition at random, so all four hold batches.
    acked, failed = produce(cluster.bootstrap, "copied", values, **{"sticky.partitioning.linger.ms": 0})
    assert not failed and len(acked) == 3000
    records, ends = read_all(cluster.bootstrap, "copied", 4)
    assert sorted(records.values()) == sorted(values)
    assert sum(ends.values()) == 3000 and all(ends.values()), ends
    # Followers fetch over sessions (KIP-227): every node leads a partition the two others
    # follow, so each holds a session per follower.
    from test_acceptance import metrics
    for i, n in cluster.nodes.items():
        sessions = sum(v for k, v in metrics(n).items() if k.split("{")[0] == "strata_fetch_sessions")
        assert sessions >= 2, "node %d holds %d fetch sessions" % (i, sessions)
    cluster.stop()
    for p in range(4):
        copies = [batches_on_disk(n.data_dir, "copied", p) for n in cluster.nodes.values()]
        assert copies[0], "partition %d has no batches" % p
        assert copies[0] == copies[1] == copies[2], "replicas of partition %d differ" % p


def test_a_stopped_follower_leaves_the_isr_and_rejoins_and_too_few_refuse_acks_all(five_voters):
    cluster = five_voters
    node = cluster.nodes[1]
    create_replicated(cluster.bootstrap, "isr", 1)
    wait_for(lambda: placement(node, "isr").get(0), 30, "topic on node 1")
    leader, _, _ = placement(node, "isr")[0]
    followers = [n for n in (1, 2, 3) if n != leader]
    acked, failed = produce(cluster.bootstrap, "isr", [b"before-%d" % i for i in range(100)])
    assert len(acked) == 100 and not failed
    # One follower frozen past the lag time: it leaves the ISR, acks=all still succeeds.
    cluster.nodes[followers[0]].stop_process()
    try:
        wait_for(lambda: followers[0] not in placement(cluster.nodes[leader], "isr")[0][2],
                 LAG_MS / 1000 + 20, "the frozen follower leaves the ISR")
        acked, failed = produce(cluster.bootstrap, "isr", [b"one-down-%d" % i for i in range(100)])
        assert len(acked) == 100 and not failed, failed
        # Both frozen: the ISR is the leader alone, below min.insync.replicas=2.
        cluster.nodes[followers[1]].stop_process()
        wait_for(lambda: placement(cluster.nodes[leader], "isr")[0][2] == [leader],
                 LAG_MS / 1000 + 20, "the ISR shrinks to the leader")
        acked, failed = produce("127.0.0.1:%d" % cluster.nodes[leader].port, "isr",
                                [b"refused-%d" % i for i in range(20)],
                                **{"enable.idempotence": False, "retries": 0})
        assert not acked
        codes = {error.code() for error in failed.values()}
        assert codes == {19}, codes  # NOT_ENOUGH_REPLICAS
    finally:
        for f in followers:
            cluster.nodes[f].continue_process()
    wait_for(lambda: placement(cluster.nodes[leader], "isr")[0][2] == [1, 2, 3],
             LAG_MS / 1000 + 30, "the ISR expands again")
    records, _ = read_all(cluster.bootstrap, "isr", 1)
    values = set(records.values())
    assert not any(v.startswith(b"refused") for v in values)
    assert len([v for v in values if v.startswith(b"before") or v.startswith(b"one-down")]) == 200


def test_killing_leaders_loses_nothing_acknowledged(cluster):
    rounds = int(os.environ.get("STRATA_FAILOVER_ROUNDS", "10"))
    seed = int(os.environ.get("SEED", "16"))
    rng = random.Random(seed)
    create_replicated(cluster.bootstrap, "failover", 3)
    wait_for(lambda: len(placement(cluster.nodes[1], "failover")) == 3, 30, "topic on node 1")
    all_acked = {}
    for round_ in range(rounds):
        victim_partition = rng.randrange(3)
        live = next(n for n in cluster.nodes.values() if n.running())
        leader = placement(live, "failover")[victim_partition][0]
        values = [b"r%02d-%05d" % (round_, i) for i in range(1500)]
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 2,
                             "message.timeout.ms": 60000})
        acked = {}

        def report(error, message):
            if error is None:
                acked[message.value()] = (message.partition(), message.offset())

        kill_at = rng.randrange(200, 1200)
        for i, value in enumerate(values):
            if i == kill_at:
                producer.flush(0.2)
                cluster.kill(leader)
            while True:
                try:
                    producer.produce("failover", value, callback=report)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        producer.flush(90)
        assert len(acked) == len(values), "round %d: %d of %d acknowledged" % (
            round_, len(acked), len(values))
        all_acked.update(acked)
        cluster.nodes[leader].restart_after_kill()
        # Everyone back in sync before the next round.
        wait_for(lambda: all(isr == [1, 2, 3] for _, _, isr in placement(cluster.nodes[leader], "failover").values()),
                 60, "round %d: ISRs whole again" % round_)
        records, _ = read_all(cluster.bootstrap, "failover", 3)
        by_value = {}
        for place, value in records.items():
            assert value not in by_value, "round %d: %r at %r and %r" % (round_, value, by_value[value], place)
            by_value[value] = place
        lost = [v for v in all_acked if v not in by_value]
        assert not lost, "round %d (seed %d): %d acknowledged lost, e.g. %r" % (round_, seed, len(lost), lost[:3])
        moved = [v for v, place in all_acked.items() if by_value[v] != place]
        assert not moved, "round %d: %d records not at their acknowledged offsets" % (round_, len(moved))
    # Every replica holds the same batches: the shorter copies are prefixes of the longest.
    cluster.stop()
    for p in range(3):
        copies = [batches_on_disk(n.data_dir, "failover", p) for n in cluster.nodes.values()]
        longest = max(copies, key=len)
        for copy in copies:
            assert copy == longest[:len(copy)], "partition %d: replicas diverge" % p
            assert len(longest) - len(copy) <= 2, "partition %d: a replica is far behind" % p


def coordinator_of(bootstrap, group):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    return description.coordinator.id


def committed(bootstrap, group, topic, partitions):
    """The group's committed offsets (OffsetFetch, without joining the group)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=30)}
    finally:
        consumer.close()


def test_a_group_continues_on_a_new_coordinator_with_its_committed_offsets(cluster):
    """Kill -9 the broker coordinating a group: `__consumer_offsets` is replicated
    (offsets.topic.replication.factor=3), so a follower of the group's offsets partition
    becomes its coordinator, loads the group from the replicated log, and the member goes on
    from its committed offsets; no committed offset is lost."""
    create_replicated(cluster.bootstrap, "grouped", 3)
    values = [b"g-%05d" % i for i in range(3000)]
    acked, failed = produce(cluster.bootstrap, "grouped", values)
    assert len(acked) == 3000 and not failed
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "survivor",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000})
    consumer.subscribe(["grouped"])
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < 1500 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen.add(message.value())
    assert len(seen) >= 1500
    consumer.commit(asynchronous=False)
    before = committed(cluster.bootstrap, "survivor", "grouped", 3)
    assert sum(offset for offset in before.values() if offset >= 0) >= 1500, before
    victim = coordinator_of(cluster.bootstrap, "survivor")
    cluster.kill(victim)
    try:
        # A survivor coordinates the group now, with the offsets committed before the kill.
        survivors = ",".join("127.0.0.1:%d" % n.port for i, n in cluster.nodes.items() if i != victim)
        wait_for(lambda: coordinator_of(survivors, "survivor") != victim, 30, "a new coordinator")
        after = wait_for(lambda: (lambda c: c if all(o >= 0 for o in c.values()) or c == before else None)(
            committed(survivors, "survivor", "grouped", 3)), 30, "committed offsets on the new coordinator")
        assert after == before, (before, after)
        # The member goes on and reads the rest, then commits through the new coordinator.
        deadline = time.monotonic() + 90
        while len(seen) < 3000 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.add(message.value())
        assert seen == set(values), "read %d of 3000" % len(seen)
        consumer.commit(asynchronous=False)
        final = committed(survivors, "survivor", "grouped", 3)
        ends = {p: sum(1 for place in acked.values() if place[0] == p) for p in range(3)}
        assert all(final[p] == ends[p] or (ends[p] == 0 and final[p] < 0) for p in range(3)), (final, ends)
    finally:
        consumer.close()
        cluster.nodes[victim].restart_after_kill()


def test_sigterm_of_a_leader_under_acks_all_load_moves_leadership_first_and_loses_nothing(tmp_path):
    """Controlled shutdown with replicated data: SIGTERM the leader of RF=3 partitions while
    an idempotent acks=all producer runs. Its leaderships move to in-sync followers before it
    exits (the session timeout is 30 s, so fencing by silence cannot explain the move), every
    message is acknowledged and read exactly once, and after the restart a preferred election
    gives the partitions back to it."""
    from confluent_kafka import ElectionType
    import threading
    c = Cluster(tmp_path, extra=["--set", "broker.session.timeout.ms=30000",
                                 "--set", "broker.heartbeat.interval.ms=500",
                                 "--set", "auto.leader.rebalance.enable=false"]).start()
    try:
        create_replicated(c.bootstrap, "handover", 3)
        wait_for(lambda: len(placement(c.nodes[1], "handover")) == 3, 30, "topic on node 1")
        layout = placement(c.nodes[1], "handover")
        victim = layout[0][0]
        led = sorted(p for p, (leader, _, _) in layout.items() if leader == victim)
        values = [b"h-%05d" % i for i in range(6000)]
        acked, failed = {}, {}
        started = threading.Event()

        def run():
            producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 2,
                                 "message.timeout.ms": 60000})

            def report(error, message):
                (failed if error else acked)[message.value()] = error or (message.partition(), message.offset())

            for i, value in enumerate(values):
                if i == 1000:
                    started.set()
                while True:
                    try:
                        producer.produce("handover", value, callback=report)
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
                if i % 50 == 0:
                    time.sleep(0.005)
            producer.flush(90)

        thread = threading.Thread(target=run)
        thread.start()
        assert started.wait(60)
        code, clean = c.nodes[victim].terminate(grace=20)
        assert clean and code == 0, code
        survivor = next(n for i, n in c.nodes.items() if i != victim)
        now = placement(survivor, "handover")
        assert all(now[p][0] not in (victim, -1) for p in led), now
        assert all(victim not in now[p][2] for p in led), now
        thread.join(120)
        assert not failed, list(failed.items())[:3]
        assert len(acked) == len(values)
        c.nodes[victim].start()
        wait_for(lambda: all(isr == [1, 2, 3] for _, _, isr in placement(survivor, "handover").values()),
                 60, "the ISRs whole again")
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        result = admin.elect_leaders(ElectionType.PREFERRED,
                                     [TopicPartition("handover", p) for p in led]).result(30)
        assert all(error is None for error in result.values()), result
        wait_for(lambda: all(placement(survivor, "handover")[p][0] == victim for p in led),
                 15, "the preferred leader back")
        records, _ = read_all(c.bootstrap, "handover", 3)
        by_value = {}
        for place, value in records.items():
            assert value not in by_value, "%r twice" % value
            by_value[value] = place
        assert set(by_value) == set(values)
        assert all(by_value[v] == place for v, place in acked.items())
    finally:
        c.stop()
