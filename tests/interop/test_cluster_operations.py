"""Operating a strata cluster (issue #15): controlled shutdown on SIGTERM moves a broker's
leaderships away before it stops (not a session timeout later), `strata cluster status`
shows brokers live or fenced, the controller leader and each voter's lag (DescribeCluster v2
and DescribeQuorum v2), and `strata cluster local` runs a 3-node cluster that clients use
and Ctrl-C stops."""

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import wire
from cluster import (Cluster, broker_ids, consume_values, create, metadata_from,
                     partitions_of, wait_for)
from conftest import free_port, strata_bin

pytestmark = pytest.mark.timeout(300)

SESSION_MS = 30000










def metrics(node):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % node.admin_port, timeout=10) as r:
        text = r.read().decode()
    return dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))


def cluster_status(node):
    out = subprocess.run([str(strata_bin()), "cluster", "status", "-b", node.bootstrap],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    brokers, voters, leader = {}, {}, None
    section = None
    for line in out.stdout.splitlines():
        if line.startswith("BROKER"):
            section = "brokers"
        elif line.startswith("VOTER"):
            section = "voters"
        elif line.startswith("controller leader"):
            leader = int(line.split()[2])
        elif section == "brokers" and line.strip():
            fields = line.split()
            brokers[int(fields[0])] = (fields[3], "(controller)" in line)
        elif section == "voters" and line.strip():
            fields = line.split()
            voters[int(fields[0])] = {"role": fields[1], "end": int(fields[2]),
                                      "lag": int(fields[3]) if fields[3] != "?" else None}
    return {"brokers": brokers, "voters": voters, "leader": leader, "text": out.stdout}


def test_sigterm_moves_leadership_away_first_and_status_shows_the_broker_fenced(tmp_path):
    """broker.session.timeout.ms is 30 s here: a broker seen fenced within 3 s of its SIGTERM
    was fenced by its controlled shutdown, not by silence."""
    c = Cluster(tmp_path, extra=["--set", "broker.session.timeout.ms=%d" % SESSION_MS,
                                 "--set", "broker.heartbeat.interval.ms=300"]).start()
    try:
        nodes = c.nodes
        create(nodes[1].bootstrap, "moving", 6)
        for node in nodes.values():
            wait_for(lambda: len(partitions_of(node, "moving")) == 6, 10, "the topic everywhere")
        status = cluster_status(nodes[1])
        assert sorted(status["brokers"]) == [1, 2, 3], status["text"]
        assert all(state == "live" for state, _ in status["brokers"].values()), status["text"]
        controller = status["leader"]
        assert [i for i, (_, c_) in status["brokers"].items() if c_] == [controller], status["text"]
        assert sorted(status["voters"]) == [1, 2, 3] and status["voters"][controller]["role"] == "leader"

        victim = next(i for i in (1, 2, 3) if i != controller)
        led = sorted(p for p, (leader, _) in partitions_of(nodes[1], "moving").items() if leader == victim)
        assert led, "the victim leads some partitions"
        others = [n for i, n in nodes.items() if i != victim]
        signalled = time.monotonic()
        code, clean = nodes[victim].terminate(grace=10)
        assert clean and code == 0, (code, nodes[victim].stderr_tail())
        wait_for(lambda: all(victim not in broker_ids(n) for n in others), 3, "fenced by its shutdown")
        assert time.monotonic() - signalled < SESSION_MS / 1000 / 2
        assert "controlled shutdown: this broker is fenced" in nodes[victim].stderr_tail(200)
        for node in others:
            now = partitions_of(node, "moving")
            assert all(now[p] == (-1, 5) for p in led), now

        # Status through a survivor: the victim fenced; commits after it went leave it behind.
        create(others[0].bootstrap, "while-away", 3)
        status = cluster_status(others[0])
        assert status["brokers"][victim][0] == "fenced", status["text"]
        assert status["voters"][victim]["lag"] > 0, status["text"]
        # The same on /metrics: the leader exports the lag, every survivor one fenced broker.
        leader_node = nodes[status["leader"]]
        on_leader = metrics(leader_node)
        assert on_leader["strata_controller_is_leader"] == "1"
        assert int(on_leader['strata_controller_voter_lag{voter="%d"}' % victim]) > 0, on_leader
        for node in others:
            seen = metrics(node)
            assert seen['strata_cluster_brokers{state="fenced"}'] == "1", seen
            assert seen['strata_cluster_brokers{state="live"}'] == "2", seen
            assert seen["strata_controller_leader"] == str(status["leader"])

        # Back: it registers a new incarnation, heartbeats, is unfenced and leads again.
        nodes[victim].restart_after_kill()
        wait_for(lambda: all(broker_ids(n) == [1, 2, 3] for n in nodes.values()), 20, "unfenced again")
        wait_for(lambda: all(partitions_of(nodes[1], "moving")[p] == (victim, 0) for p in led), 15,
                 "its partitions led by it again")
        wait_for(lambda: cluster_status(nodes[victim])["voters"][victim]["lag"] == 0, 15, "caught up")

        # The active controller itself: fenced on its way out, and the others elect another.
        signalled = time.monotonic()
        code, clean = nodes[controller].terminate(grace=10)
        assert clean and code == 0, (code, nodes[controller].stderr_tail())
        rest = [n for i, n in nodes.items() if i != controller]
        wait_for(lambda: all(controller not in broker_ids(n) for n in rest), 8, "the old controller fenced")
        assert time.monotonic() - signalled < SESSION_MS / 1000 / 2
        status = cluster_status(rest[0])
        assert status["leader"] in [n.node_id for n in rest] and status["brokers"][controller][0] == "fenced"
    finally:
        c.stop()


def _can_bind(port):
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_base_port():
    """A base port whose nine ports `strata cluster local --nodes 3` uses can all be bound
    now, below the kernel's ephemeral range (32768 and up), where outgoing connections could
    take one of them at any moment."""
    start = 20000 + os.getpid() % 40 * 300
    for base in list(range(start, 32000, 300)) + list(range(20000, start, 300)):
        ports = [base + 100 * i + k for i in range(3) for k in (0, 1, 10)]
        if all(_can_bind(p) for p in ports):
            return base
    raise AssertionError("no free ports")


def _processes_with(text):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline and " serve " in cmdline:
            found.append(int(pid))
    return found


def test_cluster_local_runs_three_nodes_that_clients_use_and_ctrl_c_stops_them(tmp_path):
    base = _free_base_port()
    data = tmp_path / "local"
    proc = subprocess.Popen([str(strata_bin()), "cluster", "local", "--nodes", "3",
                             "--data-dir", str(data), "--base-port", str(base)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 120
        while "ready" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        match = re.search(r"bootstrap servers: (\S+)", line)
        if not match:
            logs = {p.name: p.read_text()[-1500:] for p in data.glob("node-*.log")}
            raise AssertionError((line, proc.poll(), proc.stderr.read(), logs))
        bootstrap = match.group(1)
        assert bootstrap == ",".join("127.0.0.1:%d" % (base + 100 * i) for i in range(3))
        assert len(_processes_with(str(data))) == 3

        create(bootstrap, "tried", 3)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(300):
            producer.produce("tried", value=b"m%d" % i)
        assert producer.flush(30) == 0
        seen = consume_values(bootstrap, "tried", "tryers", 300)
        assert seen == {b"m%d" % i for i in range(300)}

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=40) == 0, proc.stderr.read()
        assert "every node stopped" in proc.stderr.read()
        assert _processes_with(str(data)) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _processes_with(str(data)):
            os.kill(pid, signal.SIGKILL)


DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "cluster"


def test_the_deploy_three_node_configs_form_a_cluster_with_their_racks(tmp_path):
    """deploy/cluster/node-{1,2,3}.toml as they are, with only their addresses moved to this
    machine (10.0.0.N and 0.0.0.0 to 127.0.0.N, the ports to free ones, log.dirs to a
    scratch directory): three nodes start, form one cluster, and report their racks."""
    ports = {name: [free_port() for _ in range(3)] for name in ("9092", "9093", "9644")}
    procs = []
    try:
        for i in (1, 2, 3):
            text = (DEPLOY / ("node-%d.toml" % i)).read_text()
            text = text.replace("0.0.0.0", "127.0.0.%d" % i)
            for n in (1, 2, 3):
                for name, chosen in ports.items():
                    text = text.replace("10.0.0.%d:%s" % (n, name), "127.0.0.%d:%d" % (n, chosen[n - 1]))
                    text = text.replace("127.0.0.%d:%s" % (n, name), "127.0.0.%d:%d" % (n, chosen[n - 1]))
            text = text.replace('"/var/lib/strata"', '"%s"' % (tmp_path / ("node-%d" % i)))
            settings = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
            assert not any("10.0.0." in line or "/var/lib" in line for line in settings), settings
            config = tmp_path / ("node-%d.toml" % i)
            config.write_text(text)
            log = open(tmp_path / ("node-%d.log" % i), "w")
            procs.append(subprocess.Popen(
                [str(strata_bin()), "serve", "--config", str(config), "--cores", "1",
                 "--set", "cpu.pinning=false"], stdout=log, stderr=log))
        first = "127.0.0.1:%d" % ports["9092"][0]

        def status():
            out = subprocess.run([str(strata_bin()), "cluster", "status", "-b", first],
                                 capture_output=True, text=True, timeout=30)
            return out.stdout if out.returncode == 0 and out.stdout.count(" live") == 3 else None

        text = wait_for(status, 90, "the three deploy configs forming a cluster")
        for i, rack in ((1, "rack-a"), (2, "rack-b"), (3, "rack-c")):
            assert re.search(r"^%d\s+127\.0\.0\.%d:%d\s+%s\s+live" % (i, i, ports["9092"][i - 1], rack),
                             text, re.M), text
        # strata topic describe asks each partition's leader for its offsets and size.
        create(first, "described", 6)
        producer = Producer({"bootstrap.servers": first})
        for i in range(60):
            producer.produce("described", value=b"d%d" % i, partition=i % 6)
        assert producer.flush(30) == 0
        out = subprocess.run([str(strata_bin()), "topic", "describe", "described", "-b", first],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        rows = [line.split() for line in out.stdout.splitlines() if re.match(r"^\s+\d+\s+\d+\s", line)]
        assert len(rows) == 6, out.stdout
        assert {int(r[1]) for r in rows} == {1, 2, 3}, out.stdout
        assert all(int(r[3]) == 10 and int(r[4]) > 0 for r in rows), out.stdout
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def partition_state(node, topic):
    for t in metadata_from(node, [topic])["topics"]:
        if t["name"] == topic:
            return {p["partition"]: p for p in t["partitions"]}
    return {}


def test_elect_leaders_and_unclean_election_with_confluent_kafka(tmp_path):
    """ElectLeaders (KIP-460) through confluent-kafka's AdminClient, and unclean leader
    election, on one controller-only voter and two brokers (either broker can stop without
    losing the quorum). RF=2 topics: a controlled shutdown of one broker hands its partitions
    to the in-sync other; when that one stops too they are leaderless (its ISR is itself),
    and the first broker back leads them only through an UNCLEAN election (or the topic's
    unclean.leader.election.enable), as the whole ISR. The other broker, back, truncates to
    the new leader's log, rejoins the ISR, and a preferred election can then move leaders."""
    from confluent_kafka import TopicPartition
    from confluent_kafka import ElectionType
    roles = {1: "controller", 2: "broker", 3: "broker"}
    c = Cluster(tmp_path, roles=roles,
                extra=["--set", "broker.session.timeout.ms=%d" % SESSION_MS,
                       "--set", "broker.heartbeat.interval.ms=300",
                       "--set", "replica.lag.time.max.ms=3000"]).start()
    try:
        nodes = c.nodes
        brokers = [nodes[2], nodes[3]]
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        created = admin.create_topics([NewTopic("electing", 4, 2),
                                       NewTopic("self-electing", 4, 2,
                                                config={"unclean.leader.election.enable": "true"})])
        for future in created.values():
            future.result(30)
        for name in ("electing", "self-electing"):
            for node in brokers:
                wait_for(lambda: len(partition_state(node, name)) == 4, 15, "the topics everywhere")
        state = partition_state(nodes[2], "electing")
        for p in state.values():
            assert sorted(p["isr"]) == [2, 3] == sorted(p["replicas"]) and p["leader"] == p["replicas"][0], p
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        for p in range(4):
            for topic in ("electing", "self-electing"):
                producer.produce(topic, value=b"before", partition=p)
        assert producer.flush(30) == 0

        # Every leader is preferred already.
        everything = [TopicPartition("electing", p) for p in range(4)]
        result = admin.elect_leaders(ElectionType.PREFERRED, everything).result(30)
        codes = {tp.partition: (err.code() if err else 0) for tp, err in result.items()}
        assert codes == {p: 84 for p in range(4)}, codes  # ELECTION_NOT_NEEDED

        # Broker 3 stops cleanly: its partitions move to broker 2, the in-sync other replica.
        code, clean = nodes[3].terminate(grace=10)
        assert clean and code == 0
        wait_for(lambda: all(s["leader"] == 2 and s["isr"] == [2]
                             for s in partition_state(nodes[2], "electing").values()),
                 10, "every partition led by broker 2, the ISR broker 2 alone")
        # Broker 2 stops too: nothing in sync is left, so no leader.
        code, clean = nodes[2].terminate(grace=10)
        assert clean and code == 0
        # Broker 3 back: "electing" stays leaderless (3 is not in sync); "self-electing"
        # allows unclean elections and gets broker 3 as leader and whole ISR by itself.
        nodes[3].start()
        wait_for(lambda: all(s["leader"] == 3 and s["isr"] == [3]
                             for s in partition_state(nodes[3], "self-electing").values()),
                 15, "unclean election on unfencing")
        assert all(s["leader"] == -1 for s in partition_state(nodes[3], "electing").values())

        # An unclean ElectLeaders gives the others a leader: the live replica, as the whole ISR.
        admin = AdminClient({"bootstrap.servers": nodes[3].bootstrap})
        result = admin.elect_leaders(ElectionType.UNCLEAN, everything).result(30)
        assert all(err is None for err in result.values()), result
        wait_for(lambda: all(s["leader"] == 3 and s["isr"] == [3] and s["error"] == 0
                             for s in partition_state(nodes[3], "electing").values()),
                 10, "broker 3 leads every partition")
        producer = Producer({"bootstrap.servers": nodes[3].bootstrap, "acks": "all"})
        failures = []
        for p in range(4):
            producer.produce("electing", value=b"after an unclean election", partition=p,
                             on_delivery=lambda err, m: err and failures.append(err))
        assert producer.flush(30) == 0 and not failures, failures
        # Already led: nothing to elect.
        result = admin.elect_leaders(ElectionType.UNCLEAN, everything).result(30)
        assert all(err is not None and err.code() == 84 for err in result.values()), result

        # Broker 2 back: it follows broker 3 (truncating what only it had), catches up and
        # rejoins the ISR; then the partitions it is first replica of go back to it.
        nodes[2].start()
        wait_for(lambda: all(sorted(s["isr"]) == [2, 3]
                             for s in partition_state(nodes[3], "electing").values()),
                 30, "broker 2 back in every ISR")
        result = admin.elect_leaders(ElectionType.PREFERRED, everything).result(30)
        codes = {tp.partition: (err.code() if err else 0) for tp, err in result.items()}
        preferred = {p: s["replicas"][0] for p, s in partition_state(nodes[3], "electing").items()}
        assert codes == {p: (0 if preferred[p] == 2 else 84) for p in range(4)}, codes
        wait_for(lambda: all(s["leader"] == preferred[p]
                             for p, s in partition_state(nodes[3], "electing").items()),
                 10, "preferred leaders")
    finally:
        c.stop()


def test_controller_only_voters_and_broker_only_learners(tmp_path):
    """process.roles=controller on three voters and process.roles=broker on two more: the
    brokers are Raft learners (DescribeQuorum observers), clients see only them, and the
    quorum's leader can be lost and a broker restarted without clients noticing more than a
    retry."""
    roles = {1: "controller", 2: "controller", 3: "controller", 4: "broker", 5: "broker"}
    # Two brokers: `__consumer_offsets` needs offsets.topic.replication.factor live brokers
    # (Kafka's default 3) before groups work, as in Kafka.
    c = Cluster(tmp_path, roles=roles,
                extra=["--set", "offsets.topic.replication.factor=2"]).start()
    try:
        nodes = c.nodes
        brokers = [nodes[4], nodes[5]]
        for node in brokers:
            wait_for(lambda: broker_ids(node) == [4, 5], 20, "both brokers registered")
            assert metadata_from(node)["controller"] in (4, 5), "clients are named a broker"
        status = cluster_status(nodes[4])
        assert sorted(status["brokers"]) == [4, 5], status["text"]
        assert status["leader"] in (1, 2, 3), status["text"]
        assert {v: r["role"] for v, r in status["voters"].items() if v in (4, 5)} == \
            {4: "observer", 5: "observer"}, status["text"]
        assert sorted(v for v, r in status["voters"].items() if r["role"] != "observer") == [1, 2, 3]

        bootstrap = c.bootstrap
        create(bootstrap, "split-roles", 6)
        wait_for(lambda: set(l for l, _ in partitions_of(nodes[5], "split-roles").values()) == {4, 5},
                 15, "leaders on both brokers")
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(200):
            producer.produce("split-roles", value=b"r%d" % i)
        assert producer.flush(30) == 0

        # The quorum's leader (a controller-only node) dies: another is elected, and a
        # metadata change through a broker still commits.
        leader = status["leader"]
        c.kill(leader)
        wait_for(lambda: cluster_status(nodes[5])["leader"] not in (leader, None), 15, "a new leader")
        create(nodes[5].bootstrap, "after-leader-loss", 2)
        for node in brokers:
            wait_for(lambda: len(partitions_of(node, "after-leader-loss")) == 2, 10, "the new topic")

        # A broker-only node restarted from its directory rejoins as a learner and catches up.
        c.kill(5)
        nodes[leader].restart_after_kill()
        nodes[5].restart_after_kill()
        wait_for(lambda: broker_ids(nodes[4]) == [4, 5], 30, "broker 5 back")
        wait_for(lambda: len(partitions_of(nodes[5], "after-leader-loss")) == 2, 15, "caught up")
        seen = consume_values(bootstrap, "split-roles", "split", 200)
        assert seen == {b"r%d" % i for i in range(200)}

        # A controller-only voter whose directory was wiped is refused (the quorum knows it
        # by its registered directory), and does not vote.
        import shutil
        from conftest import BrokerStartError
        wiped = nodes[3] if leader != 3 else nodes[2]
        wiped.terminate()
        shutil.rmtree(wiped.data_dir)
        wiped.data_dir.mkdir()
        wiped.wait_released()
        with pytest.raises(BrokerStartError) as refused:
            wiped.start(timeout=40)
        assert "was wiped or replaced" in str(refused.value), str(refused.value)
        assert not (wiped.data_dir / "__cluster_metadata" / "raft-state.json").exists(), "it voted"
    finally:
        c.stop()


def test_default_replication_factor_applies_to_minus_one_and_auto_created_topics(tmp_path):
    c = Cluster(tmp_path, extra=["--set", "default.replication.factor=3"]).start()
    try:
        nodes = c.nodes
        admin = AdminClient({"bootstrap.servers": nodes[1].bootstrap})
        admin.create_topics([NewTopic("defaulted", 2)])["defaulted"].result(30)  # RF -1
        wait_for(lambda: len(partition_state(nodes[2], "defaulted")) == 2, 10, "the topic")
        assert all(sorted(p["replicas"]) == [1, 2, 3] == sorted(p["isr"])
                   for p in partition_state(nodes[2], "defaulted").values())
        # Metadata v1 for an unknown topic creates it (auto.create.topics.enable).
        wait_for(lambda: len(partition_state(nodes[3], "auto-defaulted")) == 1, 10, "auto-created")
        for node in nodes.values():
            wait_for(lambda: len(partition_state(node, "auto-defaulted")) == 1, 10, "everywhere")
            assert all(len(p["replicas"]) == 3 for p in partition_state(node, "auto-defaulted").values())
        # More than the brokers: INVALID_REPLICATION_FACTOR (38).
        with pytest.raises(Exception) as refused:
            admin.create_topics([NewTopic("too-many", 1, 4)])["too-many"].result(30)
        assert "INVALID_REPLICATION_FACTOR" in str(refused.value) or "38" in str(refused.value)
    finally:
        c.stop()


def test_config_changes_and_deletions_go_through_the_quorum_from_any_broker(tmp_path):
    """IncrementalAlterConfigs sent to one broker, DescribeConfigs answered by another, and a
    DeleteTopics through a third: every node applies the same records."""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    c = Cluster(tmp_path).start()
    try:
        nodes = c.nodes
        create(nodes[1].bootstrap, "configured", 3)
        resource = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
        admin2 = AdminClient({"bootstrap.servers": nodes[2].bootstrap})
        for future in admin2.incremental_alter_configs([resource]).values():
            future.result(30)

        def retention_on(node):
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "configured")])
            configs = list(described.values())[0].result(30)
            return configs["retention.ms"].value

        for node in nodes.values():
            wait_for(lambda: retention_on(node) == "3600000", 10, "the config on node %d" % node.node_id)
        admin3 = AdminClient({"bootstrap.servers": nodes[3].bootstrap})
        admin3.delete_topics(["configured"])["configured"].result(30)
        for node in nodes.values():
            # All topics (naming it would auto-create it again).
            wait_for(lambda: "configured" not in [t["name"] for t in metadata_from(node)["topics"]],
                     10, "the topic gone from node %d" % node.node_id)
    finally:
        c.stop()
