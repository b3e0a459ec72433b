"""strata-bench drives a three-node cluster through one node's address: every partition
produced to and fetched from its leader, and a leader's kill -9 in the middle of a run costs
retries and a stall, reported, not the run or an acknowledged message."""

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import wire
from cluster import Cluster, wait_for

pytestmark = pytest.mark.timeout(300)

EXTRA = ["--set", "broker.session.timeout.ms=4000", "--set", "broker.heartbeat.interval.ms=500"]


def bench_bin():
    path = Path(os.environ.get("STRATA_BENCH_BIN", "target/debug/strata-bench"))
    if not path.is_file():
        pytest.fail("strata-bench not found at %s: build it (cargo build -p bench)" % path)
    return str(path)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=EXTRA).start()
    yield c
    c.stop()


def bench(*args, timeout=120):
    out = subprocess.run([bench_bin(), *args, "--json", "--quiet", "--cores", "1"],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def leaders(node, topic):
    answer = wire.parse_metadata_v1_response(wire.roundtrip(node.port, wire.metadata_v1_request(1, [topic])))
    for t in answer["topics"]:
        if t["name"] == topic and t["error"] == 0:
            return {p["partition"]: p["leader"] for p in t["partitions"]}
    return {}


def high_watermarks(bootstrap, topic, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-" + topic})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def test_produce_and_e2e_through_one_node_reach_every_leader(cluster):
    """acks=all on an RF=3 topic whose six partitions are led by all three brokers, through
    node 1's address alone: 0 errors, and every record produced is consumed."""
    node = cluster.nodes[1]
    produced = bench("produce", "--bootstrap", node.bootstrap, "--topic", "bt", "--partitions", "6",
                     "--replication-factor", "3", "--acks", "all", "--duration", "3")
    assert set(leaders(node, "bt").values()) == {1, 2, 3}
    assert produced["errors"] == 0 and produced["retriable_errors_total"] == 0, produced
    assert produced["produced_messages"] > 1000, produced
    assert sum(high_watermarks(cluster.bootstrap, "bt", 6)) == produced["produced_messages"]
    consumed = bench("consume", "--bootstrap", node.bootstrap, "--topic", "bt",
                     "--messages", str(produced["produced_messages"]), "--duration", "60")
    assert consumed["errors"] == 0, consumed
    assert consumed["consumed_messages"] == produced["produced_messages"]
    e2e = bench("e2e", "--bootstrap", node.bootstrap, "--topic", "bt", "--acks", "all",
                "--rate", "2000", "--duration", "3")
    assert e2e["errors"] == 0, e2e
    assert e2e["produced_messages"] > 3000 and e2e["consumed_messages"] == e2e["produced_messages"], e2e
    assert e2e["latency_us"]["count"] == e2e["consumed_messages"]
    # A comma-separated bootstrap list works, its first address dead included.
    listed = bench("produce", "--bootstrap", "127.0.0.1:1," + cluster.bootstrap, "--topic", "bt",
                   "--acks", "all", "--messages", "500", "--duration", "30")
    assert listed["errors"] == 0 and listed["produced_messages"] == 500


def test_a_leader_killed_during_produce_costs_a_stall_not_the_run_or_an_acknowledged_message(cluster):
    """kill -9 of a broker leading a third of the partitions 3 s into a 12 s idempotent acks=all
    run through another node: the run finishes with 0 errors, reports the retries and each
    stalled partition's stall, and the partitions hold exactly the messages acknowledged (the
    retries deduplicated, nothing acknowledged lost)."""
    node = cluster.nodes[1]
    victim = 3
    result = {}

    def run():
        result["summary"] = bench("produce", "--bootstrap", node.bootstrap, "--topic", "fo",
                                  "--partitions", "6", "--replication-factor", "3",
                                  "--acks", "all", "--idempotent", "--duration", "12")

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("fo", 6, 3)])["fo"].result(30)
    wait_for(lambda: sorted(leaders(node, "fo").values()).count(-1) == 0
             and len(leaders(node, "fo")) == 6, 30, "the topic's leaders")
    led = [p for p, leader in leaders(node, "fo").items() if leader == victim]
    assert led, "broker 3 leads some partition"
    runner = threading.Thread(target=run)
    runner.start()
    time.sleep(3)
    cluster.kill(victim)
    runner.join(200)
    summary = result["summary"]
    print("failover run: %d acknowledged, retried %s, stalls %s" % (
        summary["produced_messages"], summary["retriable_errors"], summary["partition_stalls_ms"]))
    assert summary["errors"] == 0, summary
    assert summary["retriable_errors_total"] > 0, summary
    stalled = {int(p) for p in summary["partition_stalls_ms"]}
    assert set(led) <= stalled, (led, summary["partition_stalls_ms"])
    assert summary["longest_stall_ms"] > 0
    survivors = ",".join(cluster.nodes[i].bootstrap for i in (1, 2))
    assert sum(high_watermarks(survivors, "fo", 6)) == summary["produced_messages"]
