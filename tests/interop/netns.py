"""Brokers as separate hosts: each node of a cluster in its own network namespace, joined by
veth pairs to a bridge in the test's namespace, with real network faults (issue #16).

Layout for a harness with id K (random per run, so runs never collide):
  bridge   st<K>br            10.213.<K>.254/24 (the test process reaches every node here)
  node i   namespace st<K>n<i>, veth st<K>h<i> (bridge side) / st<K>v<i> (inside),
           address 10.213.<K>.<i>/24; Kafka on :9092, controller on :9093, admin on :9644.
Faults (iproute2 only: this kernel has no netem and the machine no iptables):
  isolate(i, from_=[j...])  blackhole routes both ways between node i and nodes j: TCP
                            between them stalls, clients still reach every node;
  throttle(i)               a token-bucket qdisc (tbf) on node i's link: a slow link that
                            queues, then drops, past its small buffer;
  heal()                    removes every route and qdisc added.
Everything is torn down in `close()` (namespaces, veths, bridge), also after a failure.
Traffic never leaves the machine: 10.213.0.0/16 exists only on these interfaces."""

import random
import subprocess
from pathlib import Path

from cluster import Cluster, ClusterNode
from conftest import strata_bin

KAFKA_PORT, CONTROLLER_PORT, ADMIN_PORT = 9092, 9093, 9644


def _ip(*args, check=True):
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise NetnsUnavailable("ip %s: %s" % (" ".join(args), out.stderr.strip()))
    return out


class NetnsUnavailable(RuntimeError):
    """Namespaces, veths or bridges cannot be made here (no root, no CONFIG_NET_NS...)."""


class NetnsNode(ClusterNode):
    def __init__(self, binary, workdir, node_id, cluster, namespace, host):
        super().__init__(binary, workdir, node_id, cluster)
        self.namespace = namespace
        self.host = host
        self.port = self.kafka_port = KAFKA_PORT
        self.controller_port = CONTROLLER_PORT
        self.admin_port = ADMIN_PORT

    @property
    def bootstrap(self):
        return "%s:%d" % (self.host, self.port)

    def command(self):
        cmd = ClusterNode.command(self)
        cmd = [part.replace("127.0.0.1", self.host) for part in cmd]
        return ["ip", "netns", "exec", self.namespace] + cmd

    def wait_released(self, timeout=30.0):
        """After a kill -9, waits until nothing listens on the node's ports inside its
        namespace (the kernel can hold a dead process's io_uring sockets a few seconds)."""
        import time
        ports = {self.port, self.controller_port, self.admin_port}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["ip", "netns", "exec", self.namespace, "cat", "/proc/net/tcp"],
                                 capture_output=True, text=True, timeout=10).stdout
            listening = {int(f[1].rsplit(":", 1)[1], 16) for f in
                         (line.split() for line in out.splitlines()[1:]) if len(f) > 3 and f[3] == "0A"}
            if not ports & listening:
                return
            time.sleep(0.1)
        raise AssertionError("ports %r still held in %s" % (ports, self.namespace))


class NetnsCluster(Cluster):
    def __init__(self, workdir, size=3, extra=()):
        self.id = random.randrange(1, 250)
        self.prefix = "st%d" % self.id
        self.subnet = "10.213.%d" % self.id
        self.bridge = self.prefix + "br"
        self.extra = list(extra)
        self.nodes = {}
        self._faults = []  # (namespace, ip route/tc arguments to undo)
        self._made = []
        try:
            self._build(size)
        except Exception:
            self.close()
            raise
        for i in range(1, size + 1):
            self.nodes[i] = NetnsNode(strata_bin(), Path(workdir) / ("node-%d" % i), i, self,
                                      self.prefix + "n%d" % i, "%s.%d" % (self.subnet, i))

    def _build(self, size):
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made.append(("link", self.bridge))
        _ip("addr", "add", self.subnet + ".254/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(1, size + 1):
            namespace, host_end, inner = (self.prefix + "n%d" % i, self.prefix + "h%d" % i,
                                          self.prefix + "v%d" % i)
            _ip("netns", "add", namespace)
            self._made.append(("netns", namespace))
            _ip("link", "add", host_end, "type", "veth", "peer", "name", inner)
            self._made.append(("link", host_end))
            _ip("link", "set", inner, "netns", namespace)
            _ip("link", "set", host_end, "master", self.bridge)
            _ip("link", "set", host_end, "up")
            _ip("-n", namespace, "addr", "add", "%s.%d/24" % (self.subnet, i), "dev", inner)
            _ip("-n", namespace, "link", "set", inner, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")

    def voters(self):
        return ",".join("%d@%s:%d" % (n.node_id, n.host, n.controller_port)
                        for n in self.nodes.values())

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes.values() if n.running())

    def isolate(self, node_id, from_=None):
        """Blackhole routes between `node_id` and each of `from_` (default: every other
        node), in both directions."""
        others = from_ or [i for i in self.nodes if i != node_id]
        node = self.nodes[node_id]
        for other in others:
            peer = self.nodes[other]
            for namespace, address in ((node.namespace, peer.host), (peer.namespace, node.host)):
                _ip("-n", namespace, "route", "add", "blackhole", address + "/32")
                self._faults.append((namespace, ["route", "del", "blackhole", address + "/32"]))

    def throttle(self, node_id, rate="256kbit"):
        """Token-bucket qdiscs on both ends of the node's link (each shapes what leaves
        through it): slow both ways, and dropping what a queue (20 ms at `rate`) cannot
        hold."""
        node = self.nodes[node_id]
        for namespace, device in ((node.namespace, self.prefix + "v%d" % node_id),
                                  (None, self.prefix + "h%d" % node_id)):
            prefix = ["ip", "netns", "exec", namespace] if namespace else []
            subprocess.run(prefix + ["tc", "qdisc", "add", "dev", device, "root", "tbf", "rate",
                                     rate, "burst", "16kbit", "latency", "20ms"],
                           check=True, capture_output=True, timeout=30)
            self._faults.append((namespace, ["tc", "qdisc", "del", "dev", device, "root"]))

    def heal(self):
        while self._faults:
            namespace, undo = self._faults.pop()
            if undo[0] == "tc":
                prefix = ["ip", "netns", "exec", namespace] if namespace else []
                subprocess.run(prefix + undo, capture_output=True, timeout=30)
            else:
                _ip("-n", namespace, *undo, check=False)

    def close(self):
        """Stops the nodes and removes everything the harness made."""
        try:
            if self.nodes:
                self.stop()
        finally:
            self.heal()
            for kind, name in reversed(self._made):
                if kind == "netns":
                    _ip("netns", "del", name, check=False)
                else:
                    _ip("link", "del", name, check=False)
            self._made = []


def available():
    """Whether this machine lets the test make namespaces (else why not)."""
    probe = "st-probe-%d" % random.randrange(1 << 30)
    out = _ip("netns", "add", probe, check=False)
    if out.returncode != 0:
        return False, out.stderr.strip()
    _ip("netns", "del", probe, check=False)
    return True, ""
