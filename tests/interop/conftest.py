"""Fixtures that run the strata broker binary for the interop suite.

Contract relied upon (see scripts/interop.sh):
  $STRATA_BIN serve --data-dir DIR --listen 127.0.0.1:PORT --advertise 127.0.0.1:PORT
                    --admin-listen 127.0.0.1:ADMINPORT --cores 2 --node-id 0
logs a line containing the word "ready" once it accepts connections.

Fixtures:
  broker         a fresh broker (fresh data dir) per test; use for restart tests
  shared_broker  one broker per test module; tests must use unique topic names
  topic_name     a unique, valid topic name for the current test

With STRATA_INTEROP_CLUSTER=N (N >= 2; scripts/interop.sh --cluster) `broker` and
`shared_broker` are a cluster of N nodes instead (`ClusterBroker`: every topic with N replicas,
`__consumer_offsets` too). It offers what a client needs, `bootstrap`; a test that reaches
for one process (its port for raw frames, a restart, its data directory) is skipped, saying
so.
"""

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# A debug broker beside the test command's other branches (two cores shared by three suites)
# once took over 30 s to open the storage of two topics; a broker that never gets ready still
# fails here, 90 s on.
READY_TIMEOUT_S = 90.0
TERM_GRACE_S = 5.0
LOG_TAIL_LINES = 60
_READY_RE = re.compile(rb"\bready\b", re.IGNORECASE)

_live_brokers = set()


def strata_bin():
    raw = os.environ.get("STRATA_BIN", "target/debug/strata")
    path = Path(raw)
    if not path.is_absolute():
        # relative paths: to the current directory if the file is there, else to the repo root
        path = path if path.exists() else REPO_ROOT / path
    return path.resolve()


# Ports free_port has handed out in this process: the kernel may offer a port again once its
# probe socket is closed, and one node once got the same port for its controller and admin
# listeners (the admin bind then failed).
_HANDED_OUT = set()


def free_port():
    """A free loopback port, never one this process was handed before."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no loopback port left that was not handed out before")


def _tail(path, lines=LOG_TAIL_LINES):
    try:
        data = Path(path).read_bytes()
    except OSError:
        return "<no log at %s>" % path
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


class BrokerStartError(Exception):
    pass


class Broker:
    """One strata process on fixed ports and a fixed data dir; can be killed and
    started again on the same data dir and ports."""

    def __init__(self, binary, workdir):
        self.binary = Path(binary)
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = self.workdir / "strata.stderr.log"
        self.stdout_path = self.workdir / "strata.stdout.log"
        self.port = free_port()
        self.admin_port = free_port()
        while self.admin_port == self.port:
            self.admin_port = free_port()
        self.proc = None
        self.starts = 0

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def command(self):
        return [
            str(self.binary), "serve",
            "--data-dir", str(self.data_dir),
            "--listen", "127.0.0.1:%d" % self.port,
            "--advertise", "127.0.0.1:%d" % self.port,
            "--admin-listen", "127.0.0.1:%d" % self.admin_port,
            "--cores", "2",
            "--node-id", "0",
        ]

    def stderr_tail(self, lines=LOG_TAIL_LINES):
        text = _tail(self.stderr_path, lines)
        out = _tail(self.stdout_path, lines)
        if out.strip() and not out.startswith("<no log"):
            text += "\n--- stdout ---\n" + out
        return text

    def _log_sizes(self):
        return tuple(p.stat().st_size if p.exists() else 0
                     for p in (self.stderr_path, self.stdout_path))

    def _ready_since(self, offsets):
        # The contract says stderr; stdout is checked too, as tracing's default writer is stdout.
        for path, off in zip((self.stderr_path, self.stdout_path), offsets):
            try:
                with open(path, "rb") as f:
                    f.seek(off)
                    if _READY_RE.search(f.read()):
                        return True
            except OSError:
                pass
        return False

    def start(self, timeout=READY_TIMEOUT_S):
        return self.launch().wait_ready(timeout)

    def launch(self):
        """Starts the process without waiting for it to be ready (see `wait_ready`). Call it
        from the thread that outlives the broker: the broker gets SIGKILL when the thread that
        started it ends (`setpriv --pdeathsig`)."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        if not self.binary.is_file():
            raise BrokerStartError(
                "strata binary not found at %s: build it (cargo build) or set STRATA_BIN"
                % self.binary)
        offsets = self._log_sizes()
        self.starts += 1
        with open(self.stderr_path, "ab") as err, open(self.stdout_path, "ab") as out:
            marker = ("\n=== interop: start #%d: %s ===\n"
                      % (self.starts, " ".join(self.command()))).encode()
            err.write(marker)
            err.flush()
            offsets = (offsets[0] + len(marker), offsets[1])
            cmd = self.command()
            # Kill the broker if this (pytest) process dies, so no broker outlives the run.
            setpriv = shutil.which("setpriv")
            if setpriv:
                cmd = [setpriv, "--pdeathsig", "KILL", "--"] + cmd
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         cwd=str(self.workdir))
        _live_brokers.add(self)
        self._launch_offsets = offsets
        return self

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        """Waits until the launched broker logged 'ready' and accepts connections."""
        offsets = self._launch_offsets
        deadline = time.monotonic() + timeout
        while True:
            if self._ready_since(offsets):
                break
            rc = self.proc.poll()
            if rc is not None:
                raise BrokerStartError("strata exited with code %s before logging 'ready':\n%s"
                                       % (rc, self.stderr_tail()))
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError("strata did not log 'ready' within %.0fs:\n%s"
                                       % (timeout, self.stderr_tail()))
            time.sleep(0.05)
        # 'ready' should mean accepting; allow a short grace period for the listener anyway.
        while True:
            try:
                host = getattr(self, "host", "127.0.0.1")
                socket.create_connection((host, self.port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise BrokerStartError("strata logged 'ready' but %s:%d refuses "
                                           "connections:\n%s" % (host, self.port, self.stderr_tail()))
                time.sleep(0.05)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL (crash). Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        try:
            return self.proc.wait(timeout=10)
        finally:
            _live_brokers.discard(self)

    def terminate(self, grace=TERM_GRACE_S):
        """SIGTERM, then SIGKILL after `grace` seconds.
        Returns (exit_code, exited_on_sigterm)."""
        if self.proc is None:
            return None, True
        if self.proc.poll() is not None:
            _live_brokers.discard(self)
            return self.proc.returncode, True
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=grace), True
        except subprocess.TimeoutExpired:
            return self.kill(), False
        finally:
            _live_brokers.discard(self)

    def restart(self, timeout=READY_TIMEOUT_S):
        """SIGKILL, then start again on the same data dir and ports."""
        self.kill()
        return self.start(timeout=timeout)

    def wait_port_free(self, timeout=10.0):
        """After a stop, wait until nothing accepts on the port (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            except OSError:
                return True
            time.sleep(0.05)
        return False


@atexit.register
def _kill_leftovers():
    for b in list(_live_brokers):
        try:
            b.kill()
        except Exception:
            pass


# --- pytest plumbing --------------------------------------------------------
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name in ("broker", "shared_broker"):
            b = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if isinstance(b, Broker):
                report.sections.append(
                    ("strata log tail (%s, %s)" % (b.stderr_path, report.when), b.stderr_tail()))
            elif isinstance(b, ClusterBroker):
                report.sections.append(
                    ("strata log tails (cluster, %s)" % report.when, b.stderr_tail()))


CLUSTER_SIZE = int(os.environ.get("STRATA_INTEROP_CLUSTER") or 0)


class ClusterBroker:
    """The `broker` fixture as a cluster of CLUSTER_SIZE nodes on loopback (cluster.py),
    with `default.replication.factor` and `offsets.topic.replication.factor` set to the size:
    auto-created topics, CreateTopics with replication factor -1 (librdkafka's and
    kafka-python's default) and the group offsets are all replicated."""

    def __init__(self, workdir):
        from cluster import Cluster  # cluster.py imports this module
        size = str(CLUSTER_SIZE)
        self.cluster = Cluster(workdir, size=CLUSTER_SIZE,
                               extra=["--set", "default.replication.factor=" + size,
                                      "--set", "offsets.topic.replication.factor=" + size])

    def start(self):
        self.cluster.start()
        return self

    @property
    def bootstrap(self):
        return self.cluster.bootstrap

    def running(self):
        return any(node.running() for node in self.cluster.nodes.values())

    def kill(self):
        for node in self.cluster.nodes.values():
            node.kill()

    def terminate(self):
        self.cluster.stop()

    def stderr_tail(self, lines=LOG_TAIL_LINES):
        return self.cluster.log_tails()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        pytest.skip("uses broker.%s, which only a single node has (STRATA_INTEROP_CLUSTER=%d)"
                    % (name, CLUSTER_SIZE))


def pytest_collection_modifyitems(config, items):
    if CLUSTER_SIZE < 2:
        return
    skip = pytest.mark.skip(reason="asserts a single node's answers (STRATA_INTEROP_CLUSTER=%d)"
                            % CLUSTER_SIZE)
    for item in items:
        if "single_node" in item.keywords:
            item.add_marker(skip)


def _start_or_fail(binary, workdir):
    if CLUSTER_SIZE >= 2:
        c = ClusterBroker(workdir)
        try:
            return c.start()
        except BrokerStartError as e:
            c.kill()
            pytest.fail(str(e), pytrace=False)
    b = Broker(binary, workdir)
    try:
        return b.start()
    except BrokerStartError as e:
        error = str(e)
    b.kill()
    pytest.fail(error, pytrace=False)


def _stop(b):
    if b.running():
        b.terminate()


@pytest.fixture
def broker(tmp_path):
    b = _start_or_fail(strata_bin(), tmp_path / "broker")
    yield b
    _stop(b)


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    b = _start_or_fail(strata_bin(), tmp_path_factory.mktemp("shared-broker"))
    yield b
    _stop(b)


@pytest.fixture
def topic_name(request):
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:60]
    return "%s-%s" % (base, uuid.uuid4().hex[:8])
