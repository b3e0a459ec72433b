"""A strata cluster on loopback ports for the interop suite: N nodes, each broker,controller
and a voter (`controller.quorum.voters`), one shard each, started and stopped together or one
at a time (kill -9, SIGSTOP, restart on the same data directory and ports)."""

import signal
import time

from conftest import Broker, BrokerStartError, _live_brokers, free_port, strata_bin


class ClusterNode(Broker):
    def __init__(self, binary, workdir, node_id, cluster):
        super().__init__(binary, workdir)
        self.node_id = node_id
        self.cluster = cluster
        self.controller_port = free_port()

    def command(self):
        cmd = super().command()
        # One shard per node: three nodes share the machine's cores.
        cmd[cmd.index("--cores") + 1] = "1"
        cmd[cmd.index("--node-id") + 1] = str(self.node_id)
        return cmd + ["--set", "controller.quorum.voters=" + self.cluster.voters()] + self.cluster.extra

    def stop_process(self):
        """SIGSTOP: the process is frozen (no heartbeats, no answers) but keeps its sockets."""
        self.proc.send_signal(signal.SIGSTOP)

    def continue_process(self):
        self.proc.send_signal(signal.SIGCONT)


class Cluster:
    def __init__(self, workdir, size=3, extra=()):
        self.extra = list(extra)
        self.nodes = {}
        for node_id in range(1, size + 1):
            self.nodes[node_id] = ClusterNode(strata_bin(), workdir / ("node-%d" % node_id), node_id, self)

    def voters(self):
        return ",".join("%d@127.0.0.1:%d" % (n.node_id, n.controller_port) for n in self.nodes.values())

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes.values() if n.running())

    def start(self, ids=None, timeout=60.0):
        """Starts the given nodes (all by default) at once (none is ready before a quorum is),
        then waits for each."""
        ids = list(ids or self.nodes)
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

    def stop(self):
        for node in self.nodes.values():
            if node.running():
                node.continue_process()
                node.terminate()
            _live_brokers.discard(node)

    def log_tails(self):
        return "\n".join("--- node %d ---\n%s" % (i, n.stderr_tail(30)) for i, n in self.nodes.items())


def wait_for(predicate, timeout, message, interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(interval)
    raise AssertionError("%s: not within %.0f s (last error: %r)" % (message, timeout, last))
