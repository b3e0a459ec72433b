"""The web console (issue #40) in a real browser: headless Chromium (Debian's /usr/bin/chromium)
driven by Playwright (playwright-core, pinned in tests/interop/js/package-lock.json, installed by
scripts/interop.sh into target/interop-js) through tests/interop/js/console.mjs, which reads the
pages' data-testid cells and prints them as one JSON line. Every figure is compared here with
what the Kafka API answers confluent-kafka (AdminClient, Consumer) or `strata txn describe`.
The routes, JSON, data-testid names and ready marks are the contract in
target/notes/console-api.md. Screenshots of every page: target/console-screenshots/<scenario>/.

  * cluster (3 nodes, no SASL, charts sampled every second): topics `orders` (6 partitions,
    RF=3), `events` (3, RF=1, a retention.ms override) and `payments` (2, RF=3); 300 keyed
    records with JSON values and headers in `orders`, 60 in `events`; group `busy` with a
    live consumer that committed 100 records (Stable), group `idle` that committed 50 and left
    (Empty, lag), and an open transaction `console-tx` on both `payments` partitions.
    The cluster page's brokers and controller = describe_cluster(); the topics page's
    partitions, RF and messages = list_topics() and the watermarks; each topic page's leader,
    replicas, ISR, log start and high watermark = list_topics() and get_watermark_offsets,
    its override marks = describe_configs' DYNAMIC_TOPIC_CONFIG entries; the groups and group
    pages' state, members, assignment, committed offsets, ends and lag =
    describe_consumer_groups + list_consumer_group_offsets + the watermarks; the transactions
    page's id, producer id and partitions = `strata txn describe`. The same pages through node
    2's console answer the same figures (the calls to other brokers' partitions, groups and
    transactions). The message browser at an offset and at a timestamp shows the records a
    Consumer reads (keys, values as text, pretty JSON and hex, headers, timestamps); a chart
    gets at least 2 points; the console's actions take effect as the Kafka API sees them:
    a topic created (list_topics), retention.ms altered (describe_configs), `idle` reset to
    earliest (list_consumer_group_offsets), records deleted (the low watermark).
  * share (the cluster scenario's cluster): a share group `queue` on topic `jobs` (2
    partitions, RF=3) whose ShareConsumer accepted all 20 records and stays in the group: the
    groups and group pages show it as type share with its member, its assignment and, per
    partition, its share-partition start offset, end and lag, as ShareGroupDescribe and
    DescribeShareGroupOffsets answer (raw frames and `strata group describe`: confluent-kafka
    has no share-group admin API); once the member closed and 4 more records came, Empty
    with lag 4; the console's reset to earliest moves the start offsets to 0. With node 3
    killed, the groups page names broker 3 as unanswered and lists the other nodes' groups.
  * sasl (3 nodes, SASL_PLAINTEXT the only client and inter-broker listener, authorizer on;
    SCRAM users `admin`, a super user, and `alice`, who may DESCRIBE and READ topics prefixed
    `alice-` and the group `alice-g`): no API answers without a login (401, raw urllib, with
    no cookie and with a forged one) and every page shows the login form; a wrong password
    shows an error; alice sees only her topics and group, may not read the others, and
    creating a topic through the console shows the authorization error; POSTs without the
    CSRF header, without an Origin, with a foreign Origin or a wrong token are 403, and a page
    on another local port POSTing with admin's cookie (fetch no-cors, fetch cors, a form) is
    refused: no topic is made (checked against a correct POST that does make one).
  * scale (acceptance 3): the cluster scenario's cluster (reused: one cluster start less; its
    data are there too) gets 1,000 more topics (1 partition, RF=1, one CreateTopics) and 200
    more groups (one committed offset each, alter_consumer_group_offsets); each page (cluster,
    topics, groups, transactions, one topic, one group) is loaded once to warm up, then 3
    times; the time to the page's `strata:ready:<page>` mark (ms from the navigation's start)
    is recorded against the 300 ms target and must stay under a ceiling (PAGE_READY_MS_MAX).
    Run it with the release build (STRATA_BIN) for the figure.

Each scenario starts its own cluster, so the file is single_node (not run again in the
STRATA_INTEROP_CLUSTER stage). Skipped, saying why, without /usr/bin/chromium, node or
playwright-core.
"""

import functools
import http.server
import json
import os
import re
import shutil
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ConfigResource, ConfigSource, NewTopic, ResourcePatternType,
                                   ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from cluster import Cluster, ClusterNode, broker_ids, wait_for
from conftest import REPO_ROOT, strata_bin

pytestmark = pytest.mark.single_node  # each scenario starts its own 3-node cluster

CHROMIUM = "/usr/bin/chromium"
JS_DIR = REPO_ROOT / "target" / "interop-js"
SCRIPT = REPO_ROOT / "tests" / "interop" / "js" / "console.mjs"
SHOTS = REPO_ROOT / "target" / "console-screenshots"
T = 30  # seconds: every client call and wait here is bounded by it
DRIVER_TIMEOUT_S = 150  # one console.mjs run (each of its own waits is bounded by 15 s)
# The console's page-time target is 300 ms (median to a page's ready mark). Page times
# are measured, not asserted (the house rule for timed tests): on this 2-core machine most of
# them is Chromium's own start-up of the page (DOMContentLoaded ~150-200 ms, the API answer
# ~15-45 ms), and a slow or busy run moves it by 2x. The test records the figures in
# target/console-screenshots/scale/timings.json and prints them against the target; it fails
# only past a ceiling five times the target, which catches a page that grew a real problem
# (a quadratic render, an API call per row). STRATA_CONSOLE_PAGE_MS_MAX=300 asserts the target.
PAGE_READY_MS_TARGET = 300
PAGE_READY_MS_MAX = int(os.environ.get("STRATA_CONSOLE_PAGE_MS_MAX", "1500"))

# Scenario "cluster".
CLUSTER_EXTRA = ["--set", "console.chart.interval.ms=1000",
                 "--set", "group.initial.rebalance.delay.ms=0"]
ORDERS, EVENTS, PAYMENTS = "orders", "events", "payments"
ORDERS_RECORDS, EVENTS_RECORDS = 300, 60
EVENTS_RETENTION_MS = "3600000"
BUSY_COMMITTED, IDLE_COMMITTED = 100, 50
TXN_ID = "console-tx"

# Scenario "share".
JOBS, QUEUE, JOBS_RECORDS = "jobs", "queue", 20
SHARE_GROUPS = {QUEUE}

# Scenario "sasl".
BROKER_PASSWORD = "broker-secret"
SASL_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
             'username="broker" password="%s" user_broker="%s";' % (BROKER_PASSWORD,
                                                                    BROKER_PASSWORD))
PASSWORDS = {"admin": "admin-console-Secret-1", "alice": "alice-console-Secret-2"}

# Scenario "scale".
SCALE_TOPICS, SCALE_GROUPS = 1000, 200


def _missing():
    """Why the browser tests cannot run here, or None."""
    if not os.path.exists(CHROMIUM):
        return "%s is missing (apt-get install chromium fonts-dejavu-core)" % CHROMIUM
    if not shutil.which("node"):
        return "node is missing"
    if not (JS_DIR / "node_modules" / "playwright-core" / "package.json").is_file():
        return ("playwright-core is missing from %s/node_modules (scripts/interop.sh installs "
                "tests/interop/js/package-lock.json there)" % JS_DIR)
    return None


@pytest.fixture(scope="module", autouse=True)
def browser_present():
    reason = _missing()
    if reason:
        pytest.skip("console browser tests skipped: " + reason)
    version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=30)
    print("browser:", version.stdout.strip(), "| broker:", strata_bin())


# --- the browser ------------------------------------------------------------------------------
def drive(mode, scenario, **args):
    """Runs console.mjs in `mode` -> the JSON it printed. Screenshots under SHOTS/scenario."""
    args["shots"] = str(SHOTS / scenario)
    env = dict(os.environ, STRATA_INTEROP_JS=str(JS_DIR))
    started = time.monotonic()
    out = subprocess.run(["node", str(SCRIPT), mode, json.dumps(args)], capture_output=True,
                         text=True, timeout=DRIVER_TIMEOUT_S, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    result = json.loads(lines[-1]) if lines else None
    print("console.mjs %s (%s): %.1f s, exit %d" % (mode, scenario, time.monotonic() - started,
                                                   out.returncode))
    if result and (result.get("console_errors") or result.get("page_errors")):
        # 401s before a login and refused requests are logged by the browser too: a sample.
        print("browser errors:", result.get("page_errors"), "console (%d):"
              % len(result.get("console_errors")), result.get("console_errors")[:5])
    assert out.returncode == 0 and result is not None and "error" not in result, (
        "console.mjs %s failed (screenshots in %s):\n%s\nstdout: %s\nstderr: %s"
        % (mode, args["shots"], result and result.get("error"), out.stdout[-3000:],
           out.stderr[-3000:]))
    assert not result["page_errors"], "uncaught errors in the page: %r" % result["page_errors"]
    return result


def num(cell):
    """A cell's integer (thousands separators dropped), or None for no cell / no number."""
    if cell is None:
        return None
    digits = re.sub(r"[,\s_]", "", cell["text"])
    return int(digits) if re.fullmatch(r"-?\d+", digits) else None


def txt(cell):
    return None if cell is None else cell["text"]


def by(rows, attribute):
    """{row's data-<attribute>: row's cells}."""
    return {row["attrs"].get(attribute): row["cells"] for row in rows}


def state_name(state):
    """"PreparingRebalance", "PREPARING_REBALANCE", ConsumerGroupState.PREPARING_REBALANCE ->
    "preparingrebalance"."""
    return re.sub(r"[^a-z]", "", str(getattr(state, "name", state)).lower())


class Mismatches(list):
    def check(self, what, seen, want):
        if seen != want:
            self.append("%s: the console shows %r, the Kafka API answers %r" % (what, seen, want))

    def done(self):
        assert not self, "\n".join(self)


# --- HTTP without a browser -------------------------------------------------------------------
def http_call(method, url, body=None, headers=None, timeout=10):
    """-> (status, headers, body bytes); 4xx and 5xx are answers, not exceptions."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def console_up(base):
    """The console answers /api/session (200 with no SASL, 401 with)."""
    try:
        return http_call("GET", base + "/api/session")[0] in (200, 401)
    except OSError:
        return False


def api_login(base, user, password):
    """-> (cookie header value, CSRF token), logged in with urllib as a same-origin page would."""
    status, headers, body = http_call("POST", base + "/api/login", {"user": user, "password": password},
                                 {"Content-Type": "application/json", "Origin": base})
    assert status == 200, "login as %s: %d %r" % (user, status, body[:300])
    cookies = [m.group(0) for h in headers.get_all("Set-Cookie") or []
               for m in [re.match(r"strata_console=[^;]+", h)] if m]
    assert cookies, "no strata_console cookie in %r" % headers.get_all("Set-Cookie")
    return cookies[0], json.loads(body)["csrf"]


# --- the Kafka API's answers ------------------------------------------------------------------
def watermarks(conf, tps):
    """{(topic, partition): (log start, high watermark)}; read_uncommitted, so an open
    transaction's records count (the console shows the high watermark, not the LSO)."""
    reader = ck.Consumer(dict(conf, **{"group.id": "console-watermarks",
                                       "isolation.level": "read_uncommitted"}))
    try:
        return {(t, p): reader.get_watermark_offsets(TopicPartition(t, p), timeout=T)
                for t, p in tps}
    finally:
        reader.close()


def committed_offsets(admin, group):
    """{(topic, partition): committed offset} of the group (partitions without one left out)."""
    request = [ConsumerGroupTopicPartitions(group)]
    answer = admin.list_consumer_group_offsets(request, request_timeout=T)[group].result(T)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions
            if tp.offset >= 0}


def topic_configs(admin, topic):
    """{name: (value, is a topic override)} as DescribeConfigs answers."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=T)[resource].result(T)
    dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return {name: (e.value, getattr(e.source, "value", e.source) == dynamic)
            for name, e in entries.items()}


def group_type(description):
    """"classic" or "consumer"; DescribeGroups answers no type (UNKNOWN), and a group it
    describes is a classic one."""
    name = state_name(getattr(description, "type", ""))
    return "classic" if name in ("", "unknown") else name


def kafka_view(conf, topics, groups, txn_id=None):
    """What the Kafka API answers for everything the read pages show."""
    admin = AdminClient(conf)
    described = admin.describe_cluster(request_timeout=T).result(T)
    metadata = admin.list_topics(timeout=T)
    view = {"brokers": {n.id: "%s:%d" % (n.host, n.port) for n in described.nodes},
            "controller": described.controller.id, "metadata": {}, "configs": {}, "groups": {}}
    for name, topic in metadata.topics.items():
        view["metadata"][name] = {p: (m.leader, sorted(m.replicas), sorted(m.isrs))
                                  for p, m in topic.partitions.items()}
    view["internal"] = {n for n in view["metadata"] if n.startswith("__")}
    for topic in topics:
        view["configs"][topic] = topic_configs(admin, topic)
    share_groups = [g for g in groups if g in SHARE_GROUPS]
    groups = [g for g in groups if g not in SHARE_GROUPS]
    for group in share_groups:
        view["groups"][group] = share_view(conf["bootstrap.servers"], group)
    if groups:
        futures = admin.describe_consumer_groups(list(groups), request_timeout=T)
        for group in groups:
            d = futures[group].result(T)
            view["groups"][group] = {
                "state": state_name(d.state),
                "type": group_type(d),
                "members": [(m.client_id, {"%s-%d" % (tp.topic, tp.partition)
                                           for tp in m.assignment.topic_partitions})
                            for m in d.members],
                "committed": committed_offsets(admin, group)}
    tps = {(t, p) for t in topics for p in view["metadata"][t]}
    tps |= {tp for g in view["groups"].values() for tp in g["committed"]}
    view["watermarks"] = watermarks(conf, tps)
    if txn_id:
        out = subprocess.run([str(strata_bin()), "txn", "describe", txn_id, "--format", "json",
                              "--bootstrap", conf["bootstrap.servers"]],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        view["txn"] = json.loads(out.stdout)
    return view


def share_view(bootstrap, group):
    """What the Kafka API answers for a share group, in kafka_view's shape: ShareGroupDescribe
    (raw frames) for its state and members, `strata group describe` (DescribeShareGroupOffsets)
    for its start offsets as "committed"."""
    from test_share_groups import describe_share_group
    d = describe_share_group(bootstrap, group)
    assert d["error"] == 0, d
    out = subprocess.run([str(strata_bin()), "group", "describe", group, "--format", "json",
                          "--bootstrap", bootstrap], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    described = json.loads(out.stdout)
    return {"state": state_name(d["state"]), "type": "share",
            "members": [(m["client_id"], {"%s-%d" % (t, p) for t, ps in m["assignment"].items()
                                          for p in ps}) for m in d["members"]],
            "committed": {(o["topic"], o["partition"]): o["start_offset"]
                          for o in described["offsets"] if o["start_offset"] >= 0}}


def check_read(seen, view, topics, groups, where):
    """The read pages' cells (console.mjs read) against the Kafka API's answers."""
    m = Mismatches()
    # Cluster page.
    brokers = by(seen["cluster"]["brokers"], "brokerId")
    m.check(where + " broker ids", sorted(int(b) for b in brokers if b), sorted(view["brokers"]))
    for broker_id, endpoint in view["brokers"].items():
        cells = brokers.get(str(broker_id), {})
        m.check("%s broker %d host" % (where, broker_id), txt(cells.get("broker-host")), endpoint)
        m.check("%s broker %d state" % (where, broker_id), txt(cells.get("broker-state")), "live")
        m.check("%s broker %d controller mark" % (where, broker_id),
                txt(cells.get("broker-controller")),
                "yes" if broker_id == view["controller"] else "")
    cells = seen["cluster"]["cells"]
    m.check(where + " controller", num({"text": cells["cluster-controller"] or ""}),
            view["controller"])
    for health in ("health-offline", "health-leaderless"):
        m.check(where + " " + health, num({"text": cells[health] or ""}), 0)
    partitions = [p for t in view["metadata"].values() for p in t.values()]
    m.check(where + " under-replicated", num({"text": cells["health-under-replicated"] or ""}),
            sum(1 for _, replicas, isr in partitions if len(isr) < len(replicas)))
    user_topics = [t for t in view["metadata"] if t not in view["internal"]]
    topic_counts = {len(view["metadata"]), len(user_topics)}  # with or without internal topics
    shown = num({"text": cells["health-topics"] or ""})
    if shown not in topic_counts:
        m.append("%s health-topics: %r, not one of %r" % (where, shown, topic_counts))
    partition_counts = {len(partitions),
                        sum(len(view["metadata"][t]) for t in user_topics)}
    shown = num({"text": cells["health-partitions"] or ""})
    if shown not in partition_counts:
        m.append("%s health-partitions: %r, not one of %r" % (where, shown, partition_counts))

    # Topics page and each topic's page.
    listed = by(seen["topics"], "topic")
    for topic in topics:
        parts = view["metadata"][topic]
        marks = {p: view["watermarks"][(topic, p)] for p in parts}
        row = listed.get(topic)
        if row is None:
            m.append("%s topics page: no row for %s" % (where, topic))
        else:
            m.check("%s %s partitions" % (where, topic), num(row.get("topic-partitions")), len(parts))
            m.check("%s %s RF" % (where, topic), num(row.get("topic-rf")), len(parts[0][1]))
            m.check("%s %s messages" % (where, topic), num(row.get("topic-messages")),
                    sum(high - low for low, high in marks.values()))
            size = (row.get("topic-size") or {}).get("bytes")
            if size is None or not re.fullmatch(r"\d+", size) or int(size) <= 0:
                m.append("%s %s size: data-bytes %r, not a positive integer" % (where, topic, size))
        page = seen["topic"][topic]
        shown = by(page["partitions"], "partition")
        m.check("%s %s partition rows" % (where, topic), sorted(int(p) for p in shown if p),
                sorted(parts))
        for p, (leader, replicas, isr) in parts.items():
            cells = shown.get(str(p), {})
            what = "%s %s-%d" % (where, topic, p)
            m.check(what + " leader", num(cells.get("partition-leader")), leader)
            m.check(what + " replicas", ids(cells.get("partition-replicas")), replicas)
            m.check(what + " ISR", ids(cells.get("partition-isr")), isr)
            m.check(what + " log start", num(cells.get("partition-log-start")), marks[p][0])
            m.check(what + " high watermark", num(cells.get("partition-hw")), marks[p][1])
        configs = by(page["configs"], "config")
        overrides = {name: value for name, (value, override) in view["configs"][topic].items()
                     if override}
        marked = {name: txt(c.get("config-value")) for name, c in configs.items()
                  if txt(c.get("config-override")) == "yes"}
        m.check("%s %s config overrides" % (where, topic), marked, overrides)

    # Groups page and each group's page.
    listed = by(seen["groups"], "group")
    for group in groups:
        want = view["groups"][group]
        lags = {tp: view["watermarks"][tp][1] - offset for tp, offset in want["committed"].items()}
        row = listed.get(group)
        if row is None:
            m.append("%s groups page: no row for %s" % (where, group))
        else:
            m.check("%s %s state" % (where, group), state_name(txt(row.get("group-state"))),
                    want["state"])
            m.check("%s %s type" % (where, group), state_name(txt(row.get("group-type"))),
                    want["type"])
            m.check("%s %s members" % (where, group), num(row.get("group-members")),
                    len(want["members"]))
            m.check("%s %s lag" % (where, group), num(row.get("group-lag")), sum(lags.values()))
        page = seen["group"][group]
        members = sorted((txt(r["cells"].get("member-client")),
                          set(filter(None, (txt(r["cells"].get("member-assignment")) or "")
                                     .split(","))))
                         for r in page["members"])
        m.check("%s %s members" % (where, group), members, sorted(want["members"]))
        offsets = {(r["attrs"].get("topic"), int(r["attrs"].get("partition", -1))): r["cells"]
                   for r in page["offsets"]}
        for (topic, p), committed in sorted(want["committed"].items()):
            cells = offsets.get((topic, p))
            what = "%s %s %s-%d" % (where, group, topic, p)
            if cells is None:
                m.append(what + ": no offset row")
                continue
            m.check(what + " committed", num(cells.get("offset-committed")), committed)
            m.check(what + " end", num(cells.get("offset-end")), view["watermarks"][(topic, p)][1])
            m.check(what + " lag", num(cells.get("offset-lag")), lags[(topic, p)])

    # Transactions page.
    if "txn" in view:
        txn = view["txn"]
        rows = by(seen["transactions"], "txn")
        cells = rows.get(txn["transactional_id"])
        if cells is None:
            m.append("%s transactions page: no row for %s (rows: %r)"
                     % (where, txn["transactional_id"], list(rows)))
        else:
            m.check(where + " txn state", state_name(txt(cells.get("txn-state"))),
                    state_name(txn["state"]))
            m.check(where + " txn producer id", num(cells.get("txn-producer-id")),
                    txn["producer_id"])
            m.check(where + " txn partitions",
                    set((txt(cells.get("txn-partitions")) or "").split(",")),
                    {"%s-%d" % (t["topic"], p) for t in txn["partitions"] for p in t["partitions"]})
        # The topic page's producers: the open transaction's producer on each of its
        # partitions, with the offset its transaction began at.
        for t in txn["partitions"]:
            producers = seen["topic"].get(t["topic"], {}).get("producers", [])
            for p in t["partitions"]:
                mine = [r for r in producers if r["attrs"].get("partition") == str(p)
                        and r["attrs"].get("producer") == str(txn["producer_id"])]
                if not mine:
                    m.append("%s topic %s: no producer row for %d on partition %d (rows: %r)"
                             % (where, t["topic"], txn["producer_id"], p, producers))
                    continue
                # Nothing else is written to payments: the transaction began at offset 0.
                start = num(mine[0]["cells"].get("producer-txn-start"))
                m.check("%s topic %s-%d open transaction's first offset" % (where, t["topic"], p),
                        start, 0)
    m.done()


def ids(cell):
    """"1,2,3" (any order, any spacing) -> [1, 2, 3]."""
    if cell is None:
        return None
    return sorted(int(x) for x in re.findall(r"-?\d+", cell["text"]))


# --- scenario "cluster": data -----------------------------------------------------------------
def order_record(i, base_ms):
    value = json.dumps({"n": i, "item": "widget-%d" % i, "tags": ["a", "b"]}, separators=(",", ":"))
    return {"key": b"key-%03d" % i, "value": value.encode(),
            "headers": [("trace", b"t-%d" % i), ("source", b"console-test")],
            "timestamp": base_ms + 10 * i}


class BusyConsumer(threading.Thread):
    """A member of group `busy` that consumes `orders`, commits its first 100 records, and keeps
    polling (no more commits) until stopped, so the group stays Stable with a known lag."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.committed = threading.Event()
        self.stopping = threading.Event()
        self.error = None

    def run(self):
        consumer = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "busy",
                                "client.id": "busy-client", "enable.auto.commit": False,
                                "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
        try:
            consumer.subscribe([ORDERS])
            ends, consumed = {}, 0
            while not self.stopping.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error() or consumed >= BUSY_COMMITTED:
                    continue
                consumed += 1
                ends[message.partition()] = message.offset() + 1
                if consumed == BUSY_COMMITTED:
                    consumer.commit(offsets=[TopicPartition(ORDERS, p, o) for p, o in ends.items()],
                                    asynchronous=False)
                    self.committed.set()
        except Exception as e:  # noqa: BLE001 - reported by the fixture
            self.error = e
        finally:
            consumer.close()


def commit_first(bootstrap, group, topic, count):
    """A consumer in `group` reads `count` records of `topic`, commits exactly them, leaves."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "client.id": group + "-client", "enable.auto.commit": False,
                            "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        ends, consumed = {}, 0
        deadline = time.monotonic() + T
        while consumed < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                consumed += 1
                ends[message.partition()] = message.offset() + 1
        assert consumed == count, "group %s read %d of %s, not %d" % (group, consumed, topic, count)
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in ends.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def read_partition(bootstrap, topic, partition, count):
    """{offset: (key, value, headers, timestamp ms)} of the partition's first `count` records."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "console-reader",
                            "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
    out = {}
    deadline = time.monotonic() + T
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                out[m.offset()] = (m.key(), m.value(), m.headers() or [], m.timestamp()[1])
    finally:
        consumer.close()
    assert len(out) == count, "read %d of %d records of %s-%d" % (len(out), count, topic, partition)
    return out


@pytest.fixture(scope="module")
def console_cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("console"), extra=CLUSTER_EXTRA)
    try:
        c.start()
        wait_for(lambda: broker_ids(c.nodes[1]) == [1, 2, 3], 30, "three registered brokers")
        for node in c.nodes.values():
            wait_for(lambda: console_up(base(node)), 15,
                     "node %d's console at %s" % (node.node_id, base(node)))
        yield c
    except BaseException:
        print(c.log_tails())
        raise
    finally:
        c.stop()


def base(node):
    return "http://127.0.0.1:%d" % node.admin_port


@pytest.fixture(scope="module")
def cluster_data(console_cluster):
    """Topics, records, groups `busy` (live) and `idle`, the open transaction."""
    bootstrap = console_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic(ORDERS, 6, 3), NewTopic(EVENTS, 3, 1, config={"retention.ms": EVENTS_RETENTION_MS}),
        NewTopic(PAYMENTS, 2, 3)], request_timeout=T)
    for future in futures.values():
        future.result(T)

    def leaders_known():
        topics = admin.list_topics(timeout=T).topics
        return all(name in topics and topics[name].partitions
                   and all(p.leader >= 0 for p in topics[name].partitions.values())
                   for name in (ORDERS, EVENTS, PAYMENTS))
    wait_for(leaders_known, T, "leaders of the new topics")

    base_ms = int(time.time() * 1000) - 60_000
    failures = []
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(ORDERS_RECORDS):
        producer.produce(ORDERS, partition=i % 6, on_delivery=lambda e, _: e and failures.append(e),
                         **order_record(i, base_ms))
    for i in range(EVENTS_RECORDS):
        producer.produce(EVENTS, key=b"event-%d" % i, value=b'{"event":%d}' % i, partition=i % 3,
                         timestamp=base_ms + 10 * i)
    assert producer.flush(T) == 0 and not failures, failures

    busy = BusyConsumer(bootstrap)
    busy.start()
    commit_first(bootstrap, "idle", EVENTS, IDLE_COMMITTED)
    txn = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID,
                       "transaction.timeout.ms": 600_000})
    txn.init_transactions(T)
    txn.begin_transaction()
    for p in (0, 1):
        txn.produce(PAYMENTS, key=b"tx-%d" % p, value=b"open", partition=p)
    assert txn.flush(T) == 0
    assert busy.committed.wait(T), "busy did not commit %d records: %r" % (BUSY_COMMITTED, busy.error)
    wait_for(lambda: state_name(admin.describe_consumer_groups(["busy"], request_timeout=T)["busy"]
                                .result(T).state) == "stable", T, "group busy Stable")
    records = read_partition(bootstrap, ORDERS, 0, ORDERS_RECORDS // 6)
    try:
        yield {"records": records, "txn": txn}
    finally:
        busy.stopping.set()
        busy.join(timeout=15)


# --- scenario "cluster" -----------------------------------------------------------------------
@pytest.mark.timeout(300)
def test_console_pages_show_the_kafka_apis_figures_and_its_actions_take_effect(console_cluster,
                                                                             cluster_data):
    nodes = console_cluster.nodes
    conf = {"bootstrap.servers": console_cluster.bootstrap}
    topics, groups = [ORDERS, EVENTS, PAYMENTS], ["busy", "idle"]
    view = kafka_view(conf, topics, groups, TXN_ID)
    assert view["groups"]["busy"]["members"] and view["groups"]["idle"]["state"] == "empty", view

    # Every read page through node 1's console, then through node 2's (other brokers' leaders,
    # coordinators and transactions reached from another node).
    for node_id, scenario in ((1, "cluster"), (2, "cluster-node2")):
        seen = drive("read", scenario, base=base(nodes[node_id]), topics=topics, groups=groups)
        check_read(seen, view, topics, groups, "node %d:" % node_id)
        assert seen["cluster"]["nav_user"] == "anonymous", seen["cluster"]["nav_user"]

    # The message browser at offset 10 and at the timestamp of offset 25 (5 ms before it: the
    # first record at or after it), as a Consumer reads partition 0 of orders.
    records = cluster_data["records"]
    seen = drive("messages", "cluster", base=base(nodes[1]), topic=ORDERS, partition=0, offset=10,
                 timestamp=records[25][3] - 5)
    m = Mismatches()
    for view_name, rows in seen["at_offset"].items():
        shown = {o: cells for o, cells in by(rows, "offset").items() if o and o.isdigit()}
        m.check("messages (%s view) offsets" % view_name, sorted(int(o) for o in shown)[:1], [10])
        if len(shown) < 10:
            m.append("messages (%s view): %d rows, not the page's 20" % (view_name, len(shown)))
        for offset, cells in shown.items():
            key, value, headers, timestamp = records[int(offset)]
            what = "message %s (%s view)" % (offset, view_name)
            if view_name == "text":
                m.check(what + " key", txt(cells.get("message-key")), key.decode())
                m.check(what + " value", txt(cells.get("message-value")), value.decode())
                m.check(what + " headers", txt(cells.get("message-headers")),
                        "; ".join("%s=%s" % (k, v.decode()) for k, v in headers))
                m.check(what + " timestamp", (cells.get("message-timestamp") or {}).get("ms"),
                        str(timestamp))
            elif view_name == "json":
                shown_value = txt(cells.get("message-value")) or ""
                try:
                    m.check(what + " value", json.loads(shown_value), json.loads(value))
                except ValueError:
                    m.append("%s value: %r is not JSON" % (what, shown_value))
                if "\n" not in shown_value:
                    m.append("%s value: %r is not pretty-printed" % (what, shown_value))
            else:
                shown_value = (txt(cells.get("message-value")) or "").lower()
                spaced, packed = " ".join("%02x" % b for b in value[:4]), value[:4].hex()
                if spaced not in shown_value and packed not in shown_value:
                    m.append("%s value: %r shows neither %r nor %r" % (what, shown_value[:80],
                                                                      spaced, packed))
    at_time = sorted(int(o) for o in by(seen["at_timestamp"], "offset") if o and o.isdigit())
    m.check("messages at a timestamp: first offset", at_time[:1], [25])
    m.done()

    # A chart gets points (samples every second).
    seen = drive("charts", "cluster", base=base(nodes[1]), min_points=2)
    print("chart points:", seen["charts"])
    assert seen["enough"] and max((seen["charts"] or {0: 0}).values()) >= 2, seen["charts"]

    # The actions, through node 1's console; each checked through the Kafka API.
    seen = drive("actions", "cluster", base=base(nodes[1]),
                 create={"name": "made-in-console", "partitions": 2, "rf": 3},
                 alter={"topic": EVENTS, "name": "retention.ms", "value": "7200000"},
                 reset={"group": "idle", "topic": EVENTS, "to": "earliest"},
                 delete={"topic": EVENTS, "partition": 0, "offset": 10})
    for action, name in (("create", "made-in-console"), ("alter", "retention.ms"),
                         ("reset", "idle"), ("delete", EVENTS)):
        print("%s: confirm %r -> %r" % (action, seen[action]["confirm"], seen[action]["result"]))
        assert re.search(r"\bOK\b", seen[action]["result"] or ""), (action, seen[action])
        assert name in seen[action]["confirm"], "the confirm does not name %s: %r" % (
            name, seen[action]["confirm"])
    admin = AdminClient(conf)

    def created():
        topic = admin.list_topics(timeout=T).topics.get("made-in-console")
        return topic is not None and sorted(
            len(p.replicas) for p in topic.partitions.values()) == [3, 3]
    wait_for(created, T, "made-in-console (2 partitions, RF=3) in list_topics()")
    assert topic_configs(admin, EVENTS)["retention.ms"] == ("7200000", True)
    # Every events partition started at offset 0 (records were deleted only after the reset).
    idle = committed_offsets(admin, "idle")
    assert idle and set(idle.values()) == {0}, idle
    assert watermarks(conf, [(EVENTS, 0)])[(EVENTS, 0)][0] == 10


# --- scenario "share" -------------------------------------------------------------------------
@pytest.mark.timeout(300)
def test_console_shows_a_share_group_and_resets_its_start_offsets(console_cluster):
    from test_share_groups import Reader, create_topic, poll_until, produce, set_group_configs
    nodes = console_cluster.nodes
    bootstrap = console_cluster.bootstrap
    conf = {"bootstrap.servers": bootstrap}
    set_group_configs(bootstrap, QUEUE, {"share.auto.offset.reset": "earliest"})
    create_topic(bootstrap, JOBS, 2, 3)
    produce(bootstrap, JOBS, ["job-%d" % i for i in range(JOBS_RECORDS)], partitions=2)
    member = Reader(bootstrap, JOBS, QUEUE, "queue-client")
    try:
        poll_until([member], lambda: len(member.keys()) == JOBS_RECORDS, 60, "every job")
        member.commit()

        def settled():
            view = kafka_view(conf, [JOBS], [QUEUE])
            want = view["groups"][QUEUE]
            done = (want["state"] == "stable" and len(want["members"]) == 1
                    and sum(want["committed"].values()) == JOBS_RECORDS)
            return view if done else None
        view = wait_for(settled, T, "queue Stable with every job accepted")
        seen = drive("read", "share", base=base(nodes[2]), topics=[JOBS], groups=[QUEUE])
        check_read(seen, view, [JOBS], [QUEUE], "live member:")
    finally:
        member.close()
    produce(bootstrap, JOBS, ["late-%d" % i for i in range(4)], partitions=2)

    def empty():
        view = kafka_view(conf, [JOBS], [QUEUE])
        return view if view["groups"][QUEUE]["state"] == "empty" else None
    view = wait_for(empty, T, "queue Empty once its member closed")
    seen = drive("read", "share-empty", base=base(nodes[1]), topics=[JOBS], groups=[QUEUE])
    check_read(seen, view, [JOBS], [QUEUE], "empty:")
    lag = num(by(seen["groups"], "group")[QUEUE].get("group-lag"))
    assert lag == 4, "the groups page shows lag %r for queue, not 4" % lag

    seen = drive("actions", "share", base=base(nodes[1]),
                 reset={"group": QUEUE, "topic": JOBS, "to": "earliest"})
    print("share reset: confirm %r -> %r" % (seen["reset"]["confirm"], seen["reset"]["result"]))
    assert re.search(r"\bOK\b", seen["reset"]["result"] or ""), seen["reset"]
    assert "share-partition start offsets" in seen["reset"]["confirm"], seen["reset"]
    starts = share_view(bootstrap, QUEUE)["committed"]
    assert starts == {(JOBS, 0): 0, (JOBS, 1): 0}, starts

    # A broker that does not answer ListGroups is named on the groups page (the groups it
    # coordinates are missing), not silently left out; the others' groups are still listed.
    console_cluster.kill(3)
    try:
        seen = drive("read", "share-node3-down", base=base(nodes[1]), topics=[], groups=[])
        print("groups page with node 3 down:", seen["groups_unanswered"])
        shown = seen["groups_unanswered"] or ""
        assert re.search(r"\bbroker 3\b", shown) and "not listed" in shown, shown
        assert by(seen["groups"], "group"), "no group listed by nodes 1 and 2"
    finally:
        nodes[3].restart_after_kill()
        wait_for(lambda: broker_ids(nodes[1]) == [1, 2, 3], 60, "node 3 registered again")
        wait_for(lambda: console_up(base(nodes[3])), 30, "node 3's console again")


# --- scenario "sasl" --------------------------------------------------------------------------
class SaslNode(ClusterNode):
    """A node whose one Kafka listener is SASL_PLAINTEXT (clients and the other brokers)."""

    def command(self):
        cmd = super().command()
        listener = "SASL_PLAINTEXT://127.0.0.1:%d" % self.kafka_port
        cmd[cmd.index("--listen") + 1] = listener
        cmd[cmd.index("--advertise") + 1] = listener
        return cmd


class SaslCluster(Cluster):
    def __init__(self, workdir, size=3):
        self.extra = [
            "--set", "inter.broker.listener.name=SASL_PLAINTEXT",
            "--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "--set", "sasl.jaas.config=" + SASL_JAAS,
            "--set", "authorizer.class.name=strata",
            "--set", "super.users=User:broker;User:admin",
        ]
        self.nodes = {i: SaslNode(strata_bin(), workdir / ("node-%d" % i), i, self)
                      for i in range(1, size + 1)}


def sasl_conf(cluster, user, password, mechanism="SCRAM-SHA-512"):
    return {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "socket.timeout.ms": 10000}


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory):
    """Stopped again at the end of its test (stop is idempotent), so the scale scenario that
    follows measures with one cluster running."""
    c = SaslCluster(tmp_path_factory.mktemp("console-sasl"))
    try:
        c.start()
        yield c
    except BaseException:
        print(c.log_tails())
        raise
    finally:
        c.stop()


def sasl_setup(cluster):
    """SCRAM users, topics, groups and alice's ACLs, made as `broker` (PLAIN, a super user)."""
    broker = sasl_conf(cluster, "broker", BROKER_PASSWORD, "PLAIN")
    admin = AdminClient(broker)
    wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60, "three brokers over SASL")
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(
        ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
        for user, password in PASSWORDS.items()]
    for future in admin.alter_user_scram_credentials(upserts, request_timeout=T).values():
        future.result(T)
    futures = admin.create_topics([NewTopic("alice-orders", 3, 3), NewTopic("alice-logs", 1, 1),
                                   NewTopic("secret", 2, 3)], request_timeout=T)
    for future in futures.values():
        future.result(T)
    wait_for(lambda: all(p.leader >= 0 for t in ("alice-orders", "secret")
                         for p in admin.list_topics(t, timeout=T).topics[t].partitions.values()),
             T, "leaders of the new topics")
    producer = ck.Producer(dict(broker, acks="all", **{"enable.idempotence": True}))
    for i in range(10):
        producer.produce("alice-orders", key=b"a-%d" % i, value=b"alice-%d" % i, partition=0)
        producer.produce("secret", key=b"s-%d" % i, value=b"secret-%d" % i, partition=0)
    assert producer.flush(T) == 0
    # The cluster's first group request creates __consumer_offsets (50 partitions, RF=3): its
    # coordinators may answer COORDINATOR_NOT_AVAILABLE for a while, and confluent-kafka puts
    # a partition's error in the result instead of raising it. Retried until it took.
    for group, topic, offset in (("alice-g", "alice-orders", 5), ("secret-g", "secret", 3)):
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, offset)])]

        def committed(group=group, request=request):
            try:
                answer = admin.alter_consumer_group_offsets(request, request_timeout=T)[group]
                return all(tp.error is None for tp in answer.result(T).topic_partitions)
            except ck.KafkaException:
                return False
        wait_for(committed, 60, "%s's committed offset" % group)
    wait_for(lambda: {"alice-g", "secret-g"} <= {g.group_id for g in
                                                 admin.list_consumer_groups(request_timeout=T)
                                                 .result(T).valid},
             T, "alice-g and secret-g listed")
    acls = [AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice",
                       "*", operation, AclPermissionType.ALLOW)
            for operation in (AclOperation.DESCRIBE, AclOperation.READ)]
    acls += [AclBinding(ResourceType.GROUP, "alice-g", ResourcePatternType.LITERAL, "User:alice",
                        "*", operation, AclPermissionType.ALLOW)
             for operation in (AclOperation.DESCRIBE, AclOperation.READ)]
    for future in admin.create_acls(acls, request_timeout=T).values():
        future.result(T)

    # Each broker applies credentials and ACLs asynchronously: wait until alice, logging in to
    # each node alone, sees exactly her topics.
    def alice_sees_hers(node):
        conf = dict(sasl_conf(cluster, "alice", PASSWORDS["alice"]),
                    **{"bootstrap.servers": "127.0.0.1:%d" % node.kafka_port})
        try:
            topics = set(AdminClient(conf).list_topics(timeout=5).topics)
        except ck.KafkaException:
            return False
        return topics == {"alice-orders", "alice-logs"}
    for node in cluster.nodes.values():
        wait_for(lambda: alice_sees_hers(node), T, "alice's ACLs on node %d" % node.node_id)
    return admin


class EvilSite:
    """A page on another local port (same site as the console: 127.0.0.1) that POSTs to the
    console's /api/topics: fetch no-cors (text/plain JSON), fetch cors (JSON and a guessed CSRF
    header: preflighted), and a text/plain form whose body is JSON."""

    PAGE = """<!doctype html><html><head><title>another site</title></head><body>
<h1>Not the console</h1>
<form id="attack" method="POST" enctype="text/plain" action="%(target)s/api/topics">
<input type="hidden" name='{"name":"evil-form","partitions":1,"replication_factor":1,"configs":{},"pad":"' value='"}'>
</form>
<script>
const target = %(target_json)s
const body = name => JSON.stringify({name, partitions: 1, replication_factor: 1, configs: {}})
window.__attempts = {}
const note = kind => [() => { window.__attempts[kind] = 'answered' },
                      e => { window.__attempts[kind] = 'refused: ' + e }]
Promise.allSettled([
  fetch(target + '/api/topics', {method: 'POST', mode: 'no-cors', credentials: 'include',
        headers: {'Content-Type': 'text/plain'}, body: body('evil-fetch')}).then(...note('no_cors')),
  fetch(target + '/api/topics', {method: 'POST', mode: 'cors', credentials: 'include',
        headers: {'Content-Type': 'application/json', 'X-Strata-Csrf': 'guessed'},
        body: body('evil-cors')}).then(...note('cors'))
]).then(() => { document.title = 'done' })
</script></body></html>
"""
    TOPICS = ("evil-form", "evil-fetch", "evil-cors")

    def __init__(self, directory, target):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "evil.html").write_text(self.PAGE % {"target": target,
                                                          "target_json": json.dumps(target)})

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass
        handler = functools.partial(Quiet, directory=str(directory))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = "http://127.0.0.1:%d/evil.html" % self.server.server_address[1]
        self.origin = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


GET_ROUTES = ["/api/session", "/api/cluster", "/api/topics", "/api/topics/alice-orders",
              "/api/topics/alice-orders/partitions/0/messages?offset=0", "/api/groups",
              "/api/groups/alice-g", "/api/transactions", "/api/charts?since=0"]
POST_ROUTES = [("/api/topics", {"name": "anon-made", "partitions": 1, "replication_factor": 1,
                                "configs": {}}),
               ("/api/topics/alice-orders/configs", {"set": {"retention.ms": "1000"}, "delete": []}),
               ("/api/groups/alice-g/offsets", {"topic": None, "to": "earliest", "value": 0}),
               ("/api/topics/alice-orders/delete-records", {"partitions": {"0": "hw"}})]
PAGE_ROUTES = ["/cluster", "/topics", "/topics/alice-orders",
               "/topics/alice-orders/messages/0?offset=0", "/groups", "/groups/alice-g",
               "/transactions", "/charts"]


@pytest.mark.timeout(240)
def test_console_with_sasl_needs_a_login_applies_acls_and_refuses_cross_site_posts(
        sasl_cluster, tmp_path):
    try:
        _sasl_scenario(sasl_cluster, tmp_path)
    finally:
        sasl_cluster.stop()


def _sasl_scenario(cluster, tmp_path):
    broker_admin = sasl_setup(cluster)
    console = base(cluster.nodes[1])
    wait_for(lambda: console_up(console), 15, "node 1's console")
    # The SCRAM credentials reach node 1's image asynchronously too.
    wait_for(lambda: http_call("POST", console + "/api/login",
                          {"user": "admin", "password": PASSWORDS["admin"]},
                          {"Content-Type": "application/json", "Origin": console})[0] == 200,
             15, "admin's console login on node 1")

    def topics():
        return set(broker_admin.list_topics(timeout=T).topics)

    # No cookie, or a forged one: nothing answers.
    json_post = {"Content-Type": "application/json", "Origin": console}
    for cookie in (None, "strata_console=forged-" + "A" * 43):
        headers = {"Cookie": cookie} if cookie else {}
        for route in GET_ROUTES:
            status, _, body = http_call("GET", console + route, headers=headers)
            assert status == 401, "GET %s with cookie %r: %d %r" % (route, cookie, status, body[:200])
        for route, body in POST_ROUTES:
            status, _, answer = http_call("POST", console + route, body, dict(json_post, **headers))
            assert status in (401, 403), "POST %s with cookie %r: %d %r" % (
                route, cookie, status, answer[:200])
    status, _, body = http_call("GET", console + "/api/session")
    assert json.loads(body).get("login_required") is True, body
    status, _, body = http_call("POST", console + "/api/login",
                           {"user": "alice", "password": "not-her-password"}, json_post)
    assert status == 401, (status, body)

    # CSRF: logged in as admin (who may create topics), a POST lacking any one of the
    # same-origin marks is 403 and makes nothing; with all of them it makes the topic.
    cookie, csrf = api_login(console, "admin", PASSWORDS["admin"])
    status, _, body = http_call("GET", console + "/api/topics", headers={"Cookie": cookie})
    assert status == 200 and "secret" in {t["name"] for t in json.loads(body)["topics"]}, body[:300]
    evil_origin = "http://127.0.0.1:%d" % (cluster.nodes[1].admin_port + 1)
    good = {"Content-Type": "application/json", "Origin": console, "Cookie": cookie,
            "X-Strata-Csrf": csrf}
    without = {
        "csrf-no-token": {k: v for k, v in good.items() if k != "X-Strata-Csrf"},
        "csrf-no-origin": {k: v for k, v in good.items() if k != "Origin"},
        "csrf-foreign-origin": dict(good, Origin=evil_origin),
        "csrf-wrong-token": dict(good, **{"X-Strata-Csrf": "A" * len(csrf)}),
        "csrf-form-type": dict(good, **{"Content-Type": "text/plain"}),
    }
    for name, headers in without.items():
        request = {"name": name, "partitions": 1, "replication_factor": 1, "configs": {}}
        status, _, body = http_call("POST", console + "/api/topics", request, headers)
        assert status == 403, "%s: %d %r" % (name, status, body[:200])
    request = {"name": "csrf-control", "partitions": 1, "replication_factor": 3, "configs": {}}
    status, _, body = http_call("POST", console + "/api/topics", request, good, timeout=T)
    assert status == 200 and json.loads(body)["ok"] is True, (status, body[:300])
    wait_for(lambda: "csrf-control" in topics(), T, "csrf-control made by the correct POST")
    assert not set(without) & topics(), "a refused POST made a topic: %r" % (set(without) & topics())

    # The browser: logged out, alice, and a cross-site page with admin's cookie.
    evil = EvilSite(tmp_path / "evil", console)
    try:
        seen = drive("sasl", "sasl", base=console, routes=PAGE_ROUTES,
                     alice={"user": "alice", "password": PASSWORDS["alice"]},
                     admin={"user": "admin", "password": PASSWORDS["admin"]},
                     wrong_password="not-her-password", secret_topic="secret",
                     secret_group="secret-g", alice_topic="alice-orders",
                     alice_create="alice-new", evil_url=evil.url)
    finally:
        evil.close()
    out = seen["logged_out"]
    assert all(r["login_form"] and r["data_rows"] == 0 for r in out["routes"]), out["routes"]
    assert out["api"] and all(a["status"] == 401 for a in out["api"]), out["api"]
    assert seen["wrong_password"]["error_shown"] and seen["wrong_password"]["error"], seen
    assert seen["wrong_password"]["nav_user"] in (None, "", "anonymous"), seen["wrong_password"]

    alice = seen["alice"]
    assert alice["nav_user"] == "alice", alice["nav_user"]
    assert set(by(alice["topics"], "topic")) == {"alice-orders", "alice-logs"}, alice["topics"]
    assert set(by(alice["groups"], "group")) == {"alice-g"}, alice["groups"]
    assert num({"text": alice["cluster"]["health-topics"] or ""}) == 2, alice["cluster"]
    assert sorted(int(o) for o in by(alice["messages"], "offset") if o and o.isdigit()) == \
        list(range(10)), alice["messages"]
    # A topic she may not DESCRIBE answers as Kafka's Metadata does for a named topic:
    # TOPIC_AUTHORIZATION_FAILED (403), the same whether or not it exists.
    assert alice["hidden"]["topic"] == 403, alice["hidden"]
    assert alice["hidden"]["messages"] in (403, 404), alice["hidden"]
    assert alice["hidden"]["group"] in (403, 404), alice["hidden"]
    print("alice creating a topic:", alice["create"])
    assert re.search(r"TOPIC_AUTHORIZATION_FAILED|CLUSTER_AUTHORIZATION_FAILED",
                     alice["create"]["result"] or ""), alice["create"]

    cross = seen["cross_site"]
    print("cross-site attempts:", cross)
    posts = [p for p in cross["posts"] if p["method"] == "POST"]
    assert posts and all(p["status"] == 403 for p in posts), cross
    assert any(p["kind"] == "document" and p["cookie"] for p in posts), (
        "the form POST did not carry admin's cookie, so it proves nothing: %r" % cross)
    made = topics()
    assert not made & ({"alice-new", "anon-made"} | set(EvilSite.TOPICS)), made


# --- scenario "scale" -------------------------------------------------------------------------
@pytest.mark.timeout(600)
def test_console_pages_load_with_1000_topics_and_200_groups_and_are_timed(console_cluster,
                                                                           cluster_data):
    bootstrap = console_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120_000})
    names = ["scale-%04d" % i for i in range(SCALE_TOPICS)]
    started = time.monotonic()
    futures = admin.create_topics([NewTopic(n, 1, 1, config={"segment.bytes": "1048576"})
                                   for n in names], request_timeout=120, operation_timeout=60)
    for future in futures.values():
        future.result(150)
    node1 = {"bootstrap.servers": "127.0.0.1:%d" % console_cluster.nodes[1].kafka_port}
    wait_for(lambda: set(names) <= set(AdminClient(node1).list_topics(timeout=T).topics), 60,
             "the 1,000 topics in node 1's metadata")
    print("1,000 topics created in %.1f s" % (time.monotonic() - started))
    started = time.monotonic()
    groups = ["scale-g-%03d" % i for i in range(SCALE_GROUPS)]
    for first in range(0, SCALE_GROUPS, 25):
        pending = {}
        for i in range(first, min(first + 25, SCALE_GROUPS)):
            request = [ConsumerGroupTopicPartitions(groups[i], [TopicPartition(names[i], 0, 0)])]
            pending.update(admin.alter_consumer_group_offsets(request, request_timeout=T))
        for future in pending.values():
            future.result(T)
    print("200 groups committed in %.1f s" % (time.monotonic() - started))

    pages = [{"name": "cluster", "hash": "/cluster", "ready": "cluster"},
             {"name": "topics", "hash": "/topics", "ready": "topics"},
             {"name": "groups", "hash": "/groups", "ready": "groups"},
             {"name": "transactions", "hash": "/transactions", "ready": "transactions"},
             {"name": "topic", "hash": "/topics/" + ORDERS, "ready": "topic"},
             {"name": "group", "hash": "/groups/busy", "ready": "group"}]
    seen = drive("scale", "scale", base=base(console_cluster.nodes[1]), pages=pages, loads=3)
    slow = {}
    print("page           warm-up   loads (ms to the ready mark)   median   rows   (target %d ms)"
          % PAGE_READY_MS_TARGET)
    for page in pages:
        figures = seen["pages"][page["name"]]
        times = figures["times"]
        assert None not in times, "no strata:ready:%s mark: %r" % (page["ready"], figures)
        median = statistics.median(times)
        print("%-14s %7.1f   %-30s %7.1f   %d" % (page["name"], figures["warmup"] or -1,
                                                   ", ".join("%.1f" % t for t in times), median,
                                                   figures["rows"]))
        if median >= PAGE_READY_MS_MAX:
            slow[page["name"]] = median
    for page in pages:
        print("%s, last load (ms): %s" % (page["name"], seen["pages"][page["name"]]["breakdown"]))
    # Kept beside the screenshots: pytest shows the prints only with -s or on a failure.
    (SHOTS / "scale" / "timings.json").write_text(json.dumps(
        {"binary": str(strata_bin()), "pages": seen["pages"]}, indent=1) + "\n")
    assert not slow, "pages slower than %d ms (median of 3, binary %s): %r" % (
        PAGE_READY_MS_MAX, strata_bin(), slow)
