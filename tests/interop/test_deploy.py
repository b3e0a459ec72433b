"""The bare-metal deployment files in deploy/ (issue #7):

- the systemd unit passes `systemd-analyze verify` (on a copy whose ExecStart names the built
  binary, since verify requires the executable to exist) and keeps the directives the broker
  depends on (user, locked memory, open files, SIGTERM with a stop timeout);
- deploy/install.sh lays out every file with its mode under a scratch --prefix, runs again
  without error and without touching an operator's strata.toml, installs a binary that runs,
  and refuses a missing binary before writing anything;
- every metric and label name in the Grafana dashboard's queries is on a live broker's
  /metrics page after produce, fetch, an error and a group commit (labels Prometheus adds to
  every scraped series, instance and job, excepted);
- the sysctl.d and limits.d files are well-formed, with a comment above every setting.
"""
import filecmp
import json
import re
import shutil
import stat
import subprocess
import time
import urllib.request
from pathlib import Path

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families

import wire
from clients import ck_consume, ck_consumer, ck_produce, make_messages
from conftest import free_port, strata_bin
from test_acceptance import create_topic

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "strata.service"
INSTALL = DEPLOY / "install.sh"
DASHBOARD = DEPLOY / "grafana" / "strata-dashboard.json"
SYSCTL = DEPLOY / "sysctl.d" / "90-strata.conf"
LIMITS = DEPLOY / "limits.d" / "90-strata.conf"
EXEC_START = "/usr/local/bin/strata serve --config /etc/strata/strata.toml"
# Labels the Prometheus server attaches to every series it scrapes; the broker never writes them.
TARGET_LABELS = {"instance", "job"}
T = 30


def unit_directives(text):
    """{(section, key): [values]} of a systemd unit (comments and blank lines skipped)."""
    out, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.setdefault((section, key.strip()), []).append(value.strip())
    return out


# --- systemd unit -----------------------------------------------------------
def test_systemd_unit_passes_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    binary = strata_bin()
    assert binary.is_file(), "strata binary not found at %s: build it or set STRATA_BIN" % binary
    text = UNIT.read_text()
    assert "\nExecStart=%s\n" % EXEC_START in text
    # verify insists that ExecStart's executable exists: check a copy that runs the built one.
    unit = tmp_path / "strata.service"
    unit.write_text(text.replace("ExecStart=/usr/local/bin/strata ", "ExecStart=%s " % binary))
    out = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                         timeout=60)
    output = out.stdout + out.stderr
    # verify exits 0 on unknown keys and bad values too; it only prints them.
    problems = [line for line in output.splitlines() if "strata.service" in line]
    assert out.returncode == 0 and not problems, output

    directives = unit_directives(text)
    expected = {
        ("Unit", "After"): "network-online.target",
        ("Service", "User"): "strata",
        ("Service", "Group"): "strata",
        ("Service", "WorkingDirectory"): "/var/lib/strata",
        ("Service", "LimitMEMLOCK"): "infinity",
        ("Service", "LimitNOFILE"): "1048576",
        ("Service", "AmbientCapabilities"): "CAP_IPC_LOCK",
        ("Service", "KillSignal"): "SIGTERM",
        ("Service", "TimeoutStopSec"): "60",
        ("Service", "Restart"): "on-failure",
        ("Service", "StateDirectory"): "strata",
    }
    for key, value in expected.items():
        assert directives.get(key) == [value], (key, directives.get(key))
    assert directives[("Service", "Type")][0] in ("simple", "exec")


# --- install.sh -------------------------------------------------------------
def install(prefix, *args):
    return subprocess.run([str(INSTALL), "--prefix", str(prefix), *args],
                          capture_output=True, text=True, timeout=120)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_install_sh_lays_out_a_prefix_runs_twice_and_keeps_the_operators_config(tmp_path):
    prefix = tmp_path / "root"
    binary = strata_bin()
    first = install(prefix, "--binary", str(binary))
    assert first.returncode == 0, first.stdout + first.stderr
    # Only a real installation to / as root creates the user.
    assert "not creating the strata user" in first.stdout
    for step in ("systemctl daemon-reload", "sysctl --system", "systemctl enable --now strata",
                 "strata doctor --config /etc/strata/strata.toml"):
        assert step in first.stdout, "next step %r not printed:\n%s" % (step, first.stdout)

    layout = {
        "usr/local/bin/strata": (0o755, binary),
        "etc/strata/strata.toml": (0o640, DEPLOY / "strata.toml"),
        "etc/systemd/system/strata.service": (0o644, UNIT),
        "etc/sysctl.d/90-strata.conf": (0o644, SYSCTL),
        "etc/security/limits.d/90-strata.conf": (0o644, LIMITS),
    }
    for relative, (want_mode, source) in layout.items():
        path = prefix / relative
        assert path.is_file(), "%s not installed" % relative
        assert mode(path) == want_mode, "%s has mode %o" % (relative, mode(path))
        assert filecmp.cmp(path, source, shallow=False), "%s differs from %s" % (relative, source)
    for relative in ("var/lib/strata", "var/log/strata"):
        assert (prefix / relative).is_dir() and mode(prefix / relative) == 0o750, relative

    config = prefix / "etc/strata/strata.toml"
    edited = config.read_text() + "\n# changed by the operator\n"
    config.write_text(edited)
    second = install(prefix, "--binary", str(binary))
    assert second.returncode == 0, second.stdout + second.stderr
    assert config.read_text() == edited, "a second run overwrote the operator's strata.toml"
    assert mode(prefix / "var/lib/strata") == 0o750

    version = subprocess.run([str(prefix / "usr/local/bin/strata"), "--version"],
                             capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("strata "), version


def test_install_sh_refuses_a_missing_binary_before_writing_anything(tmp_path):
    prefix = tmp_path / "root"
    out = install(prefix, "--binary", str(tmp_path / "no-such-strata"))
    assert out.returncode != 0
    assert "no strata binary" in out.stderr, out.stderr
    assert not prefix.exists(), "install.sh wrote under the prefix before failing"
    usage = subprocess.run([str(INSTALL), "--help"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0 and "--prefix" in usage.stdout and "--no-user" in usage.stdout


# --- Grafana dashboard ------------------------------------------------------
def dashboard_queries(dashboard):
    """Every PromQL expression in the dashboard: panel targets (rows included) and the
    label_values() queries of template variables, rewritten as selectors."""
    exprs = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            exprs.append((panel["title"], target["expr"]))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            query = query["query"] if isinstance(query, dict) else query
            m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query)
            assert m, "unexpected variable query %r" % query
            exprs.append(("variable " + variable["name"], "%s{%s=~\".*\"}" % m.groups()))
    return exprs


def labels_used(expr):
    """Label names in {...} selectors and by (...) / without (...) / on (...) / ignoring (...)
    clauses (the labels label_replace writes, as in `or on() label_replace(vector(0), ...)`, are
    made by the query, not read from the broker)."""
    used = set()
    for selector in re.findall(r"\{([^{}]*)\}", expr):
        used.update(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", selector))
    for clause in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        used.update(name.strip() for name in clause.split(",") if name.strip())
    return used


def scrape(broker):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % broker.admin_port,
                                timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def test_grafana_dashboard_queries_only_metrics_and_labels_the_broker_exports(
        shared_broker, topic_name):
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36 and dashboard["panels"]
    assert any(v["type"] == "datasource" and v["query"] == "prometheus"
               for v in dashboard["templating"]["list"]), "no Prometheus data source variable"

    # Traffic that makes every family the dashboard reads show up with its labels: produce
    # and fetch (latency, topic traffic, fsync), an out-of-range fetch (an error code) and a
    # group commit (lag).
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    msgs = make_messages(20, prefix="deploy")
    ck_produce(bootstrap, topic_name, msgs, partition=0)
    assert len(ck_consume(bootstrap, topic_name, 5, partition=0)) == 5
    fetched = wire.parse_fetch_v4_response(
        wire.roundtrip(shared_broker.port, wire.fetch_v4_request(7, topic_name, 0, 10 ** 9)))
    assert fetched[(topic_name, 0)]["error"] == wire.OFFSET_OUT_OF_RANGE
    consumer = ck_consumer(bootstrap, **{"group.id": topic_name + "-group"})
    try:
        consumer.commit(offsets=[ck.TopicPartition(topic_name, 0, 5)], asynchronous=False)
    finally:
        consumer.close()
    # A committed transaction (the transaction counters and duration) and one left open (the
    # last stable offset lag), aborted after the scrape.
    transactional = ck.Producer({"bootstrap.servers": bootstrap,
                                 "transactional.id": topic_name + "-txn"})
    transactional.init_transactions(30)
    for commit in (True, False):
        transactional.begin_transaction()
        transactional.produce(topic_name, value=b"txn", partition=1)
        transactional.flush(30)
        if commit:
            transactional.commit_transaction(30)

    exported = {}  # sample name (with _total, _bucket, ...) -> label names seen on it
    for family in text_string_to_metric_families(scrape(shared_broker)):
        for sample in family.samples:
            exported.setdefault(sample.name, set()).update(sample.labels)
    transactional.abort_transaction(30)

    queries = dashboard_queries(dashboard)
    assert len(queries) >= 10
    for title, expr in queries:
        names = set(re.findall(r"\bstrata_[a-z_]+", expr))
        assert names, "%s: no strata metric in %r" % (title, expr)
        missing = sorted(name for name in names if name not in exported)
        assert not missing, "%s: %s not on /metrics (query %r)" % (title, missing, expr)
        known = set().union(*(exported[name] for name in names)) | TARGET_LABELS
        unknown = sorted(labels_used(expr) - known)
        assert not unknown, "%s: labels %s are not labels of %s (query %r)" % (
            title, unknown, sorted(names), expr)
    # The panels the operator guide promises.
    used = " ".join(expr for _, expr in queries)
    for name in ("strata_request_latency_seconds_bucket", "strata_fsync_latency_seconds_bucket",
                 "strata_requests_total", "strata_request_errors_total",
                 "strata_topic_messages_in_total", "strata_topic_bytes_in_total",
                 "strata_topic_messages_out_total", "strata_topic_bytes_out_total",
                 "strata_consumer_group_lag", "strata_connections_open",
                 "strata_router_queue_depth", "strata_shard_partitions",
                 "strata_controller_leader", "strata_controller_term",
                 "strata_controller_applied_index", "strata_controller_voter_lag",
                 "strata_cluster_brokers"):
        assert name in used, "the dashboard has no panel for %s" % name


# --- sysctl.d and limits.d --------------------------------------------------
def setting_lines(path):
    """(line number, line, previous non-blank line) of every non-comment line."""
    out, previous = [], ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line[0] not in "#;":
            out.append((number, line, previous))
        previous = line
    return out


def test_sysctl_file_is_key_equals_value_with_a_comment_for_every_setting():
    keys = []
    lines = setting_lines(SYSCTL)
    assert len(lines) >= 10
    for number, line, previous in lines:
        # "key = value"; a leading "-" makes sysctl ignore a key the kernel lacks.
        m = re.fullmatch(r"-?([a-z0-9_\-]+(?:\.[a-z0-9_\-]+)+)\s*=\s*(\S(?:.*\S)?)", line)
        assert m, "%s:%d: not `key = value`: %r" % (SYSCTL.name, number, line)
        assert all(token.isdigit() for token in m.group(2).split()), \
            "%s:%d: value is not numeric: %r" % (SYSCTL.name, number, line)
        assert previous.startswith("#"), "%s:%d: no comment above %r" % (SYSCTL.name, number, line)
        keys.append(m.group(1))
    assert len(keys) == len(set(keys)), "duplicate keys: %s" % keys
    for key in ("vm.swappiness", "vm.dirty_ratio", "vm.dirty_background_ratio",
                "net.core.somaxconn", "net.core.rmem_max", "net.core.wmem_max",
                "net.ipv4.tcp_max_syn_backlog", "fs.aio-max-nr", "kernel.io_uring_disabled"):
        assert key in keys, key


def test_limits_file_is_well_formed_and_matches_the_unit():
    limits = {}
    for number, line, previous in setting_lines(LIMITS):
        fields = line.split()
        assert len(fields) == 4, "%s:%d: want `domain type item value`: %r" % (LIMITS.name, number, line)
        domain, kind, item, value = fields
        assert domain == "strata" and kind in ("soft", "hard", "-"), (number, line)
        assert item in ("memlock", "nofile"), (number, line)
        assert value == "unlimited" or value.isdigit(), (number, line)
        limits[(kind, item)] = value
    for kind in ("soft", "hard"):
        assert limits.get((kind, "memlock")) == "unlimited"
    # The unit sets the same limits for the service itself.
    directives = unit_directives(UNIT.read_text())
    assert limits.get(("soft", "nofile")) == limits.get(("hard", "nofile")) \
        == directives[("Service", "LimitNOFILE")][0]


# --- SASL_SSL example -----------------------------------------------------------------------
def test_the_sasl_ssl_example_config_serves_scram_users_over_tls(tmp_path):
    """deploy/sasl_ssl.toml as it is, with only its addresses, paths and ports moved to this
    machine: certificates from `strata cert self-signed`, a user made with `strata user
    create` on the loopback PLAINTEXT listener, and that user producing and consuming with
    SCRAM-SHA-512 over the SASL_SSL listener; a wrong password is refused."""
    certs = tmp_path / "certs"
    made = subprocess.run([str(strata_bin()), "cert", "self-signed", "--out", str(certs)],
                          capture_output=True, text=True, timeout=T)
    assert made.returncode == 0, made.stderr
    plaintext, sasl_ssl, admin = free_ports(3)
    text = (DEPLOY / "sasl_ssl.toml").read_text()
    text = (text.replace("127.0.0.1:9092", "127.0.0.1:%d" % plaintext)
            .replace("0.0.0.0:9094", "127.0.0.1:%d" % sasl_ssl)
            .replace("10.0.0.1:9094", "127.0.0.1:%d" % sasl_ssl)
            .replace("127.0.0.1:9644", "127.0.0.1:%d" % admin)
            .replace("/etc/strata/certs", str(certs))
            .replace('"/var/lib/strata"', '"%s"' % (tmp_path / "data")))
    settings = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert not any(s in line for line in settings for s in ("10.0.0.", "/var/lib", "/etc/")), settings
    config = tmp_path / "strata.toml"
    config.write_text(text)
    log = open(tmp_path / "strata.log", "w")
    proc = subprocess.Popen([str(strata_bin()), "serve", "--config", str(config), "--cores", "1",
                             "--set", "cpu.pinning=false"], stdout=log, stderr=log)
    try:
        local = "127.0.0.1:%d" % plaintext

        def user_created():
            out = subprocess.run([str(strata_bin()), "user", "create", "app", "--password",
                                  "app-Secret-9", "--mechanism", "SCRAM-SHA-512", "-b", local],
                                 capture_output=True, text=True, timeout=T)
            return out.returncode == 0

        wait_true(user_created, T, "strata user create on the loopback listener")
        conf = {"bootstrap.servers": "127.0.0.1:%d" % sasl_ssl, "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(certs / "ca.pem"), "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "app", "sasl.password": "app-Secret-9"}
        producer = ck.Producer(dict(conf, acks="all"))
        for i in range(20):
            producer.produce("orders", value=b"order-%d" % i)
        assert producer.flush(T) == 0
        consumer = ck.Consumer(dict(conf, **{"group.id": "deploy", "auto.offset.reset": "earliest"}))
        try:
            consumer.subscribe(["orders"])
            values = []
            deadline = time.monotonic() + T
            while len(values) < 20 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    values.append(m.value())
            assert sorted(values) == sorted(b"order-%d" % i for i in range(20)), values
        finally:
            consumer.close()
        errors = []
        wrong = ck.Producer(dict(conf, **{"sasl.password": "guess"}), error_cb=errors.append)
        deadline = time.monotonic() + T
        while not errors and time.monotonic() < deadline:
            wrong.poll(0.5)
        assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION, errors
    finally:
        proc.terminate()
        proc.wait(T)
        log.close()


def free_ports(count):
    ports = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def wait_true(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("%s: not within %d s" % (what, timeout))
