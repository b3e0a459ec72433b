"""The README's cluster quick start runs as written.

The first ```sh block under the README's "A cluster on one machine" heading is run with
`bash -euo pipefail`, changed in two ways only: `target/release/` becomes the directory of the
binaries under test (STRATA_BIN's, with strata-bench beside it) and `/tmp/strata-local` a
scratch directory. It starts `strata cluster local` on its default ports (Kafka 9092, 9192,
9292, each controller one above and admin listener ten above), so it runs only where those
are free, and fails saying so otherwise. From its output: the cluster became ready, the keyed
lines of the block's `printf` were produced and landed at contiguous offsets, `consume` read
exactly those records back, `cluster health` said healthy with three brokers, `cluster
partitions` showed every partition with three in-sync replicas, strata-bench printed its
summary with 0 errors, and the block's own `kill %1; wait` stopped every node.
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, strata_bin

pytestmark = [pytest.mark.single_node, pytest.mark.timeout(240)]

HEADING = "## A cluster on one machine"
RELEASE_DIR = "target/release/"
README_DATA_DIR = "/tmp/strata-local"
RUN_TIMEOUT_S = 180
NODES = 3
BASE_PORT = 9092


def quick_start_block():
    """The first ```sh block under HEADING, before the next heading."""
    text = (REPO_ROOT / "README.md").read_text()
    assert HEADING + "\n" in text, "README.md has no %r heading" % HEADING
    section = text.split(HEADING + "\n", 1)[1]
    # The next heading ends the section (a shell comment, `# ...`, does not).
    section = re.split(r"^##+ ", section, maxsplit=1, flags=re.M)[0]
    match = re.search(r"^```sh\n(.*?)^```$", section, re.S | re.M)
    assert match, "no ```sh block under %r in README.md" % HEADING
    return match.group(1)


def local_ports():
    """The ports of `strata cluster local --nodes 3` on its default base port (see
    broker/src/cli/cluster.rs, `ports`): Kafka, controller and admin listener of each node."""
    ports = []
    for i in range(NODES):
        kafka = BASE_PORT + 100 * i
        ports += [kafka, kafka + 1, kafka + 10]
    return ports


def listening_ports():
    """Ports a TCP socket on this machine listens on (`/proc/net/tcp` and `tcp6`), as the
    broker itself checks before it binds with SO_REUSEPORT: connections a stopped cluster
    left in TIME_WAIT do not keep a node from binding, a listener does."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":  # TCP_LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def busy_ports(wait_s=5.0):
    """The cluster's ports something listens on, after waiting up to `wait_s` for a listener
    of a process that just exited to go away (io_uring releases it a moment later)."""
    deadline = time.monotonic() + wait_s
    while True:
        busy = sorted(set(local_ports()) & listening_ports())
        if not busy or time.monotonic() >= deadline:
            return busy
        time.sleep(0.2)


def processes_with(text):
    """Pids of processes whose command line contains `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path("/proc/%s/cmdline" % pid).read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(pid))
    return found


def produced_lines(block):
    """(key, value) pairs of the `printf '...' |` that feeds `strata produce`."""
    match = re.search(r"printf '([^']*)' \|", block)
    assert match, "no printf '...' | feeding strata produce in the block:\n" + block
    lines = match.group(1).split("\\n")
    return [tuple(line.split("\\t", 1)) for line in lines if line]


def describe_failure(what, proc_output, data_dir):
    logs = "\n".join("--- %s (tail)\n%s" % (log.name, "\n".join(log.read_text(
        errors="replace").splitlines()[-30:])) for log in sorted(data_dir.glob("node-*.log")))
    stdout, stderr = proc_output
    return "%s\n--- stdout\n%s\n--- stderr\n%s\n%s" % (what, stdout, stderr, logs)


def test_the_readme_cluster_quick_start_runs_as_written(tmp_path):
    block = quick_start_block()
    assert RELEASE_DIR + "strata " in block and RELEASE_DIR + "strata-bench " in block, block
    assert README_DATA_DIR in block, block

    strata = strata_bin()
    bench = strata.parent / "strata-bench"
    assert strata.is_file(), "no strata binary at %s (STRATA_BIN)" % strata
    assert bench.is_file(), "no strata-bench beside %s: build it (cargo build -p bench)" % strata
    busy = busy_ports()
    if busy:
        pytest.fail("ports %s are in use: the README's cluster quick start runs `strata cluster "
                    "local` on its default ports %s; stop whatever listens there and run again"
                    % (busy, local_ports()))

    data_dir = tmp_path / "strata-local"
    script = block.replace(RELEASE_DIR, str(strata.parent) + "/")
    script = script.replace(README_DATA_DIR, str(data_dir))
    script_path = tmp_path / "quick_start.sh"
    script_path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "STRATA_CLIENT_CONFIG"}

    # Its own session and process group: `cluster local` and its nodes are in it, so a
    # failure or a timeout kills every one of them. Output goes to files, not pipes: a node
    # left running by a failed line must not keep the test waiting for end of file.
    stdout_path, stderr_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", str(script_path)], cwd=tmp_path,
                                env=env, stdout=out, stderr=err, start_new_session=True)
    try:
        outcome = None
        try:
            proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            outcome = "the quick start did not finish within %d s" % RUN_TIMEOUT_S
        output = (stdout_path.read_text(errors="replace"), stderr_path.read_text(errors="replace"))
        stdout, stderr = output
        if outcome is None and proc.returncode != 0:
            outcome = "the quick start exited %d" % proc.returncode
        assert outcome is None, describe_failure(outcome, output, data_dir)

        bootstrap = ",".join("127.0.0.1:%d" % (BASE_PORT + 100 * i) for i in range(NODES))
        assert "bootstrap servers: %s" % bootstrap in stdout, stdout
        assert "created topic orders with 6 partitions" in stdout, stdout

        # Produced: every line of the printf, each at the next offset of its partition.
        sent = dict(produced_lines(block))
        produced = [(int(p), int(o), k)
                    for p, o, k in re.findall(r"^(\d+) (\d+) ([^=\s]+)$", stdout, re.M)]
        assert sorted(key for _, _, key in produced) == sorted(sent), stdout
        offsets = {}
        for partition, offset, _ in produced:
            assert 0 <= partition < 6, stdout
            offsets.setdefault(partition, []).append(offset)
        for partition, seen in offsets.items():
            assert sorted(seen) == list(range(len(seen))), (partition, stdout)

        # Consumed: exactly those records, at the same places, with their values.
        consumed = {(int(p), int(o), k, v)
                    for p, o, k, v in re.findall(r"^(\d+) (\d+) ([^=\s]+)=(\S+)$", stdout, re.M)}
        assert consumed == {(p, o, k, sent[k]) for p, o, k in produced}, stdout

        assert re.search(r"^healthy:\s+yes$", stdout, re.M), stdout
        assert re.search(r"^brokers:\s+\[1, 2, 3\]$", stdout, re.M), stdout
        assert re.search(r"^brokers down \(fenced\):\s+\[\]$", stdout, re.M), stdout
        rows = re.findall(r"^orders\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)$", stdout, re.M)
        assert sorted(int(r[0]) for r in rows) == list(range(6)), stdout
        for _, leader, replicas, isr, status in rows:
            assert status == "ok" and len(replicas.split(",")) == 3, rows
            assert sorted(isr.split(",")) == sorted(replicas.split(",")), rows
            assert leader in replicas.split(","), rows

        summary = re.search(r"^(\d+) records sent, .*; (\d+) errors$", stdout, re.M)
        assert summary, stdout
        assert int(summary.group(1)) > 0 and int(summary.group(2)) == 0, summary.group(0)

        assert "every node stopped" in stderr, stderr
        assert processes_with(str(data_dir)) == [], "nodes left running after `kill %1; wait`"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        for pid in processes_with(str(data_dir)):
            os.kill(pid, signal.SIGKILL)
