"""The Grafana dashboard (deploy/grafana/strata-dashboard.json) read against a live three-node
cluster (issue #36), its queries evaluated on the three nodes' /metrics as Prometheus would
evaluate them with one `instance` label per node:

- a cluster-wide figure that every node exports alike (topics, partitions, leaderless and
  reassigning partitions, the controller leader and term, brokers by state) is counted once:
  the cluster reads what any one node reads, not three times it;
- per-node figures are summed over the nodes: a record produced to an RF=3 topic is counted
  once in "Messages in by topic" (by its leader, not by the followers that copy it);
- a counter panel whose series do not exist yet (no request, no error, no traffic) reads 0,
  not "No data", with a legend that names it; and once the series exist, the fallback zero
  series is gone.

The evaluator covers the PromQL the dashboard uses outside its latency quantiles: selectors
with label matchers, `rate`, `sum` and `max` (with `by`), `vector`, `label_replace` and `or`
(with `on`). `rate` is taken between two scrapes (the increase over the seconds between
them), not over Grafana's `$__rate_interval`; a series present in only one scrape has no
rate, as in Prometheus.
"""

import json
import re
import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

import wire
from cluster import Cluster, partitions_of, wait_for
from test_deploy import DASHBOARD

pytestmark = pytest.mark.timeout(180)

TOPIC = "dashboard"
PARTITIONS = 4
# Gauges from the metadata image or the controller quorum: every node exports the same value,
# so a panel must count them once (broker/src/admin.rs: "Topics in the cluster.", ...).
CLUSTER_WIDE = {"strata_topics", "strata_partitions", "strata_partitions_leaderless",
                "strata_partitions_reassigning", "strata_controller_leader",
                "strata_controller_term", "strata_cluster_brokers"}
ALL_INSTANCES = ".*"  # the Broker variable's "All" value (its allValue)


# --- a PromQL evaluator for the dashboard's subset --------------------------------------------
class Unsupported(Exception):
    """An expression outside the evaluated subset (the latency panels' histogram_quantile)."""


_TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<range>\[[^\]]*\])'
                    r'|(?P<number>\d+(?:\.\d+)?)|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
                    r'|(?P<op>=~|!~|!=|[=(){},]))')


def tokens(text):
    out, position = [], 0
    while text[position:].strip():
        match = _TOKEN.match(text, position)
        assert match, "cannot read %r at %d" % (text, position)
        kind = match.lastgroup
        value = match.group(kind)
        out.append((kind, json.loads(value) if kind == "string" else value))
        position = match.end()
    return out


class Parser:
    """Recursive descent over the subset; builds a tuple tree for `evaluate`."""

    def __init__(self, text):
        self.tokens = tokens(text)
        self.index = 0

    def peek(self):
        return self.tokens[self.index] if self.index < len(self.tokens) else (None, None)

    def take(self, kind, value=None):
        got = self.peek()
        if got[0] != kind or (value is not None and got[1] != value):
            raise Unsupported("expected %s %s, got %r" % (kind, value or "", got))
        self.index += 1
        return got[1]

    def parse(self):
        node = self.expression()
        assert self.index == len(self.tokens), "trailing tokens %r" % self.tokens[self.index:]
        return node

    def expression(self):
        node = self.operand()
        while self.peek() == ("name", "or"):
            self.take("name")
            on = None
            if self.peek() == ("name", "on"):
                self.take("name")
                on = self.label_list()
            node = ("or", node, self.operand(), on)
        return node

    def operand(self):
        name = self.take("name")
        if name in ("sum", "max"):
            by = ()
            if self.peek() == ("name", "by"):
                self.take("name")
                by = self.label_list()
            return ("aggregate", name, by, self.parenthesised(self.expression))
        if name == "rate":
            self.take("op", "(")
            selector = self.selector(self.take("name"))
            self.take("range")
            self.take("op", ")")
            return ("rate", selector)
        if name == "vector":
            return ("vector", float(self.parenthesised(lambda: self.take("number"))))
        if name == "label_replace":
            self.take("op", "(")
            inner = self.expression()
            arguments = []
            for _ in range(4):
                self.take("op", ",")
                arguments.append(self.take("string"))
            self.take("op", ")")
            return ("label_replace", inner, *arguments)
        if self.peek() == ("op", "("):
            raise Unsupported(name)
        return self.selector(name)

    def parenthesised(self, inner):
        self.take("op", "(")
        node = inner()
        self.take("op", ")")
        return node

    def selector(self, name):
        matchers = []
        if self.peek() == ("op", "{"):
            self.take("op", "{")
            while self.peek() != ("op", "}"):
                label, op, value = self.take("name"), self.take("op"), self.take("string")
                matchers.append((label, op, value))
                if self.peek() == ("op", ","):
                    self.take("op", ",")
            self.take("op", "}")
        return ("selector", name, tuple(matchers))

    def label_list(self):
        self.take("op", "(")
        names = []
        while self.peek() != ("op", ")"):
            names.append(self.take("name"))
            if self.peek() == ("op", ","):
                self.take("op", ",")
        self.take("op", ")")
        return tuple(names)


def parse(expr, instance=ALL_INSTANCES):
    """The dashboard's expression with its variables set: the Broker variable to the regex
    `instance` (written into a PromQL string, its backslashes doubled, as Grafana does), the
    rate window to one the evaluator ignores."""
    text = expr.replace("$instance", instance.replace("\\", "\\\\"))
    text = text.replace("$__rate_interval", "1m")
    return Parser(text).parse()


def key(labels):
    return tuple(sorted(labels.items()))


def project(labels, names):
    return tuple((name, value) for name, value in labels if name in names)


def matches(value, op, pattern):
    # Prometheus anchors regex matchers at both ends.
    return {"=": value == pattern, "!=": value != pattern,
            "=~": re.fullmatch(pattern, value) is not None,
            "!~": re.fullmatch(pattern, value) is None}[op]


def select(selector, samples):
    """{label set: value} of the samples a selector picks. The metric name is left out of the
    label sets: every operation of the subset drops it or ignores it in matching."""
    _, name, matchers = selector
    return {key(labels): value for sample_name, labels, value in samples
            if sample_name == name
            and all(matches(labels.get(label, ""), op, pattern) for label, op, pattern in matchers)}


def evaluate(node, scrapes):
    """The instant vector `node` gives at the last of `scrapes` ([(seconds, samples)]),
    as {label set: value}; an empty dict is Grafana's "No data"."""
    kind = node[0]
    if kind == "selector":
        return select(node, scrapes[-1][1])
    if kind == "rate":
        (start, first), (end, last) = scrapes[0], scrapes[-1]
        before, after = select(node[1], first), select(node[1], last)
        # A counter lower than before was reset: all of it is the increase.
        return {labels: (value - before[labels] if value >= before[labels] else value)
                / (end - start) for labels, value in after.items() if labels in before}
    if kind == "vector":
        return {(): node[1]}
    if kind == "aggregate":
        _, op, by, inner = node
        groups = {}
        for labels, value in evaluate(inner, scrapes).items():
            groups.setdefault(project(labels, by), []).append(value)
        return {labels: (sum if op == "sum" else max)(values) for labels, values in groups.items()}
    if kind == "or":
        # The left side, and every element of the right side whose labels (those of `on`, if
        # given) match no element of the left side.
        _, left, right, on = node
        signature = (lambda labels: labels) if on is None else (lambda labels: project(labels, on))
        left, right = evaluate(left, scrapes), evaluate(right, scrapes)
        taken = {signature(labels) for labels in left}
        return {**left, **{labels: value for labels, value in right.items()
                           if signature(labels) not in taken}}
    if kind == "label_replace":
        _, inner, destination, replacement, source, regex = node
        out = {}
        for labels, value in evaluate(inner, scrapes).items():
            labels = dict(labels)
            match = re.fullmatch(regex, labels.get(source, ""))
            if match:
                labels[destination] = match.expand(re.sub(r"\$(\d+)", r"\\\1", replacement))
                if not labels[destination]:
                    del labels[destination]
            out[key(labels)] = value
        return out
    raise AssertionError(kind)


# --- the dashboard and the cluster's /metrics --------------------------------------------------
def panel_targets():
    """(panel title, panel type, target) of every query of the dashboard, rows included."""
    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], panel["type"], target) for panel in panels(dashboard["panels"])
            for target in panel.get("targets", [])]


def evaluable_targets():
    out = []
    for title, kind, target in panel_targets():
        try:
            out.append((title, kind, target, parse(target["expr"])))
        except Unsupported:
            assert "histogram_quantile" in target["expr"], "%s: cannot evaluate %r" % (
                title, target["expr"])
    return out


def panel(title, ref="A"):
    for panel_title, _, target in panel_targets():
        if panel_title == title and target["refId"] == ref:
            return parse(target["expr"])
    raise AssertionError("no panel %r" % title)


def instance_of(node):
    return "127.0.0.1:%d" % node.admin_port


def scrape(node):
    """[(sample name, labels with the instance and job Prometheus adds, value)]."""
    with urllib.request.urlopen("http://%s/metrics" % instance_of(node), timeout=10) as r:
        text = r.read().decode()
    return [(sample.name, dict(sample.labels, instance=instance_of(node), job="strata"),
             sample.value)
            for family in text_string_to_metric_families(text) for sample in family.samples]


def scrape_all(cluster):
    """One scrape round: every node's samples, at one time."""
    samples = [sample for node in cluster.nodes.values() for sample in scrape(node)]
    return time.monotonic(), samples


def gauge(samples, name, **labels):
    """{instance: value} of a metric with one series per node (given its other labels)."""
    return {sample_labels["instance"]: value for sample_name, sample_labels, value in samples
            if sample_name == name
            and all(sample_labels.get(label) == want for label, want in labels.items())}


def legend_labels(target):
    return set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))


def assert_legends_name_every_series(targets, scrapes):
    for title, _, target, node in targets:
        for labels in evaluate(node, scrapes):
            missing = legend_labels(target) - {name for name, _ in labels}
            assert not missing, "%s: series %s has no %s for its legend %r" % (
                title, dict(labels), sorted(missing), target["legendFormat"])


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path).start()
    yield c
    c.stop()


def test_grafana_dashboard_counts_cluster_wide_figures_once_and_counters_from_zero_on_three_nodes(
        cluster):
    """Three nodes, one RF=3 topic of 4 partitions: Topics reads 1 and Partitions 4 (each of
    the three nodes exports those figures), every cluster-wide panel reads on the cluster what
    it reads on any one node, the 40 records produced count 40 in "Messages in by topic" and
    the one OFFSET_OUT_OF_RANGE answered counts once in "Errors by code"; before any client
    traffic every counter panel reads 0 (not "No data"), "Errors by code" as `code (none)`."""
    nodes = list(cluster.nodes.values())

    def quorum_known():
        samples = scrape_all(cluster)[1]
        leaders = gauge(samples, "strata_controller_leader")
        return (set(gauge(samples, "strata_cluster_brokers", state="live").values()) == {3}
                and len(leaders) == 3 and all(leader > 0 for leader in leaders.values()))

    wait_for(quorum_known, 30, "every node knows the leader and three live brokers")
    targets = evaluable_targets()
    counter_targets = [t for t in targets if "rate(" in t[2]["expr"]]
    assert len(counter_targets) >= 15 and len(targets) > len(counter_targets)

    # Before any client: no request or error series exist; every counter panel reads 0.
    quiet = [scrape_all(cluster), scrape_all(cluster)]
    for name in ("strata_requests_total", "strata_request_errors_total",
                 "strata_topic_messages_in_total"):
        assert not gauge(quiet[-1][1], name), "%s exists before any client" % name
    for title, _, target, node in counter_targets:
        result = evaluate(node, quiet)
        assert result, "%s reads No data before any traffic: %r" % (title, target["expr"])
        assert all(value == 0 for value in result.values()), (title, result)
    assert evaluate(panel("Errors by code"), quiet) == {(("code", "(none)"),): 0}
    assert evaluate(panel("Requests/s"), quiet) == {(): 0}
    assert evaluate(panel("Messages in by topic"), quiet) == {(("topic", "(none)"),): 0}
    assert_legends_name_every_series(targets, quiet)

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)

    def settled():
        samples = scrape_all(cluster)[1]
        return (set(gauge(samples, "strata_partitions").values()) == {PARTITIONS}
                and set(gauge(samples, "strata_partitions_leaderless").values()) == {0})

    wait_for(settled, 30, "every node's image has the topic's partitions, each with a leader")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})

    def produce(count):
        for i in range(count):
            producer.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0

    leader = cluster.nodes[partitions_of(nodes[0], TOPIC)[0][0]]

    def fetch_out_of_range():
        fetched = wire.parse_fetch_v4_response(
            wire.roundtrip(leader.port, wire.fetch_v4_request(7, TOPIC, 0, 10 ** 9)))
        assert fetched[(TOPIC, 0)]["error"] == wire.OFFSET_OUT_OF_RANGE

    # The first records and error make their series (a rate needs a series in both scrapes);
    # the rates are taken over the next 40 records and the next error.
    produce(PARTITIONS)
    fetch_out_of_range()
    before = scrape_all(cluster)
    produce(40)
    fetch_out_of_range()
    after = scrape_all(cluster)
    busy = [before, after]
    seconds = after[0] - before[0]

    # Cluster-wide figures: exported by each node, read once.
    assert gauge(after[1], "strata_topics") == {instance_of(n): 1 for n in nodes}
    assert gauge(after[1], "strata_partitions") == {instance_of(n): PARTITIONS for n in nodes}
    assert evaluate(panel("Topics"), busy) == {(): 1}
    assert evaluate(panel("Partitions"), busy) == {(): PARTITIONS}
    assert evaluate(panel("Brokers live / fenced"), busy) == {
        (("state", "live"),): 3, (("state", "fenced"),): 0}
    counted_once = set()
    for title, _, target, _ in targets:
        names = set(re.findall(r"\bstrata_[a-z_]+", target["expr"]))
        if not names <= CLUSTER_WIDE:
            continue
        counted_once.add(title)
        cluster_reads = evaluate(parse(target["expr"]), busy)
        assert cluster_reads, title
        for node in nodes:
            alone = evaluate(parse(target["expr"], re.escape(instance_of(node))), busy)
            assert cluster_reads == alone, "%s reads %s on the cluster but %s on %s alone" % (
                title, cluster_reads, alone, instance_of(node))
    assert {"Topics", "Partitions", "Controller leader", "Controller term",
            "Brokers live / fenced"} <= counted_once, counted_once
    for title, kind, target, node in targets:
        if kind == "stat":
            for labels in evaluate(node, busy):
                assert "instance" not in dict(labels), "%s splits by node" % title

    # Per-node figures, summed: each record counted once, by its partition's leader; the
    # followers' replication fetches are no consumer's.
    messages_in = evaluate(panel("Messages in by topic"), busy)
    assert set(messages_in) == {(("topic", TOPIC),)}
    assert round(messages_in[(("topic", TOPIC),)] * seconds) == 40
    assert evaluate(panel("Messages out by topic"), busy) == {(("topic", TOPIC),): 0}
    assert evaluate(panel("Requests/s"), busy)[()] > 0
    # Error series exist now: the fallback zero series is gone (`on()`), the error counted once.
    errors = evaluate(panel("Errors by code"), busy)
    assert (("code", "(none)"),) not in errors, errors
    assert round(errors[(("code", str(wire.OFFSET_OUT_OF_RANGE)),)] * seconds) == 1, errors
    assert_legends_name_every_series(targets, busy)
