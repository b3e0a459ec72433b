"""A strata cluster on loopback ports for the interop suite: N nodes, each broker,controller
and a voter (`controller.quorum.voters`), one shard each, started and stopped together or one
at a time (kill -9, SIGSTOP, restart on the same data directory and ports)."""

import signal
import subprocess
import time

import wire
from clients import wait_until
from conftest import Broker, BrokerStartError, _live_brokers, free_port, strata_bin


def _bindable(port):
    """No socket on this machine is in LISTEN state on `port` (/proc/net/tcp{,6}), which is
    what a restart needs (connections of the dead process may linger in FIN_WAIT)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return False
    return True


class ClusterNode(Broker):
    def __init__(self, binary, workdir, node_id, cluster, roles="broker,controller"):
        super().__init__(binary, workdir)
        self.node_id = node_id
        self.cluster = cluster
        self.roles = roles
        self.controller_port = free_port()
        self.kafka_port = self.port
        if roles == "controller":
            # No Kafka listener: readiness is checked on the controller's port.
            self.port = self.controller_port

    @property
    def is_broker(self):
        return "broker" in self.roles

    @property
    def is_voter(self):
        return "controller" in self.roles

    def command(self):
        cmd = super().command()
        # One shard per node: three nodes share the machine's cores.
        cmd[cmd.index("--cores") + 1] = "1"
        cmd[cmd.index("--node-id") + 1] = str(self.node_id)
        listen = "127.0.0.1:%d" % self.kafka_port
        if self.roles == "broker":
            # A broker-only node is a Raft learner: the leader pushes the log to its
            # CONTROLLER listener.
            listen = "PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d" % (listen, self.controller_port)
        cmd[cmd.index("--listen") + 1] = listen
        cmd[cmd.index("--advertise") + 1] = "127.0.0.1:%d" % self.kafka_port
        extra = ["--set", "process.roles=" + self.roles] if self.roles != "broker,controller" else []
        return (cmd + ["--set", "controller.quorum.voters=" + self.cluster.voters()] + extra
                + self.cluster.extra)

    def wait_released(self, timeout=60.0):
        """After a kill -9, waits (bounded) until nothing listens on this node's ports: the
        kernel can hold a dead process's io_uring sockets open for a few seconds (once, in a
        full suite run on a loaded machine, over 30)."""
        deadline = time.monotonic() + timeout
        ports = (self.port, self.admin_port, self.controller_port)
        while time.monotonic() < deadline:
            if all(_bindable(port) for port in ports):
                return
            time.sleep(0.1)
        raise AssertionError("ports %r still held %.0f s after the kill" % (ports, timeout))

    def restart_after_kill(self, timeout=60.0):
        self.wait_released()
        return self.start(timeout=timeout)

    def stop_process(self):
        """SIGSTOP: the process is frozen (no heartbeats, no answers) but keeps its sockets."""
        self.proc.send_signal(signal.SIGSTOP)

    def continue_process(self):
        self.proc.send_signal(signal.SIGCONT)


class Cluster:
    def __init__(self, workdir, size=3, extra=(), roles=None):
        """`roles`: node id -> process.roles (default: `size` nodes, all broker,controller)."""
        self.extra = list(extra)
        self.nodes = {}
        roles = roles or {i: "broker,controller" for i in range(1, size + 1)}
        for node_id, role in sorted(roles.items()):
            self.nodes[node_id] = ClusterNode(strata_bin(), workdir / ("node-%d" % node_id),
                                              node_id, self, role)

    def voters(self):
        return ",".join("%d@127.0.0.1:%d" % (n.node_id, n.controller_port)
                        for n in self.nodes.values() if n.is_voter)

    @property
    def bootstrap(self):
        return ",".join("127.0.0.1:%d" % n.kafka_port for n in self.nodes.values()
                        if n.running() and n.is_broker)

    def start(self, ids=None, timeout=60.0):
        """Starts the given nodes (all by default) at once (none is ready before a quorum is),
        then waits for each."""
        ids = list(ids or self.nodes)
        for i in ids:
            if self.nodes[i].starts:
                self.nodes[i].wait_released()
        for i in ids:
            self.nodes[i].launch()
        try:
            for i in ids:
                self.nodes[i].wait_ready(timeout)
        except BrokerStartError:
            self.stop()
            raise
        return self

    def kill(self, node_id):
        return self.nodes[node_id].kill()

    def stop(self, grace=15.0):
        """SIGTERM to every running node at once (each runs its controlled shutdown while a
        quorum is still up), then waits for each, SIGKILL after `grace` seconds."""
        running = [node for node in self.nodes.values() if node.running()]
        for node in running:
            node.continue_process()
            node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for node in running:
            # Not `terminate`: a second SIGTERM makes strata exit at once, skipping its
            # clean shutdown.
            try:
                node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.kill()
        for node in self.nodes.values():
            _live_brokers.discard(node)

    def log_tails(self):
        return "\n".join("--- node %d ---\n%s" % (i, n.stderr_tail(30)) for i, n in self.nodes.items())


def wait_for(predicate, timeout, message, interval=0.2):
    """`clients.wait_until` with the arguments in the order these tests read best."""
    return wait_until(predicate, timeout=timeout, interval=interval, message=message)


def metadata_from(node, topics=None):
    """Metadata v1 asked of this one node (not of a broker a client might prefer)."""
    return wire.parse_metadata_v1_response(wire.roundtrip(node.port, wire.metadata_v1_request(1, topics)))


def broker_ids(node):
    return sorted(b[0] for b in metadata_from(node)["brokers"])


def partitions_of(node, topic):
    """{partition: (leader, error)} as this node answers (Metadata v1 may auto-create it)."""
    for t in metadata_from(node, [topic])["topics"]:
        if t["name"] == topic:
            return {p["partition"]: (p["leader"], p["error"]) for p in t["partitions"]}
    return {}


def create(bootstrap, name, partitions, timeout=30):
    """CreateTopics of an RF=1 topic through confluent-kafka's AdminClient."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout)


def consume_values(bootstrap, topic, group, count, timeout=60):
    """The values a subscribed confluent-kafka consumer reads, until `count` distinct ones
    or `timeout` seconds."""
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.add(message.value())
    finally:
        consumer.close()
    return seen
