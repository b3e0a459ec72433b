"""A three-node strata cluster on loopback ports (issue #15): every node broker,controller
and a voter of the Raft controller quorum. Clients see every broker and the controller,
partitions are led across the brokers, the quorum survives the loss of its leader, and a
metadata change the quorum acknowledged survives kill -9 of every node."""

import re
import subprocess
import threading
import time

import kafka
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import wire
from cluster import Cluster, broker_ids, create, metadata_from, partitions_of, wait_for

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path).start()
    yield c
    c.stop()




def controller_of(node):
    return metadata_from(node)["controller"]


def _views(nodes):
    """{node: (brokers, controller)} as each node answers Metadata, or the error it gave."""
    views = {}
    for node_id, node in nodes.items():
        try:
            views[node_id] = (broker_ids(node), controller_of(node))
        except Exception as error:  # noqa: BLE001 - a diagnostic, never the assertion
            views[node_id] = repr(error)
    return views


def leaders(node, topic):
    for t in metadata_from(node, [topic])["topics"]:
        if t["name"] == topic and t["error"] == 0:
            return {p["partition"]: p["leader"] for p in t["partitions"]}
    return None




def test_three_nodes_serve_every_client_with_leaders_and_a_group_across_brokers(cluster):
    nodes = cluster.nodes
    first = nodes[1].bootstrap
    # confluent-kafka (librdkafka): three brokers and one controller among them.
    md = AdminClient({"bootstrap.servers": first}).list_topics(timeout=15)
    assert sorted(md.brokers) == [1, 2, 3]
    assert md.controller_id in (1, 2, 3)
    assert {(b.host, b.port) for b in md.brokers.values()} == {("127.0.0.1", n.port) for n in nodes.values()}
    # kafka-python: the same, through DescribeCluster.
    admin = kafka.KafkaAdminClient(bootstrap_servers=nodes[2].bootstrap)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert sorted(b["node_id"] for b in described["brokers"]) == [1, 2, 3]
    assert described["controller_id"] == md.controller_id
    # kcat: three brokers, one of them marked the controller.
    listing = subprocess.run(["kcat", "-L", "-b", nodes[3].bootstrap, "-m", "10"],
                             capture_output=True, text=True, timeout=30).stdout
    assert re.search(r"\b3 brokers:", listing), listing
    assert len(re.findall(r"\(controller\)", listing)) == 1, listing

    # A 12-partition RF=1 topic has leaders on all three brokers, as every node reports.
    topic = "spread"
    create(first, topic, 12)
    for node in nodes.values():
        wait_for(lambda: leaders(node, topic) and len(leaders(node, topic)) == 12, 10,
                 "node %d reports the topic" % node.node_id)
    placed = leaders(nodes[3], topic)
    assert set(placed.values()) == {1, 2, 3}, placed
    assert all(leaders(n, topic) == placed for n in nodes.values())

    # One bootstrap address each: a producer and a consumer group see every message.
    count = 3000
    producer = Producer({"bootstrap.servers": first, "linger.ms": 5})
    failures = []
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i,
                         on_delivery=lambda err, m: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and not failures, failures
    group = "cluster-group"
    consumer = Consumer({"bootstrap.servers": nodes[2].bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(seen) < count and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and not m.error():
                seen.add(m.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert seen == {b"v%d" % i for i in range(count)}
    # The group's coordinator is one broker; its partitions are led by all three.
    admin = AdminClient({"bootstrap.servers": first})
    described = admin.describe_consumer_groups([group])[group].result(15)
    coordinator = described.coordinator.id
    assert coordinator in (1, 2, 3)
    assert set(placed.values()) - {coordinator}, "some partitions are led elsewhere"
    # Its committed offsets are served by that coordinator, from any bootstrap address.
    other = AdminClient({"bootstrap.servers": nodes[3].bootstrap})
    committed = other.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    assert sum(tp.offset for tp in committed.topic_partitions) == count


def test_a_killed_controller_is_replaced_within_10s_and_catches_up_when_restarted(cluster):
    nodes = cluster.nodes
    leader = wait_for(lambda: controller_of(nodes[1]) if controller_of(nodes[1]) > 0 else None, 15,
                      "a controller")
    survivors = [n for i, n in nodes.items() if i != leader]
    cluster.kill(leader)
    killed_at = time.monotonic()
    new_leader = wait_for(
        lambda: all(controller_of(n) not in (-1, leader) for n in survivors) and controller_of(survivors[0]),
        15, "a new controller")
    elapsed = time.monotonic() - killed_at
    assert new_leader != leader and elapsed < 10, (new_leader, elapsed)
    # CreateTopics sent to a surviving broker (not necessarily the new controller) succeeds.
    create(survivors[-1].bootstrap, "after-failover", 3)
    for node in survivors:
        wait_for(lambda: leaders(node, "after-failover"), 10, "the topic on node %d" % node.node_id)
    # The killed node, restarted, catches up and serves the new topic's metadata.
    nodes[leader].restart_after_kill()
    wait_for(lambda: leaders(nodes[leader], "after-failover"), 20, "the restarted node has the topic")
    assert sorted(b[0] for b in metadata_from(nodes[leader])["brokers"]) == [1, 2, 3]


def test_acknowledged_topics_survive_kill_9_of_every_node_and_none_is_half_created(cluster):
    nodes = cluster.nodes
    acknowledged = []
    attempted = []
    stop = threading.Event()

    def burst():
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 3000})
        for i in range(50):
            if stop.is_set():
                return
            name = "burst-%02d" % i
            attempted.append(name)
            try:
                admin.create_topics([NewTopic(name, 6, 1)], request_timeout=5)[name].result(6)
                acknowledged.append(name)
            except Exception:  # noqa: BLE001 - the nodes are being killed
                pass

    creator = threading.Thread(target=burst)
    creator.start()
    wait_for(lambda: len(acknowledged) >= 10, 60, "ten acknowledged creations")
    for node in nodes.values():
        node.proc.kill()  # all three at once, mid-burst
    for node in nodes.values():
        node.kill()
    stop.set()
    creator.join(60)
    assert len(acknowledged) >= 10
    cluster.start(timeout=60)
    for node in nodes.values():
        def burst_topics():
            topics = metadata_from(node)["topics"]
            return {t["name"]: t for t in topics if t["name"].startswith("burst-")}
        found = wait_for(lambda: set(acknowledged) <= set(burst_topics()) and burst_topics(), 20,
                         "node %d has every acknowledged topic" % node.node_id)
        for name, topic in found.items():
            assert topic["error"] == 0 and len(topic["partitions"]) == 6, (node.node_id, name, topic)
            assert name in attempted






def test_a_stopped_broker_is_fenced_leaves_metadata_and_is_unfenced_when_it_continues(tmp_path):
    """SIGSTOP a broker past broker.session.timeout.ms (3 s here): it is fenced, leaves
    Metadata, and its partitions have no leader (error 5, LEADER_NOT_AVAILABLE: RF=1); after
    SIGCONT it is unfenced and leads them again. When the stopped node is the active
    controller, the other two also elect a new one."""
    c = Cluster(tmp_path, extra=["--set", "broker.session.timeout.ms=3000",
                                 "--set", "broker.heartbeat.interval.ms=300"]).start()
    try:
        nodes = c.nodes
        create(nodes[1].bootstrap, "fencing", 6)
        for node in nodes.values():
            wait_for(lambda: len(partitions_of(node, "fencing")) == 6, 10, "the topic everywhere")
        victim = 3
        led = sorted(p for p, (leader, _) in partitions_of(nodes[1], "fencing").items() if leader == victim)
        assert led, "the victim leads some partitions"
        others = [nodes[1], nodes[2]]
        nodes[victim].stop_process()
        stopped = time.monotonic()
        wait_for(lambda: all(broker_ids(n) == [1, 2] for n in others), 30, "the stopped broker fenced")
        # The session runs from the last heartbeat the controller received: up to one interval
        # (300 ms) before the stop, more when a loaded machine delayed that heartbeat (CI saw
        # 2.89 s here). What is checked: not fenced well before a session of silence.
        fenced_after = time.monotonic() - stopped
        assert fenced_after >= 3.0 - 0.3 - 0.5, "fenced %.2f s after the stop: before its " \
            "session (3 s) timed out" % fenced_after
        for node in others:
            now = partitions_of(node, "fencing")
            assert all(now[p] == (-1, 5) for p in led), now
            assert controller_of(node) in (1, 2)
        nodes[victim].continue_process()
        # The resumed node has no pre-vote (openraft 0.9): its first election, at a higher
        # term, can depose the leader, and the quorum elects again before it is unfenced.
        # 60 s leaves room for a loaded machine; a failure names each node's view and logs.
        try:
            wait_for(lambda: all(broker_ids(n) == [1, 2, 3] for n in nodes.values()), 60,
                     "unfenced again")
        except AssertionError as timed_out:
            raise AssertionError("%s; views (brokers, controller): %r\n%s"
                                 % (timed_out, _views(nodes), c.log_tails())) from None
        wait_for(lambda: all(partitions_of(nodes[1], "fencing")[p] == (victim, 0) for p in led), 15,
                 "the partitions led by it again")
        # Their leader epoch moved on twice (fenced: no leader, then led again): a Fetch with
        # an older epoch is FENCED_LEADER_EPOCH (74), with a newer one UNKNOWN_LEADER_EPOCH (75:
        # Kafka's code; issue #15 says 76, which is UNSUPPORTED_COMPRESSION_TYPE).
        p = led[0]
        for epoch, expected in [(2, 0), (1, 74), (0, 74), (3, 75)]:
            body = wire.roundtrip(nodes[victim].port, wire.fetch_v9_request(7, "fencing", p, 0, epoch))
            assert wire.parse_fetch_v9_errors(body)[("fencing", p)] == expected, (epoch, expected)
        # And they take writes: every partition, through one bootstrap address.
        producer = Producer({"bootstrap.servers": nodes[1].bootstrap})
        failures = []
        for p in range(6):
            producer.produce("fencing", value=b"after", partition=p,
                             on_delivery=lambda err, m: err and failures.append(err))
        assert producer.flush(30) == 0 and not failures, failures
        # OffsetForLeaderEpoch checks the epoch the client knows as Fetch does, and says
        # where an epoch ends: the one written at (epoch 2, the only batch of p at offset 0)
        # ends at the log end; epoch 0 (no batch of it) ends where epoch 2 starts.
        for current, expected in [(1, 74), (3, 75)]:
            body = wire.roundtrip(nodes[victim].port, wire.offset_for_leader_epoch_v2_request(
                8, "fencing", p, 2, current_leader_epoch=current))
            assert wire.parse_offset_for_leader_epoch_v2(body)[("fencing", p)][0] == expected
        for asked, answer in [(2, (0, 2, 1)), (0, (0, 0, 0)), (5, (0, -1, -1))]:
            body = wire.roundtrip(nodes[victim].port, wire.offset_for_leader_epoch_v2_request(
                9, "fencing", p, asked, current_leader_epoch=2))
            assert wire.parse_offset_for_leader_epoch_v2(body)[("fencing", p)] == answer, asked
        other = nodes[1 if victim != 1 else 2]
        body = wire.roundtrip(other.port, wire.offset_for_leader_epoch_v2_request(10, "fencing", p, 2))
        assert wire.parse_offset_for_leader_epoch_v2(body)[("fencing", p)][0] == 6
    finally:
        c.stop()


def test_a_broker_that_does_not_lead_a_partition_says_so_and_clients_find_the_leader(cluster):
    nodes = cluster.nodes
    create(nodes[1].bootstrap, "routing", 3)
    placed = wait_for(lambda: leaders(nodes[1], "routing") if len(leaders(nodes[1], "routing") or {}) == 3
                      else None, 10, "the topic")
    partition, leader = next(iter(placed.items()))
    other = next(i for i in nodes if i != leader)
    batch = wire.record_batch([(b"k", b"by hand")])
    # By hand: Produce and Fetch sent to a broker that does not lead the partition get 6.
    produced = wire.parse_produce_v3_response(
        wire.roundtrip(nodes[other].port, wire.produce_v3_request(1, "routing", partition, batch)))
    assert produced[("routing", partition)][0] == 6
    fetched = wire.parse_fetch_v4_response(
        wire.roundtrip(nodes[other].port, wire.fetch_v4_request(2, "routing", partition, 0)))
    assert fetched[("routing", partition)]["error"] == 6
    # The leader takes them; a Fetch with the partition's epoch (0) is answered, with a newer
    # one it is UNKNOWN_LEADER_EPOCH (75).
    produced = wire.parse_produce_v3_response(
        wire.roundtrip(nodes[leader].port, wire.produce_v3_request(3, "routing", partition, batch)))
    assert produced[("routing", partition)] == (0, 0)
    for epoch, expected in [(0, 0), (-1, 0), (1, 75)]:
        body = wire.roundtrip(nodes[leader].port, wire.fetch_v9_request(4, "routing", partition, 0, epoch))
        assert wire.parse_fetch_v9_errors(body)[("routing", partition)] == expected, epoch
    # confluent-kafka sent to the wrong broker first still delivers, and reads it back.
    producer = Producer({"bootstrap.servers": nodes[other].bootstrap})
    failures = []
    for i in range(20):
        producer.produce("routing", value=b"client %d" % i, partition=partition,
                         on_delivery=lambda err, m: err and failures.append(err))
    assert producer.flush(30) == 0 and not failures, failures
    consumer = Consumer({"bootstrap.servers": nodes[other].bootstrap, "group.id": "routing-reader",
                         "enable.auto.commit": False})
    from confluent_kafka import TopicPartition
    consumer.assign([TopicPartition("routing", partition, 0)])
    values = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < 21 and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and not m.error():
                values.append(m.value())
    finally:
        consumer.close()
    assert values == [b"by hand"] + [b"client %d" % i for i in range(20)]


def refused_start(node, text):
    """Starts `node` expecting it to refuse: it exits before 'ready', saying `text`."""
    from conftest import BrokerStartError
    node.wait_released()
    with pytest.raises(BrokerStartError) as refused:
        node.start(timeout=40)
    message = str(refused.value)
    assert "exited with code" in message and text in message, message
    return message


def test_another_clusters_data_directory_is_refused_and_does_not_vote(tmp_path):
    import shutil
    a = Cluster(tmp_path / "a").start()
    b = Cluster(tmp_path / "b").start()
    try:
        a.nodes[1].terminate()
        b.nodes[1].terminate()
        shutil.rmtree(b.nodes[1].data_dir)
        shutil.copytree(a.nodes[1].data_dir, b.nodes[1].data_dir)
        refused_start(b.nodes[1], "this data directory belongs to cluster")
        # Cluster b goes on with its other two voters, unaffected.
        create(b.nodes[2].bootstrap, "b-still-works", 1)
        assert broker_ids(b.nodes[3]) == [2, 3] or broker_ids(b.nodes[3]) == [1, 2, 3]
    finally:
        a.stop()
        b.stop()


def test_a_voter_whose_data_directory_was_wiped_is_refused_and_does_not_vote(cluster):
    import shutil
    node = cluster.nodes[2]
    node.terminate()
    shutil.rmtree(node.data_dir)
    node.data_dir.mkdir()
    refused_start(node, "was wiped or replaced")
    assert not (node.data_dir / "__cluster_metadata" / "raft-state.json").exists(), "it voted"
    create(cluster.nodes[1].bootstrap, "after-a-wipe", 1)


def test_replication_factors_and_manual_assignments_across_brokers(cluster):
    """CreateTopics and CreatePartitions with replica assignments naming other brokers are
    led where assigned; a replication factor up to the broker count is placed on that many
    brokers, with only the leader in sync until replication (issue #16); more is refused."""
    from confluent_kafka.admin import NewPartitions
    nodes = cluster.nodes
    admin = AdminClient({"bootstrap.servers": nodes[1].bootstrap})
    admin.create_topics([NewTopic("assigned", 3, replica_assignment=[[2], [3], [1]])])["assigned"].result(30)
    wait_for(lambda: leaders(nodes[1], "assigned") == {0: 2, 1: 3, 2: 1}, 10, "assigned leaders")
    admin.create_partitions([NewPartitions("assigned", 4, replica_assignment=[[3]])])["assigned"].result(30)
    wait_for(lambda: leaders(nodes[2], "assigned") == {0: 2, 1: 3, 2: 1, 3: 3}, 10, "the new partition")
    admin.create_topics([NewTopic("two-replicas", 3, 2)])["two-replicas"].result(30)
    topic = wait_for(lambda: [t for t in metadata_from(nodes[3], ["two-replicas"])["topics"]
                              if t["error"] == 0 and len(t["partitions"]) == 3], 10, "the topic")[0]
    for p in topic["partitions"]:
        assert len(p["replicas"]) == 2 and len(set(p["replicas"])) == 2, p
        # Every replica starts in sync (a new partition is empty everywhere).
        assert p["leader"] in p["replicas"] and sorted(p["isr"]) == sorted(p["replicas"]), p
    too_many = admin.create_topics([NewTopic("four-replicas", 1, 4)])["four-replicas"]
    with pytest.raises(Exception) as refused:
        too_many.result(30)
    assert "INVALID_REPLICATION_FACTOR" in str(refused.value) or "replication factor" in str(refused.value)


def init_producer_id(port, correlation_id):
    """InitProducerId v1 by hand (no transactional id) -> (error, producer id, epoch)."""
    body = wire.string(None) + wire.i32(60000)
    request = wire.frame(wire.request_header_v1(22, 1, correlation_id) + body)
    r = wire.Reader(wire.roundtrip(port, request))
    r.i32()  # throttle_time_ms
    return r.i16(), r.i64(), r.i16()


def test_producer_ids_are_unique_across_brokers(cluster):
    """Every broker hands out producer ids (InitProducerId goes to any broker) from blocks the
    quorum gives it (ProducerIds records): two brokers never give the same id, or two
    idempotent producers would share sequence numbers on a partition and one's batches could
    be taken for the other's duplicates; and after kill -9 of every node no id is given again
    (a block is committed before its first id is handed out)."""
    ids = {}
    for node in cluster.nodes.values():
        for attempt in range(3):
            error, producer_id, epoch = init_producer_id(node.port, attempt)
            assert error == 0 and producer_id >= 0 and epoch == 0, (node.node_id, error)
            ids.setdefault(node.node_id, []).append(producer_id)
    every = [i for node_ids in ids.values() for i in node_ids]
    assert len(set(every)) == len(every), ids
    # Each broker's ids come from its own block of 1000.
    blocks = {node: {i // 1000 for i in node_ids} for node, node_ids in ids.items()}
    assert all(len(b) == 1 for b in blocks.values()), blocks
    assert len(set().union(*blocks.values())) == 3, blocks
    for node in cluster.nodes:
        cluster.kill(node)
    cluster.start()
    for node in cluster.nodes.values():
        error, producer_id, _ = init_producer_id(node.port, 9)
        assert error == 0 and producer_id > max(every), (node.node_id, producer_id, ids)
        every.append(producer_id)
    assert len(set(every)) == len(every), every
