"""What a three-node cluster tells its operator, and what it holds for strangers: ISR changes
are counted and logged once per committed change, and the CONTROLLER listener bounds the
memory, time and connections a peer can take, as the Kafka listener does."""

import json
import re
import socket
import struct
import threading
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import wire
from cluster import Cluster, wait_for

pytestmark = pytest.mark.timeout(300)

MIB = 1 << 20
PARTITIONS = 12
EXTRA = ["--set", "broker.session.timeout.ms=6000", "--set", "broker.heartbeat.interval.ms=500"]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=EXTRA).start()
    yield c
    c.stop()


def metric_sum(node, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % node.admin_port, timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def isr_changes(nodes):
    return int(sum(metric_sum(node, "strata_isr_changes_total") for node in nodes))


def isrs(node, topic):
    """{partition: sorted ISR} as this node's Metadata v1 answers."""
    answer = wire.parse_metadata_v1_response(wire.roundtrip(node.port, wire.metadata_v1_request(1, [topic])))
    for t in answer["topics"]:
        if t["name"] == topic and t["error"] == 0:
            return {p["partition"]: sorted(p["isr"]) for p in t["partitions"]}
    return {}


def isr_log_lines(node):
    """The ISRs named by this node's "ISR changed" log lines since it started."""
    text = open(node.stderr_path, errors="replace").read() + open(node.stdout_path, errors="replace").read()
    lines = []
    for line in text.splitlines():
        if "ISR changed" in line:
            match = re.search(r"partition=(\S+) .*isr=\[([0-9, ]*)\]", line)
            assert match, line
            members = sorted(int(n) for n in match.group(2).split(",") if n.strip())
            lines.append((match.group(1), members))
    return lines


def test_isr_changes_are_counted_once_per_committed_shrink_and_expansion(cluster):
    """Kill -9 one node of three with 12 RF=3 partitions: the survivors count exactly one ISR
    shrink per partition (not one a second while the dead node still looks caught up), and
    exactly one expansion each once it is back; every logged ISR is one the controller
    committed (never the dead replica added back)."""
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("isr12", PARTITIONS, 3)])["isr12"].result(30)
    first = cluster.nodes[1]
    wait_for(lambda: len(isrs(first, "isr12")) == PARTITIONS
             and all(isr == [1, 2, 3] for isr in isrs(first, "isr12").values()),
             30, "every partition's ISR [1, 2, 3]")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(PARTITIONS * 10):
        producer.produce("isr12", value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    nodes = list(cluster.nodes.values())
    base = isr_changes(nodes)
    assert base == 0, "creating the topic changed no ISR"

    cluster.kill(3)
    survivors = [cluster.nodes[1], cluster.nodes[2]]
    wait_for(lambda: isr_changes(survivors) >= PARTITIONS, 30,
             "one ISR shrink per partition within 30 s")
    # The dead node's last fetches look caught up for replica.lag.time.max.ms: nothing may be
    # counted (or logged) for asking it back while it is fenced.
    time.sleep(12)
    assert isr_changes(survivors) == PARTITIONS
    assert all(isr == [1, 2] for isr in isrs(first, "isr12").values())
    for node in survivors:
        for partition, members in isr_log_lines(node):
            assert 3 not in members, "%s logged an ISR with the dead replica: %s %s" % (
                node.node_id, partition, members)

    cluster.nodes[3].restart_after_kill()
    wait_for(lambda: all(isr == [1, 2, 3] for isr in isrs(first, "isr12").values()), 60,
             "node 3 back in every ISR")
    wait_for(lambda: isr_changes(nodes) >= 2 * PARTITIONS, 15, "one expansion per partition")
    # A normal rejoin logs no ERROR (openraft's refused initialize did), and says what it did.
    restarted = cluster.nodes[3]
    log = open(restarted.stderr_path, errors="replace").read() + open(restarted.stdout_path, errors="replace").read()
    since_restart = log[log.rindex("=== interop: start #2"):]
    errors = [line for line in since_restart.splitlines() if " ERROR " in line]
    assert not errors, errors
    assert "rejoining the controller quorum" in since_restart
    time.sleep(3)
    assert isr_changes(nodes) == 2 * PARTITIONS
    logged = sum(len(isr_log_lines(node)) for node in nodes)
    assert logged == 2 * PARTITIONS, "one log line per committed change, not %d" % logged
    # Nothing acknowledged was lost on the way.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "isr12",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("isr12", p, 0) for p in range(PARTITIONS)])
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < PARTITIONS * 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen.add(message.value())
    consumer.close()
    assert len(seen) == PARTITIONS * 10


def _memory_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for %d" % (field, pid))


def _frame(message):
    payload = json.dumps(message).encode()
    return struct.pack("<I", len(payload)) + payload


def _stall(port, hello, body, closed_at, index, started):
    """One connection: an optional Identify, then a 60 MiB frame all but its last byte; records
    when the node closed it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(90)
    try:
        if hello:
            sock.sendall(_frame({"identify": {"node": 1}}))
            length = struct.unpack("<I", sock.recv(4, socket.MSG_WAITALL))[0]
            sock.recv(length, socket.MSG_WAITALL)
        sock.sendall(struct.pack("<I", len(body) + 1))
        started.set()
        sock.sendall(body)
        while sock.recv(65536):
            pass
    except OSError:
        pass
    finally:
        closed_at[index] = time.monotonic()
        sock.close()


@pytest.mark.parametrize("hello", [False, True], ids=["strangers", "claiming-a-voter"])
def test_stalled_60_mib_frames_at_the_controller_port_are_bounded_and_closed(cluster, hello):
    """40 connections to a voter's controller port, each declaring a 60 MiB frame and sending
    all of it but the last byte (first claiming to be voter 1, in the second run): the node's
    memory stays within the listener's budget (128 MiB of frames, 64 KiB for a peer that has
    not identified itself), every connection is closed by the frame deadline (15 s), and the
    cluster keeps serving acks=all writes meanwhile. Before the bound: 49 -> 2,446 MiB in 1.5 s
    and no connection closed in 30 s."""
    target = cluster.nodes[2]
    pid = target.proc.pid
    rss_before = _memory_kib(pid, "VmRSS")
    body = b"x" * (60 * MIB - 1)
    closed_at = [None] * 40
    started = threading.Event()
    begin = time.monotonic()
    threads = [threading.Thread(target=_stall, daemon=True,
                                args=(target.controller_port, hello, body, closed_at, i, started))
               for i in range(40)]
    for thread in threads:
        thread.start()
    # The cluster serves meanwhile: an RF=3 acks=all topic takes and gives back records.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("during", 3, 3, config={"min.insync.replicas": "2"})])["during"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "message.timeout.ms": 30000})
    for i in range(300):
        producer.produce("during", value=b"d%d" % i, partition=i % 3)
    assert producer.flush(40) == 0
    for thread in threads:
        thread.join(60)
    assert all(at is not None for at in closed_at), "a stalled connection is still open"
    slowest = max(closed_at) - begin
    hwm = _memory_kib(pid, "VmHWM")
    growth_mib = (hwm - rss_before) / 1024
    print("controller flood (%s): rss before %d MiB, high-water mark %d MiB, last close after %.1f s"
          % ("identified" if hello else "strangers", rss_before // 1024, hwm // 1024, slowest))
    if hello:
        assert growth_mib < 128 + 4 + 64, "%.0f MiB grown" % growth_mib
        assert slowest < 15 + 20
    else:
        assert growth_mib < 64, "%.0f MiB grown" % growth_mib
        assert slowest < 20, "strangers' oversized frames are refused at once"
    assert target.proc.poll() is None
    # Still a member of a serving cluster: it answers Metadata with all three brokers.
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "during",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("during", p, 0) for p in range(3)])
    seen = set()
    deadline = time.monotonic() + 30
    while len(seen) < 300 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen.add(message.value())
    consumer.close()
    assert len(seen) == 300
