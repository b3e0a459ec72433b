"""Brokers as separate hosts without network namespaces: the fault proxy between brokers that
the network-fault harness falls back to where `ip netns` cannot be used (issue #16).

Every listener of every node, Kafka and controller, sits behind a TCP proxy on loopback. The
node listens on a private port and is reached only at its proxy's port: it advertises that
port in Metadata (`advertised.listeners`), and the voters list it
(`controller.quorum.voters`; the node's own CONTROLLER listener is the private port). So every
connection to a node passes through its proxy, from clients and from the other brokers alike.

On accept, the proxy finds which process opened the connection: `/proc/net/tcp` names the
connecting socket's inode, and `/proc/PID/fd` the node process that holds it. So each
connection is a link `node i -> node j` or `client -> node j`. Faults act on links, as the
netns harness's routes and qdiscs do:
  isolate(i, from_)  every link between node i and each of `from_` (default: all other nodes)
                     stalls both ways: nothing is read or written, as on a blackholed route.
                     TCP buffers fill, and connections made meanwhile stall too. Clients
                     still reach every node;
  throttle(i, rate)  every link of node i, clients' included, is limited to `rate` each way
                     (a token bucket with a 2 KB burst);
  heal()             every link flows again; what a stalled link held is delivered then.

A connection whose process cannot be found counts as a client's. A fault on it then has no
effect, and the test that needs the fault fails waiting for it: the harness never passes
without having injected its faults. `unidentified` counts such connections."""

import os
import select
import socket
import threading
import time
from pathlib import Path

from cluster import Cluster, ClusterNode
from conftest import strata_bin

BURST_BYTES = 2000
QUEUE_BYTES = 1 << 20


def parse_rate(rate):
    """'64kbit' / '1mbit' / a number of bits per second -> bytes per second."""
    text = str(rate).lower()
    for suffix, scale in (("kbit", 1000), ("mbit", 1000 * 1000), ("bit", 1)):
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * scale / 8)
    return int(text) // 8


def _proc_net_address(port):
    return "0100007F:%04X" % port


class Links:
    """The fault state of every link, shared by all proxies of a cluster."""

    def __init__(self):
        self.lock = threading.Lock()
        self.blocked = set()  # (src, dst) node-id pairs
        self.rates = {}  # node id -> bytes/s on every link it is an end of

    def state(self, src, dst):
        """(blocked, bytes per second or None) for a link from `src` (a node id or None for a
        client) to node `dst`."""
        with self.lock:
            if (src, dst) in self.blocked:
                return True, None
            limits = [self.rates[n] for n in (src, dst) if n in self.rates]
            return False, (min(limits) if limits else None)


class NodeProxy:
    """One listener's proxy: 127.0.0.1:<port> forwards to 127.0.0.1:<target_port>."""

    def __init__(self, cluster, node_id, target_port):
        self.cluster = cluster
        self.node_id = node_id
        self.target_port = target_port
        self.sources = {}  # node id (None: a client) -> connections accepted from it
        self._stopped = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name="peer-proxy-%d:%d" % (node_id, self.port))
        self._thread.start()

    def stop(self):
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept_loop(self):
        while not self._stopped.is_set():
            try:
                downstream, peer = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            src = self.cluster.owner(peer[1], self.port)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                downstream.close()  # the node is down: the connecting side sees a close
                continue
            self.sources[src] = self.sources.get(src, 0) + 1
            threading.Thread(target=self._pump, args=(downstream, upstream, src), daemon=True,
                             name="peer-link-%s-%d" % (src, self.node_id)).start()

    def _pump(self, downstream, upstream, src):
        """Moves bytes both ways under the link's fault state until either side closes."""
        links = self.cluster.links
        for sock in (downstream, upstream):
            sock.setblocking(False)
        other = {downstream: upstream, upstream: downstream}
        pending = {downstream: bytearray(), upstream: bytearray()}  # bytes to write to it
        tokens = {downstream: float(BURST_BYTES), upstream: float(BURST_BYTES)}  # read budget
        last = time.monotonic()
        try:
            while not self._stopped.is_set():
                blocked, rate = links.state(src, self.node_id)
                now = time.monotonic()
                elapsed, last = now - last, now
                if blocked:
                    time.sleep(0.05)
                    continue
                if rate is not None:
                    for sock in tokens:
                        tokens[sock] = min(BURST_BYTES, tokens[sock] + rate * elapsed)
                readable = [s for s in (downstream, upstream)
                            if len(pending[other[s]]) < QUEUE_BYTES
                            and (rate is None or tokens[s] >= 1)]
                writable = [s for s in (downstream, upstream) if pending[s]]
                timeout = 0.1 if rate is None else 0.02
                ready_r, ready_w, _ = select.select(readable, writable, [], timeout)
                for sock in ready_r:
                    size = 65536 if rate is None else max(1, int(tokens[sock]))
                    try:
                        data = sock.recv(size)
                    except BlockingIOError:
                        continue
                    if not data:
                        return
                    if rate is not None:
                        tokens[sock] -= len(data)
                    pending[other[sock]] += data
                for sock in ready_w:
                    try:
                        sent = sock.send(pending[sock])
                    except BlockingIOError:
                        continue
                    del pending[sock][:sent]
        except OSError:
            return
        finally:
            for sock in (downstream, upstream):
                try:
                    sock.close()
                except OSError:
                    pass


class ProxiedNode(ClusterNode):
    """A node behind its cluster's proxies: it listens on private ports, and is advertised and
    listed as a voter at the proxies' ports."""

    def __init__(self, binary, workdir, node_id, cluster):
        super().__init__(binary, workdir, node_id, cluster)
        self.host = "127.0.0.1"
        self.kafka_proxy = NodeProxy(cluster, node_id, self.kafka_port)
        self.controller_proxy = NodeProxy(cluster, node_id, self.controller_port)

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.kafka_proxy.port

    def command(self):
        cmd = ClusterNode.command(self)
        cmd[cmd.index("--listen") + 1] = "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (
            self.kafka_port, self.controller_port)
        cmd[cmd.index("--advertise") + 1] = "127.0.0.1:%d" % self.kafka_proxy.port
        return cmd


class ProxiedCluster(Cluster):
    """The `NetnsCluster` interface (nodes, bootstrap, isolate, throttle, heal, close) on
    loopback, with faults injected by the proxies."""

    def __init__(self, workdir, size=3, extra=()):
        self.extra = list(extra)
        self.links = Links()
        self.unidentified = 0
        self.nodes = {}
        for i in range(1, size + 1):
            self.nodes[i] = ProxiedNode(strata_bin(), Path(workdir) / ("node-%d" % i), i, self)

    def voters(self):
        return ",".join("%d@127.0.0.1:%d" % (n.node_id, n.controller_proxy.port)
                        for n in self.nodes.values())

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes.values() if n.running())

    def owner(self, peer_port, proxy_port):
        """The id of the node whose process opened the connection from 127.0.0.1:`peer_port`
        to the proxy on `proxy_port`, or None (a client, or not found)."""
        local, remote = _proc_net_address(peer_port), _proc_net_address(proxy_port)
        inode = None
        try:
            with open("/proc/net/tcp") as table:
                for line in table.readlines()[1:]:
                    fields = line.split()
                    if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                        inode = fields[9]
                        break
        except OSError:
            pass
        if inode is None:
            self.unidentified += 1
            return None
        target = "socket:[%s]" % inode
        for node_id, node in self.nodes.items():
            if not node.running():
                continue
            fd_dir = "/proc/%d/fd" % node.proc.pid
            try:
                fds = os.listdir(fd_dir)
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(os.path.join(fd_dir, fd)) == target:
                        return node_id
                except OSError:
                    continue
        return None  # a client: the test process or a tool it started

    def peer_links(self):
        """{(src, dst): connections accepted} between nodes, over every proxy so far."""
        links = {}
        for node in self.nodes.values():
            for proxy in (node.kafka_proxy, node.controller_proxy):
                for src, count in proxy.sources.items():
                    if src is not None:
                        links[(src, node.node_id)] = links.get((src, node.node_id), 0) + count
        return links

    def isolate(self, node_id, from_=None):
        others = from_ or [i for i in self.nodes if i != node_id]
        with self.links.lock:
            for other in others:
                self.links.blocked |= {(node_id, other), (other, node_id)}

    def throttle(self, node_id, rate="256kbit"):
        with self.links.lock:
            self.links.rates[node_id] = parse_rate(rate)

    def heal(self):
        with self.links.lock:
            self.links.blocked.clear()
            self.links.rates.clear()

    def close(self):
        try:
            if self.nodes:
                self.stop()
        finally:
            self.heal()
            for node in self.nodes.values():
                node.kafka_proxy.stop()
                node.controller_proxy.stop()

