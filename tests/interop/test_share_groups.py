"""KIP-932 share groups with confluent-kafka's ShareConsumer (librdkafka's share consumer).

What these tests prove, each against the real `strata` binary:
  * Five share consumers in one group read a 3-partition topic replicated on 3 nodes: more
    members than partitions receive records, every record is delivered and accepted exactly
    once across the group, and the broker confirms every acknowledgement.
  * RELEASE makes a record available again at once: it is delivered a second time, with
    delivery count 2, although its acquisition lock lasts far longer. REJECT archives a
    record: it never comes back, not even to a member that joins later.
  * A member killed with SIGKILL while it holds records without acknowledging them does not
    lose them: they are locked to it while it lives, and another member then gets them, with
    delivery count 2, within the group's `share.record.lock.duration.ms` plus a margin.
  * `share.delivery.count.limit` = 2: a record released at every delivery is delivered
    twice, then archived for good, while the records after it, and records produced later,
    still reach the consumer.
  * `share.isolation.level` = read_committed: the group never gets the records of an
    aborted transaction, nor those of an open one until it commits. A read_uncommitted
    group (the default) on the same topic gets them all, so they are really in the log.
  * A share group is listed by ListGroups v5 with type and protocol type "share" (and not
    among consumer groups), and ShareGroupDescribe shows its members, their subscriptions
    and their assignments; once its members close, it is Empty.

Share-group settings are group configs (KIP-848's GROUP config resource), set with
IncrementalAlterConfigs before any member joins. `share.auto.offset.reset` is `latest` by
default, so every group here that reads records produced before it joined sets `earliest`.
"""

# confluent-kafka 2.16.1 (librdkafka 2.16.0): the share consumer API, as read from the wheel
# (confluent_kafka/cimpl.pyi, the docstrings of ShareConsumer and Message,
# confluent_kafka/_model) and from librdkafka's rdkafka.h and INTRODUCTION.md ("Share
# consumers (Queues for Kafka)"). librdkafka calls it a preview and logs so at creation.
#
#   from confluent_kafka import ShareConsumer, AcknowledgeType, IllegalStateException
#   ShareConsumer(conf): "group.id" required, "bootstrap.servers". The one share-specific
#       client key is "share.acknowledgement.mode": "implicit" (default: the records of a
#       poll are ACCEPTed by the next poll / commit_sync / commit_async) or "explicit" (each
#       record of a poll must be acknowledged before the next poll, else poll raises
#       IllegalStateException). An unknown mode value is not refused at construction.
#       "max.poll.records" (default 500) is sent in ShareFetch and bounds the records the
#       broker acquires per fetch, softly (the broker may acquire whole batches).
#       Refused at construction, "not applicable for share consumer": isolation.level,
#       auto.offset.reset, enable.auto.commit, group.protocol (and other group-consumer keys).
#       Lock duration, delivery limit, isolation level and offset reset are group configs.
#   subscribe([topic, ...]), unsubscribe(), subscription() -> [topic, ...]. There is no
#       assign() and no assignment(): the broker assigns (ShareGroupHeartbeat).
#   poll(timeout_s=-1) -> confluent_kafka.Messages: a sequence of Message (len, iteration,
#       indexing, .count(), .is_empty(), .records()); empty when nothing came. Each Message
#       must be checked with .error(); records with a record-level error were already
#       acknowledged by librdkafka (REJECT for corrupt batches, RELEASE for decompression).
#   Message.delivery_count() -> int: 1 at the first acquisition, +1 at each re-acquisition
#       (after a RELEASE or a lock timeout); None for messages of other clients.
#   acknowledge(message, ack_type=AcknowledgeType.ACCEPT) and
#       acknowledge_offset(topic, partition, offset, ack_type=...): explicit mode only
#       (IllegalStateException otherwise); local until the next poll or commit sends them.
#   AcknowledgeType (IntEnum): ACCEPT = 1, RELEASE = 2, REJECT = 3 (no RENEW: KIP-1222's
#       lock renewal is not in this client).
#   commit_sync(timeout=60) -> {TopicPartition: None | KafkaException}, {} when nothing is
#       pending; commit_async() -> None.
#   set_acknowledgement_commit_callback(cb), cb(offsets: {TopicPartition: set(offsets)},
#       error: KafkaException | None): run on the application thread from poll, commit_sync,
#       commit_async or close, for acknowledgements sent in ShareFetch as well as in
#       ShareAcknowledge.
#   close(): sends pending acknowledgements and leaves the group; no timeout argument
#       (bounded by socket.timeout.ms). Context manager too. Calls after close raise
#       IllegalStateException.
#   Not thread-safe: one instance per thread (overlapping calls from two threads raise
#       ConcurrentModificationException).
#   Admin: librdkafka has no share-group admin operations. ConsumerGroupType is UNKNOWN,
#       CONSUMER, CLASSIC (no SHARE); there is no describe_share_groups nor share-group
#       offset API. list_consumer_groups keeps only groups whose protocol type is "consumer"
#       or "" (rd_kafka_ListConsumerGroupsResponse_parse), so a share group (Kafka's protocol
#       type "share") never shows there, and describe_consumer_groups refuses one as "not a
#       consumer group". This module therefore lists and describes share groups with raw
#       ListGroups v5 and ShareGroupDescribe v1 frames (wire.py's encoders).
#   Group configs from confluent-kafka: AdminClient.incremental_alter_configs(
#       [ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(name,
#       value, incremental_operation=AlterConfigOpType.SET)])]) and describe_configs(
#       [ConfigResource(ResourceType.GROUP, group)]), whose entries have source
#       ConfigSource.GROUP_CONFIG (8). Keys (Kafka's GroupConfig): share.auto.offset.reset,
#       share.record.lock.duration.ms, share.delivery.count.limit (2..10),
#       share.isolation.level, share.heartbeat.interval.ms, share.session.timeout.ms, ...

import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter, namedtuple

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, ResourceType)

import wire
from clients import ck_produce_each
from cluster import Cluster, wait_for
from conftest import strata_bin

pytestmark = pytest.mark.timeout(240)

T = 30  # seconds: the bound of every client call here
SETTLE = 3.0  # seconds of polling that show a record does not come (back)
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT

Delivery = namedtuple("Delivery", "key partition offset count ack")


# --- setup -------------------------------------------------------------------------------
def create_topic(bootstrap, topic, partitions, replicas=-1):
    """CreateTopics through confluent-kafka (replicas -1: the broker's default)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas)],
                        request_timeout=T)[topic].result(T)


def set_group_configs(bootstrap, group, configs):
    """Sets `configs` ({name: value}) on the GROUP config resource `group` with
    IncrementalAlterConfigs, then waits until DescribeConfigs shows each as the group's own
    (source GROUP_CONFIG). A group need not exist to have configs."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin.incremental_alter_configs([resource], request_timeout=T)[resource].result(T)

    def described():
        query = ConfigResource(ResourceType.GROUP, group)
        got = admin.describe_configs([query], request_timeout=T)[query].result(T)
        wrong = {name: (got[name].value, got[name].source) if name in got else None
                 for name, value in configs.items()
                 if name not in got or got[name].value != value
                 or got[name].source != ConfigSource.GROUP_CONFIG.value}
        assert not wrong, "group %s describes %r, set %r" % (group, wrong, configs)
        return True

    wait_for(described, T, "group %s's configs in DescribeConfigs" % group)


def produce(bootstrap, topic, keys, partitions=1, **extra):
    """One record per key (value b"v-" + key), the i-th to partition i % partitions, acks=all;
    every delivery checked. Returns {(topic, partition): [offsets]}."""
    records = [(topic, i % partitions, key.encode(), b"v-" + key.encode())
               for i, key in enumerate(keys)]
    return ck_produce_each(bootstrap, records, acks="all", timeout=60, **extra)


# --- share consumers ---------------------------------------------------------------------
class Reader:
    """One ShareConsumer in explicit acknowledgement mode. Each `poll` acknowledges every
    record it returns with `decide(message)` (ACCEPT unless told otherwise) and keeps a
    Delivery per record, in order. The acknowledgement-commit callback keeps the broker's
    answers: `confirmed`, (partition, offset) per acknowledgement answered without error;
    `failed`, (partition, offsets, error) per refused one. Use from one thread only."""

    def __init__(self, bootstrap, topic, group, name, decide=None, **extra):
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                "share.acknowledgement.mode": "explicit", "socket.timeout.ms": 10000}
        conf.update(extra)
        self.name = name
        self.decide = decide or (lambda message: ACCEPT)
        self.deliveries, self.confirmed, self.failed, self.errors = [], [], [], []
        self.closed = False
        self.consumer = ShareConsumer(conf)
        self.consumer.set_acknowledgement_commit_callback(self._answered)
        self.consumer.subscribe([topic])

    def _answered(self, offsets, error):
        for tp, numbers in offsets.items():
            if error is None:
                self.confirmed.extend((tp.partition, offset) for offset in sorted(numbers))
            else:
                self.failed.append((tp.partition, sorted(numbers), str(error)))

    def poll(self, timeout=0.2):
        """One poll; acknowledges what it got (sent with the next poll or commit). Returns the
        new deliveries."""
        got = []
        for message in self.consumer.poll(timeout):
            if message.error() is not None:
                self.errors.append(str(message.error()))
                continue
            ack = self.decide(message)
            self.consumer.acknowledge(message, ack)
            got.append(Delivery(message.key().decode(), message.partition(), message.offset(),
                                message.delivery_count(), ack))
        self.deliveries.extend(got)
        return got

    def keys(self):
        return {d.key for d in self.deliveries}

    def counts(self):
        """{key: [delivery count of each delivery, in order]}."""
        out = {}
        for d in self.deliveries:
            out.setdefault(d.key, []).append(d.count)
        return out

    def commit(self):
        """Sends the acknowledgements not sent yet and waits for the broker's answers."""
        results = self.consumer.commit_sync(T)
        refused = {tp.partition: str(e) for tp, e in results.items() if e is not None}
        assert not refused, "%s: acknowledgements refused: %r" % (self.name, refused)

    def close(self):
        if not self.closed:
            self.closed = True
            self.consumer.close()

    def summary(self):
        return "%s: %d deliveries, %d confirmed, %d refused %r, errors %r" % (
            self.name, len(self.deliveries), len(self.confirmed), len(self.failed),
            self.failed[:3], self.errors[:3])


def poll_until(readers, done, timeout, what):
    """Polls the readers in turn until done(); AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s; %s" % (
                timeout, what, "; ".join(r.summary() for r in readers)))
        for reader in readers:
            reader.poll()


def poll_for(readers, seconds):
    """Polls the readers in turn for `seconds`: whatever is still to come shows meanwhile."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for reader in readers:
            reader.poll()


def close_all(readers):
    errors = []
    for reader in readers:
        try:
            reader.close()
        except Exception as error:  # noqa: BLE001 - the others are still closed
            errors.append((reader.name, error))
    assert not errors, "close failed: %r" % errors


def assert_acknowledged(readers):
    """Every acknowledgement the readers sent (after they closed: close serves the last
    callbacks) was answered without error, once per delivery of its record."""
    failed = [(r.name, f) for r in readers for f in r.failed]
    assert not failed, "acknowledgements refused: %r" % failed[:5]
    delivered = Counter((d.partition, d.offset) for r in readers for d in r.deliveries)
    confirmed = Counter(po for r in readers for po in r.confirmed)
    assert confirmed == delivered, (
        "acknowledgements answered per (partition, offset) differ from deliveries: "
        "unanswered %r, answered but not delivered %r" % (
            sorted((delivered - confirmed).items())[:10],
            sorted((confirmed - delivered).items())[:10]))


# --- raw frames: what confluent-kafka has no API for ---------------------------------------
LIST_GROUPS, SHARE_GROUP_DESCRIBE = 16, 77
NOT_COORDINATOR, GROUP_ID_NOT_FOUND = 16, 69


def _ports(bootstrap):
    return [int(address.rsplit(":", 1)[1]) for address in bootstrap.split(",")]


def _call(port, api_key, version, body):
    """One flexible request (header v2) -> a Reader past the response header v1."""
    frame = wire.frame(wire.request_header_v2(api_key, version, 1) + body)
    reader = wire.Reader(wire.roundtrip(port, frame, T))
    reader.skip_tagged_fields()
    return reader


def _compact_array(items):
    return wire.uvarint(len(items) + 1) + b"".join(items)


def _compact_str(r):
    n = r.uvarint()
    return None if n == 0 else r.raw(n - 1).decode()


def list_groups(bootstrap, types):
    """ListGroups v5 with TypesFilter `types`, asked of every broker (each lists the groups it
    coordinates): {group id: {"protocol_type", "state", "type"}}."""
    body = _compact_array([]) + _compact_array([wire.compact_string(t) for t in types]) \
        + wire.EMPTY_TAGGED_FIELDS

    def listed(r):
        group = {"id": _compact_str(r), "protocol_type": _compact_str(r),
                 "state": _compact_str(r), "type": _compact_str(r)}
        r.skip_tagged_fields()
        return group

    out = {}
    for port in _ports(bootstrap):
        r = _call(port, LIST_GROUPS, 5, body)
        r.i32()  # throttle time
        error = r.i16()
        assert error == 0, "ListGroups v5 error %d from port %d" % (error, port)
        for group in r.compact_array(listed) or []:
            out[group.pop("id")] = group
    return out


def _topic_partitions(r):
    topic_id = r.raw(16)
    name = _compact_str(r)
    partitions = sorted(r.compact_array(lambda r: r.i32()) or [])
    r.skip_tagged_fields()
    return name, topic_id, partitions


def _member(r):
    m = {}
    m["member_id"] = _compact_str(r)
    m["rack_id"] = _compact_str(r)
    m["member_epoch"] = r.i32()
    m["client_id"] = _compact_str(r)
    m["client_host"] = _compact_str(r)
    m["subscribed"] = sorted(r.compact_array(_compact_str) or [])
    assigned = r.compact_array(_topic_partitions) or []
    r.skip_tagged_fields()  # the Assignment struct's
    r.skip_tagged_fields()  # the member's
    m["assignment"] = {name: partitions for name, _, partitions in assigned}
    m["topic_ids"] = {name: topic_id for name, topic_id, _ in assigned}
    return m


def _described(r):
    g = {}
    g["error"] = r.i16()
    g["error_message"] = _compact_str(r)
    g["group_id"] = _compact_str(r)
    g["state"] = _compact_str(r)
    g["group_epoch"] = r.i32()
    g["assignment_epoch"] = r.i32()
    g["assignor"] = _compact_str(r)
    g["members"] = r.compact_array(_member) or []
    g["authorized_operations"] = r.i32()
    r.skip_tagged_fields()
    return g


def describe_share_group(bootstrap, group):
    """ShareGroupDescribe v1 of `group`, asked of each broker until one answers other than
    NOT_COORDINATOR: the described group as a dict (members' assignments as
    {topic: [partitions]})."""
    body = _compact_array([wire.compact_string(group)]) + wire.i8(0) + wire.EMPTY_TAGGED_FIELDS
    answers = []
    for port in _ports(bootstrap):
        r = _call(port, SHARE_GROUP_DESCRIBE, 1, body)
        r.i32()  # throttle time
        groups = r.compact_array(_described) or []
        assert len(groups) == 1, "ShareGroupDescribe of one group answered %r" % groups
        if groups[0]["error"] != NOT_COORDINATOR:
            return groups[0]
        answers.append(groups[0])
    raise AssertionError("no broker coordinates %s: %r" % (group, answers))


def strata_group(bootstrap, *args):
    """`strata group ARGS --bootstrap BOOTSTRAP`, bounded at 60 s: the finished process."""
    return subprocess.run([strata_bin(), "group", *args, "--bootstrap", bootstrap],
                          capture_output=True, text=True, timeout=60)


# --- tests ---------------------------------------------------------------------------------
@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=["--set", "offsets.topic.replication.factor=3"]).start()
    yield c
    c.stop()


# What a member spends on each record: it stands for the processing work, so that the first
# member to get an assignment cannot drain the topic before the others join.
WORK_S = 0.01


def test_more_share_consumers_than_partitions_accept_each_record_exactly_once(cluster, topic_name):
    """Five share consumers (explicit acknowledgement, each record accepted) in one group read
    900 records with unique keys from a 3-partition topic with 3 replicas on 3 nodes. Every
    record is delivered exactly once across the group, at delivery count 1, and every
    acceptance is confirmed by the broker exactly once. More than 3 members receive records:
    a share group lets more members than partitions read (a consumer group would leave two
    of the five idle). Records are produced in batches of 5 and members fetch at most about
    10 at a time, so no member can acquire a whole partition at once."""
    group = "sg-" + topic_name
    bootstrap = cluster.bootstrap
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    create_topic(bootstrap, topic_name, 3, 3)
    keys = ["k-%04d" % i for i in range(900)]
    delivered = produce(bootstrap, topic_name, keys, partitions=3, **{"batch.num.messages": 5})
    produced = {(p, o) for (_, p), offsets in delivered.items() for o in offsets}
    assert len(produced) == 900, delivered

    def work(message):
        time.sleep(WORK_S)  # the record's processing (see WORK_S)
        return ACCEPT

    stop, lock = threading.Event(), threading.Lock()
    readers, failures, seen = [], [], set()

    def member(name):
        try:
            reader = Reader(bootstrap, topic_name, group, name, decide=work,
                            **{"max.poll.records": 10})
            with lock:
                readers.append(reader)
            try:
                while not stop.is_set():
                    got = reader.poll(0.5)
                    with lock:
                        seen.update(d.key for d in got)
                reader.commit()
            finally:
                reader.close()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            failures.append((name, repr(error)))

    threads = [threading.Thread(target=member, args=("member-%d" % i,), daemon=True)
               for i in range(5)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not failures:
            with lock:
                if len(seen) == len(keys):
                    break
            time.sleep(0.2)  # the members poll in their threads; this only watches progress
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not failures, failures
    assert not any(t.is_alive() for t in threads), "a member did not stop within 60 s"
    assert len(readers) == 5

    per_member = {r.name: len(r.deliveries) for r in readers}
    by_key = Counter(d.key for r in readers for d in r.deliveries)
    missing = sorted(set(keys) - set(by_key))
    assert not missing, "%d of 900 records never delivered (first %s); per member %r; %s" % (
        len(missing), missing[:5], per_member, "; ".join(r.summary() for r in readers))
    twice = sorted(k for k, n in by_key.items() if n > 1)
    assert not twice, "%d records delivered more than once, first %r" % (len(twice), [
        (r.name, d) for r in readers for d in r.deliveries if d.key in twice[:3]])
    wrong = [(r.name, d) for r in readers for d in r.deliveries
             if d.count != 1 or d.partition != int(d.key[2:]) % 3]
    assert not wrong, "deliveries with a count other than 1 or on a wrong partition: %r" % wrong[:5]
    assert {(d.partition, d.offset) for r in readers for d in r.deliveries} == produced
    assert_acknowledged(readers)
    assert sum(1 for n in per_member.values() if n) > 3, (
        "only %d of 5 members received records: %r" % (
            sum(1 for n in per_member.values() if n), per_member))


def test_released_records_come_back_and_rejected_ones_never_do(shared_broker, topic_name):
    """One member reads 50 records: it rejects every key divisible by 5, releases the other
    even keys the first time it sees them and accepts everything else. Each released record
    is delivered again, with delivery count 2, well before its 60 s acquisition lock could
    expire: RELEASE makes it available at once. The rejected and the accepted records are
    delivered once only, with delivery count 1, even after more polling. A member that joins
    the group afterwards gets nothing: rejected records are archived, not just held."""
    bootstrap = shared_broker.bootstrap
    group = "sg-" + topic_name
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.record.lock.duration.ms": "60000"})
    create_topic(bootstrap, topic_name, 1)
    keys = ["r-%02d" % i for i in range(50)]
    produce(bootstrap, topic_name, keys)
    rejected = {k for i, k in enumerate(keys) if i % 5 == 0}
    released = {k for i, k in enumerate(keys) if i % 5 and i % 2 == 0}
    accepted = set(keys) - rejected - released

    def decide(message):
        i = int(message.key()[2:])
        if i % 5 == 0:
            return REJECT
        if i % 2 == 0 and message.delivery_count() == 1:
            return RELEASE
        return ACCEPT

    reader = Reader(bootstrap, topic_name, group, "releaser", decide=decide)
    try:
        def done():
            counts = reader.counts()
            return set(counts) == set(keys) and all(len(counts[k]) >= 2 for k in released)
        # Far less than the lock duration: the released records come back because they were
        # released, not because their lock ran out.
        poll_until([reader], done, 40, "every record, and the released ones a second time")
        poll_for([reader], SETTLE)
        reader.commit()
    finally:
        close_all([reader])
    counts = reader.counts()
    assert {k: counts[k] for k in released} == {k: [1, 2] for k in released}
    assert {k: counts[k] for k in rejected} == {k: [1] for k in rejected}
    assert {k: counts[k] for k in accepted} == {k: [1] for k in accepted}
    assert_acknowledged([reader])

    late = Reader(bootstrap, topic_name, group, "late")
    try:
        poll_for([late], 2 * SETTLE)
    finally:
        close_all([late])
    assert late.deliveries == [], "records delivered after every one was accepted or rejected: %r" \
        % late.deliveries


# A member that takes its first batch of records, prints them and never acknowledges them:
# it waits to be killed (librdkafka's threads keep its group membership alive meanwhile).
HOLDER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import ShareConsumer
    bootstrap, topic, group = sys.argv[1:4]
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "client.id": "holder", "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    print("started", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        records = [m for m in consumer.poll(0.5) if m.error() is None]
        if records:
            for m in records:
                print("acquired", m.key().decode(), m.partition(), m.offset(),
                      m.delivery_count(), flush=True)
            print("holding", flush=True)
            break
    while True:
        time.sleep(1)
""")

LOCK_MS = 15000  # share.record.lock.duration.ms for the kill test (Kafka's minimum)
MARGIN_S = 20.0


def test_a_killed_consumer_s_records_come_back_to_another_member(shared_broker, topic_name, tmp_path):
    """A member in a child process acquires records and never acknowledges them. While it
    lives, another member of the group does not get those records. Once the child is killed
    (SIGKILL: no leave, no release), the other member gets each of them exactly once, with a
    delivery count of at least 2, within the group's lock duration (15 s) plus a margin; it
    also gets every other record once, and its acknowledgements are all confirmed."""
    bootstrap = shared_broker.bootstrap
    group = "sg-" + topic_name
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.record.lock.duration.ms": str(LOCK_MS)})
    create_topic(bootstrap, topic_name, 1)
    keys = ["h-%02d" % i for i in range(20)]
    produce(bootstrap, topic_name, keys)

    log_path = tmp_path / "holder.log"
    with open(log_path, "w") as log:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap, topic_name, group],
                                  stdout=log, stderr=subprocess.STDOUT)

    def lines():
        return [line.split() for line in log_path.read_text().splitlines() if line.strip()]

    survivor = None
    try:
        wait_for(lambda: ["holding"] in lines() or holder.poll() is not None, 60,
                 "the holder's first records")
        acquired_at = time.monotonic()
        assert holder.poll() is None, "the holder exited:\n" + log_path.read_text()
        acquired = [line for line in lines() if line[0] == "acquired"]
        held = {line[1] for line in acquired}
        assert held and all(line[4] == "1" for line in acquired), acquired

        survivor = Reader(bootstrap, topic_name, group, "survivor")
        # Well inside the holder's locks: they are its records only.
        poll_for([survivor], max(0.0, acquired_at + LOCK_MS / 3000.0 - time.monotonic()))
        early = sorted(survivor.keys() & held)
        assert not early, "records held by a live member delivered to another: %s" % early

        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        poll_until([survivor], lambda: survivor.keys() >= set(keys), LOCK_MS / 1000.0 + MARGIN_S,
                   "the killed member's %d records at the survivor" % len(held))
        poll_for([survivor], SETTLE)
        survivor.commit()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if survivor is not None:
            close_all([survivor])
    counts = survivor.counts()
    assert all(len(counts[k]) == 1 for k in keys), {k: v for k, v in counts.items() if len(v) != 1}
    assert all(counts[k][0] >= 2 for k in held), {k: counts[k] for k in held}
    assert_acknowledged([survivor])


def test_delivery_limit_archives_a_record_that_is_always_released(shared_broker, topic_name):
    """With the group config `share.delivery.count.limit` = 2 (Kafka's minimum), a member
    releases the record with key `poison` every time and accepts every other. `poison` is
    delivered exactly twice (delivery counts 1 and 2), then never again, while the records
    after it and records produced after its last delivery still arrive, each once. A member
    that joins afterwards gets nothing: `poison` is archived."""
    bootstrap = shared_broker.bootstrap
    group = "sg-" + topic_name
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.delivery.count.limit": "2",
                                         "share.record.lock.duration.ms": "60000"})
    create_topic(bootstrap, topic_name, 1)
    ok = ["ok-%02d" % i for i in range(20)]
    produce(bootstrap, topic_name, ok[:10] + ["poison"] + ok[10:])
    late_keys = ["late-%d" % i for i in range(5)]

    reader = Reader(bootstrap, topic_name, group, "poisoned",
                    decide=lambda m: RELEASE if m.key() == b"poison" else ACCEPT)
    try:
        poll_until([reader], lambda: reader.keys() >= set(ok)
                   and len(reader.counts().get("poison", [])) >= 2, 40,
                   "every record, and `poison` twice")
        produce(bootstrap, topic_name, late_keys)
        poll_until([reader], lambda: reader.keys() >= set(late_keys), T,
                   "the records produced after the limit was reached")
        poll_for([reader], SETTLE)
        reader.commit()
    finally:
        close_all([reader])
    counts = reader.counts()
    assert counts.get("poison") == [1, 2], "poison delivered with counts %r" % counts.get("poison")
    assert {k: counts.get(k) for k in ok + late_keys} == {k: [1] for k in ok + late_keys}
    assert_acknowledged([reader])

    late = Reader(bootstrap, topic_name, group, "late")
    try:
        poll_for([late], 2 * SETTLE)
    finally:
        close_all([late])
    assert late.deliveries == [], "delivered after the limit: %r" % late.deliveries


def test_records_archived_at_the_limit_or_rejected_land_in_the_dead_letter_topic(shared_broker, topic_name):
    """KIP-1191: a group whose `errors.deadletterqueue.topic.name` names a topic that opted in
    (`errors.deadletterqueue.group.enable=true`), with `errors.deadletterqueue.copy.record.enable`,
    and `share.delivery.count.limit` = 2. The member releases `poison` every time and rejects
    `bad` once: both are archived, and each lands in the dead-letter topic once, in the partition
    of the same number, with its key and value copied and Kafka's `__dlq.errors.*` headers
    (source topic, partition, offset, group, delivery count, and the reason). Accepted records
    never do."""
    from confluent_kafka import Consumer
    bootstrap = shared_broker.bootstrap
    group = "sg-" + topic_name
    dlq = "dlq." + topic_name
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(dlq, 1, 1, config={"errors.deadletterqueue.group.enable": "true"})],
                        request_timeout=T)[dlq].result(T)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.delivery.count.limit": "2",
                                         "errors.deadletterqueue.topic.name": dlq,
                                         "errors.deadletterqueue.copy.record.enable": "true"})
    create_topic(bootstrap, topic_name, 1)
    offsets = produce(bootstrap, topic_name, ["ok-1", "poison", "ok-2", "bad", "ok-3"])
    by_key = dict(zip(["ok-1", "poison", "ok-2", "bad", "ok-3"], offsets[(topic_name, 0)]))

    def decide(message):
        return {b"poison": RELEASE, b"bad": REJECT}.get(message.key(), ACCEPT)

    reader = Reader(bootstrap, topic_name, group, "dead-letters", decide=decide)
    try:
        poll_until([reader], lambda: len(reader.counts().get("poison", [])) >= 2
                   and {"ok-1", "ok-2", "ok-3", "bad"} <= reader.keys(), 40,
                   "`poison` twice and every other record")
        poll_for([reader], SETTLE)
        reader.commit()
    finally:
        close_all([reader])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-" + dlq,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([dlq])
    letters, deadline = [], time.monotonic() + T
    try:
        while len(letters) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                letters.append(message)
        extra_deadline = time.monotonic() + SETTLE
        while time.monotonic() < extra_deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                letters.append(message)
    finally:
        consumer.close()
    assert len(letters) == 2, "dead letters: %r" % [(m.key(), m.headers()) for m in letters]
    got = {}
    for message in letters:
        headers = {k: v.decode() for k, v in message.headers()}
        got[message.key()] = (message.value(), message.partition(), headers)
    expected_reasons = {b"poison": ("Offset delivery count exceeded the threshold.", "2"),
                        b"bad": ("Offset rejected by client.", "1")}
    for key, (reason, count) in expected_reasons.items():
        assert key in got, "no dead letter for %r: %r" % (key, got)
        value, partition, headers = got[key]
        assert value == b"v-" + key and partition == 0
        assert headers == {"__dlq.errors.topic": topic_name, "__dlq.errors.partition": "0",
                           "__dlq.errors.offset": str(by_key[key.decode()]),
                           "__dlq.errors.group": group, "__dlq.errors.delivery.count": count,
                           "__dlq.errors.message": reason}, headers


def test_read_committed_share_group_skips_aborted_records(shared_broker, topic_name):
    """A transactional producer commits 10 records, aborts 10, commits 5 more and leaves a
    fourth transaction of 3 open. A share group with `share.isolation.level` = read_committed
    gets the 15 committed records, each once, and neither the aborted nor the open ones. A
    group with the default read_uncommitted on the same topic gets all 28, so the aborted and
    open records are really there to skip. Once the open transaction commits, the
    read_committed group gets its 3 records too."""
    bootstrap = shared_broker.bootstrap
    committed_group, uncommitted_group = "sg-rc-" + topic_name, "sg-ru-" + topic_name
    set_group_configs(bootstrap, committed_group, {"share.auto.offset.reset": "earliest",
                                                   "share.isolation.level": "read_committed"})
    set_group_configs(bootstrap, uncommitted_group, {"share.auto.offset.reset": "earliest"})
    create_topic(bootstrap, topic_name, 1)

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-" + topic_name,
                         "linger.ms": 5})
    producer.init_transactions(T)
    failed = []

    def transaction(prefix, count, end):
        keys = ["%s-%02d" % (prefix, i) for i in range(count)]
        producer.begin_transaction()
        for key in keys:
            producer.produce(topic_name, key=key.encode(), value=b"v-" + key.encode(), partition=0,
                             on_delivery=lambda err, m: err is not None and failed.append(err))
        assert producer.flush(T) == 0 and not failed, failed
        if end == "commit":
            producer.commit_transaction(T)
        elif end == "abort":
            producer.abort_transaction(T)
        return set(keys)

    committed = transaction("committed", 10, "commit")
    aborted = transaction("aborted", 10, "abort")
    after = transaction("after", 5, "commit")
    pending = transaction("pending", 3, None)  # left open for now

    rc = Reader(bootstrap, topic_name, committed_group, "read-committed")
    ru = Reader(bootstrap, topic_name, uncommitted_group, "read-uncommitted")
    try:
        everything = committed | aborted | after | pending
        poll_until([rc, ru], lambda: rc.keys() >= committed | after and ru.keys() >= everything,
                   60, "the committed records (read_committed) and all 28 (read_uncommitted)")
        poll_for([rc, ru], SETTLE)
        assert rc.keys() == committed | after, (
            "read_committed got aborted %s and open %s" % (
                sorted(rc.keys() & aborted), sorted(rc.keys() & pending)))
        assert ru.keys() == everything

        producer.commit_transaction(T)
        poll_until([rc], lambda: rc.keys() >= pending, T,
                   "the records of the transaction committed last")
        poll_for([rc], SETTLE)
        rc.commit()
        ru.commit()
    finally:
        close_all([rc, ru])
    assert rc.keys() == committed | after | pending, sorted(rc.keys() & aborted)
    for reader in (rc, ru):
        counts = reader.counts()
        assert all(v == [1] for v in counts.values()), (
            reader.name, {k: v for k, v in counts.items() if v != [1]})
    assert_acknowledged([rc, ru])


def test_share_group_is_listed_and_described(shared_broker, topic_name):
    """Two share consumers (client ids lister-a and lister-b) join a group subscribed to a
    2-partition topic. ListGroups v5 filtered on type "share" lists the group as type
    "share", protocol type "share", state Stable; filtered on "consumer" and "classic" it
    does not, and confluent-kafka's list_consumer_groups (which keeps protocol type
    "consumer" only) leaves it out. ShareGroupDescribe shows it Stable with the "simple"
    assignor, both members with their client ids, hosts and subscription, every member
    assigned part of the topic and the two partitions covered, at the group's epoch. Once
    both close, it is Empty with no members; an unknown group is GROUP_ID_NOT_FOUND.
    confluent-kafka 2.16.1 has no share-group admin API (no describe_share_groups, no SHARE
    group type), so listing by type and describing go over raw frames."""
    bootstrap = shared_broker.bootstrap
    group = "sg-" + topic_name
    create_topic(bootstrap, topic_name, 2)
    members = [Reader(bootstrap, topic_name, group, name) for name in ("lister-a", "lister-b")]
    try:
        def steady():
            for member in members:
                member.poll()
            d = describe_share_group(bootstrap, group)
            assert d["error"] == 0, d
            ready = (len(d["members"]) == 2 and d["assignment_epoch"] == d["group_epoch"]
                     and all(m["assignment"].get(topic_name) for m in d["members"])
                     and all(m["member_epoch"] == d["group_epoch"] for m in d["members"]))
            return d if ready else None

        described = wait_for(steady, 60, "both members assigned in ShareGroupDescribe")
        assert described["group_id"] == group
        assert described["state"] == "Stable", described
        assert described["assignor"] == "simple", described
        assert {m["client_id"] for m in described["members"]} == {"lister-a", "lister-b"}
        for m in described["members"]:
            assert m["member_id"] and m["client_host"], m
            assert m["subscribed"] == [topic_name], m
            assert set(m["assignment"]) == {topic_name}, m
            assert m["topic_ids"][topic_name] != bytes(16), m
        covered = set()
        for m in described["members"]:
            covered.update(m["assignment"][topic_name])
        assert covered == {0, 1}, described["members"]

        listed = list_groups(bootstrap, ["share"])
        assert listed.get(group) == {"protocol_type": "share", "state": "Stable", "type": "share"}, \
            listed.get(group)
        assert group not in list_groups(bootstrap, ["consumer", "classic"])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        consumer_groups = admin.list_consumer_groups(request_timeout=T).result(T)
        assert group not in {g.group_id for g in consumer_groups.valid}
    finally:
        close_all(members)

    def empty():
        d = describe_share_group(bootstrap, group)
        return d if d["error"] == 0 and d["state"] == "Empty" and not d["members"] else None

    wait_for(empty, T, "the group Empty once both members closed")
    assert list_groups(bootstrap, ["share"])[group]["state"] == "Empty"
    unknown = describe_share_group(bootstrap, "no-such-group-" + topic_name)
    assert unknown["error"] == GROUP_ID_NOT_FOUND, unknown


def test_strata_group_lists_and_describes_a_share_group_with_its_start_offsets_and_lag(shared_broker, topic_name):
    """`strata group list` shows a share group with type "share"; `strata group describe`
    shows its member and assignment and, per partition, the share-partition start offset
    from DescribeShareGroupOffsets (10, once the first 10 records are accepted), the log end
    (15, after 5 more are produced) and the lag between them (5)."""
    import json
    bootstrap = shared_broker.bootstrap
    group = "sg-" + topic_name
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    create_topic(bootstrap, topic_name, 1)
    produce(bootstrap, topic_name, ["a-%d" % i for i in range(10)])
    reader = Reader(bootstrap, topic_name, group, "described")
    try:
        poll_until([reader], lambda: len(reader.keys()) == 10, 40, "the first 10 records")
        reader.commit()
        produce(bootstrap, topic_name, ["b-%d" % i for i in range(5)])

        def strata(*args):
            out = subprocess.run([strata_bin(), *args, "--bootstrap", bootstrap, "--format", "json"],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)

        listed = {g["group"]: g for g in strata("group", "list")}
        assert listed[group]["type"] == "share", listed.get(group)
        described = strata("group", "describe", group)
        assert described["protocol"] == "share" and described["assignor"] == "simple", described
        assert [m["client_id"] for m in described["members"]] == ["described"], described
        assert described["members"][0]["assignment"] == [{"topic": topic_name, "partition": 0}]
        row = [o for o in described["offsets"] if o["topic"] == topic_name]
        assert row == [{"topic": topic_name, "partition": 0, "start_offset": 10,
                        "log_end_offset": 15, "lag": 5,
                        "members": [described["members"][0]["member_id"]]}], described["offsets"]
    finally:
        close_all([reader])


def test_strata_group_resets_and_deletes_a_share_group_s_offsets_only_while_it_is_empty(
        shared_broker, topic_name):
    """AlterShareGroupOffsets and DeleteShareGroupOffsets through `strata group reset-offsets`
    and `strata group delete-offsets`: refused while a member is in the group; once it left,
    a reset to offset 5 makes the next member get records 5-19 again (delivery count 1: the
    leader dropped its old state, in which all 20 were accepted), and deleting the offsets
    makes the next one start over from share.auto.offset.reset (earliest: all 20)."""
    bootstrap = shared_broker.bootstrap
    group = "sg-" + topic_name
    keys = ["r-%d" % i for i in range(20)]
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    create_topic(bootstrap, topic_name, 1)
    produce(bootstrap, topic_name, keys)

    def strata(*args):
        return strata_group(bootstrap, *args)

    def read_all(name, expected):
        reader = Reader(bootstrap, topic_name, group, name)
        try:
            poll_until([reader], lambda: reader.keys() >= set(expected), 40,
                       "%d records for %s" % (len(expected), name))
            reader.commit()
            poll_for([reader], SETTLE)  # nothing beyond `expected` comes
            return reader.deliveries
        finally:
            reader.close()

    first = read_all("first", keys)
    assert sorted(d.offset for d in first) == list(range(20)), first

    busy = Reader(bootstrap, topic_name, group, "busy")
    try:
        poll_for([busy], 2.0)  # joined: the group has a member
        refused = strata("reset-offsets", group, "--topic", topic_name, "--to-offset", "5")
        assert refused.returncode != 0 and "members" in refused.stderr, refused
        refused = strata("delete-offsets", group, "--topic", topic_name)
        assert refused.returncode != 0 and "members" in refused.stderr, refused
    finally:
        busy.close()

    def reset_took():
        out = strata("reset-offsets", group, "--topic", topic_name, "--to-offset", "5")
        assert "members" in out.stderr or out.returncode == 0, out  # the leave lands first
        return out.returncode == 0
    wait_for(reset_took, T, "the reset once the last member left")
    again = read_all("after-reset", keys[5:])
    assert sorted(d.offset for d in again) == list(range(5, 20)), again
    assert all(d.count == 1 for d in again), again

    deleted = strata("delete-offsets", group, "--topic", topic_name)
    assert deleted.returncode == 0, deleted
    over = read_all("after-delete", keys)
    assert sorted(d.offset for d in over) == list(range(20)), over


# --- failover -------------------------------------------------------------------------------
SHARE_STATE_TOPIC, SHARE_STATE_PARTITIONS = "__share_group_state", 50


def java_string_hash(text):
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for unit in text.encode("utf-16-be").hex() and [
            int.from_bytes(text.encode("utf-16-be")[i:i + 2], "big")
            for i in range(0, len(text.encode("utf-16-be")), 2)]:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def share_state_partition(group, topic_id_base64, partition):
    """The `__share_group_state` partition of a share partition, as Kafka places it:
    abs(hashCode("group:topicId:partition")) % 50 (`ShareCoordinatorService.partitionFor`)."""
    h = java_string_hash("%s:%s:%d" % (group, topic_id_base64, partition))
    return (0 if h == -(1 << 31) else abs(h)) % SHARE_STATE_PARTITIONS


def topic_id_of(bootstrap, topic):
    from confluent_kafka import TopicCollection
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_topics(TopicCollection([topic]), request_timeout=T)
    return str(described[topic].result(T).topic_id)


def leader_of(cluster, topic, partition):
    live = next(n for n in cluster.nodes.values() if n.running())
    from cluster import partitions_of
    leader, error = partitions_of(live, topic).get(partition, (-1, -1))
    return leader if error == 0 else -1


def test_share_state_survives_kill_9_of_the_leader_and_of_the_share_coordinator(cluster, topic_name):
    """A share group reads 600 records of a 1-partition topic with 3 replicas on 3 nodes,
    accepting each. First the partition leader's node is killed (SIGKILL) while the member
    holds records whose acceptance it has not sent; later, with that node back, the node of
    the share coordinator that keeps the share partition's state (the leader of its
    `__share_group_state` partition) is killed too. The member keeps polling through both.
    Every record's acceptance is confirmed by a broker, and no record is delivered again once
    its acceptance was confirmed: the new leader resumed from the state the coordinator had
    replicated, not from `share.auto.offset.reset`, and lost nothing (records held at the
    kill come back, since their acceptance never reached a broker).

    An acknowledgement a kill interrupts can be refused (the client's connection broke, or the
    state write timed out while the dead node was still in the ISR) after it took effect: as
    in Kafka, a refusal does not say it was not applied. Such a record is either accepted (and
    never delivered again) or offered again and then accepted and confirmed; never lost."""
    group = "sgf-" + topic_name
    bootstrap = cluster.bootstrap
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.record.lock.duration.ms": "15000"})
    create_topic(bootstrap, topic_name, 1, 3)
    keys = ["f-%04d" % i for i in range(600)]
    # Small batches: the broker acquires whole batches, and the member should take a few at
    # a time, so that it holds some at each kill.
    delivered = produce(bootstrap, topic_name, keys, **{"batch.num.messages": 5})
    produced = {o for offsets in delivered.values() for o in offsets}
    assert len(produced) == 600

    # (kind, offset) in the order the client saw them
    events, confirmed_at, refused_at = [], {}, {}

    class Watched(Reader):
        def _answered(self, offsets, error):
            super()._answered(offsets, error)
            for _, numbers in offsets.items():
                for offset in numbers:
                    if error is None:
                        confirmed_at.setdefault(offset, len(events))
                        events.append(("confirmed", offset))
                    else:
                        refused_at[offset] = len(events)
                        events.append(("refused", offset))

        def poll(self, timeout=0.2):
            got = super().poll(timeout)
            for d in got:
                redelivered = d.offset in confirmed_at
                events.append(("delivered-after-accept" if redelivered else "delivered", d.offset))
            return got

    def no_redelivery(after):
        again = [offset for kind, offset in events if kind == "delivered-after-accept"]
        assert not again, "after %s: records delivered again after their acceptance was " \
            "confirmed: %r" % (after, again[:10])

    reader = Watched(bootstrap, topic_name, group, "survivor", **{"max.poll.records": 10,
                                                                  "socket.timeout.ms": 5000})
    try:
        poll_until([reader], lambda: len(confirmed_at) >= 150, 90, "150 acceptances")
        # Acquire more and acknowledge them locally, unsent: then the leader dies.
        poll_until([reader], lambda: any(d.offset not in confirmed_at for d in reader.deliveries[-5:]),
                   30, "records held")
        first = leader_of(cluster, topic_name, 0)
        assert first > 0
        cluster.kill(first)
        poll_until([reader], lambda: len(confirmed_at) >= 350, 120,
                   "350 acceptances after node %d (the leader) was killed" % first)
        no_redelivery("the leader's kill")
        cluster.nodes[first].restart_after_kill()
        wait_for(lambda: leader_of(cluster, topic_name, 0) > 0, 60, "a leader again")
        topic_id = topic_id_of(bootstrap, topic_name)
        state_partition = share_state_partition(group, topic_id, 0)
        coordinator = leader_of(cluster, SHARE_STATE_TOPIC, state_partition)
        assert coordinator > 0, "no leader of %s-%d" % (SHARE_STATE_TOPIC, state_partition)
        poll_until([reader], lambda: any(d.offset not in confirmed_at for d in reader.deliveries[-5:]),
                   30, "records held")
        cluster.kill(coordinator)
        poll_until([reader], lambda: len(set(confirmed_at) | set(refused_at)) >= 600, 150,
                   "every acceptance after node %d (the share coordinator of %s-%d) was killed"
                   % (coordinator, SHARE_STATE_TOPIC, state_partition))
        # A refused acknowledgement that did not take effect leaves its records acquired: they
        # come back after the lock duration (15 s), and are accepted again.
        # (Those of one that took effect never come back: this waits at most 25 s for them.)
        deadline = time.monotonic() + 25
        while not set(refused_at) <= set(confirmed_at) and time.monotonic() < deadline:
            reader.poll()
        cluster.nodes[coordinator].restart_after_kill()
    finally:
        reader.close()
    assert set(confirmed_at) | set(refused_at) == produced, \
        "acceptances confirmed for %d of 600 records, refused for %d" % (len(confirmed_at), len(refused_at))
    # A refused record not confirmed since was not delivered again after its refusal (it was
    # accepted after all): a delivery after the refusal would have been accepted and confirmed.
    for offset in set(refused_at) - set(confirmed_at):
        later = [kind for kind, o in events[refused_at[offset]:] if o == offset and kind.startswith("delivered")]
        assert not later, "offset %d: refused, delivered again, never confirmed" % offset
    no_redelivery("the coordinator's kill")


# --- the state index: DeleteGroups after the coordinator moved ----------------------------------
OFFSETS_TOPIC, OFFSETS_PARTITIONS = "__consumer_offsets", 50


def group_partition(group):
    """The `__consumer_offsets` partition of a group: abs(hashCode(group)) % 50."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


READ_SHARE_GROUP_STATE_SUMMARY, DESCRIBE_SHARE_GROUP_OFFSETS = 87, 90


def described_offsets_everywhere(bootstrap, group):
    """DescribeShareGroupOffsets v0 with a null topic list (every partition the group has
    state on) asked of every broker: [(group error, {(topic, partition): start offset})]."""
    body = _compact_array([wire.compact_string(group) + wire.uvarint(0) + wire.EMPTY_TAGGED_FIELDS]) \
        + wire.EMPTY_TAGGED_FIELDS

    def partition(r):
        p = (r.i32(), r.i64())
        r.i32()  # leader epoch
        r.i16()  # error
        _compact_str(r)
        r.skip_tagged_fields()
        return p

    def topic(r):
        name = _compact_str(r)
        r.raw(16)
        partitions = r.compact_array(partition) or []
        r.skip_tagged_fields()
        return name, partitions

    def group_answer(r):
        _compact_str(r)
        topics = r.compact_array(topic) or []
        error = r.i16()
        _compact_str(r)
        r.skip_tagged_fields()
        return error, {(name, p): start for name, ps in topics for p, start in ps}

    out = []
    for port in _ports(bootstrap):
        r = _call(port, DESCRIBE_SHARE_GROUP_OFFSETS, 0, body)
        r.i32()  # throttle time
        out.extend(r.compact_array(group_answer) or [])
    return out


def state_summaries(bootstrap, group, topic_id_base64, partitions):
    """ReadShareGroupStateSummary v0 (the share coordinator's inter-broker API) of the group's
    share partitions, asked of every broker: {partition: (state epoch, leader epoch, start
    offset)} from the broker that coordinates each (the others answer NOT_COORDINATOR)."""
    import base64
    topic_id = base64.urlsafe_b64decode(topic_id_base64 + "==")
    body = (wire.compact_string(group)
            + _compact_array([topic_id + _compact_array(
                [wire.i32(p) + wire.i32(-1) + wire.EMPTY_TAGGED_FIELDS for p in partitions])
                + wire.EMPTY_TAGGED_FIELDS])
            + wire.EMPTY_TAGGED_FIELDS)

    def partition(r):
        p = {"partition": r.i32(), "error": r.i16(), "message": _compact_str(r),
             "state_epoch": r.i32(), "leader_epoch": r.i32(), "start_offset": r.i64()}
        r.skip_tagged_fields()
        return p

    def result(r):
        r.raw(16)
        answered = r.compact_array(partition) or []
        r.skip_tagged_fields()
        return answered

    out = {}
    for port in _ports(bootstrap):
        r = _call(port, READ_SHARE_GROUP_STATE_SUMMARY, 0, body)
        for answered in r.compact_array(result) or []:
            for p in answered:
                if p["error"] == 0:
                    out[p["partition"]] = (p["state_epoch"], p["leader_epoch"], p["start_offset"])
                else:
                    assert p["error"] == NOT_COORDINATOR, p
    return out


def test_deleting_a_share_group_deletes_its_state_on_every_partition_after_its_coordinator_moved(
        cluster, topic_name):
    """A share group reads and accepts all 30 records of a 3-partition topic (RF 3, 3 nodes),
    and its member closes. DescribeShareGroupOffsets without topics answers its 3 share
    partitions at the log end from the group coordinator, and NOT_COORDINATOR from the other
    brokers. Each share partition's coordinator answers ReadShareGroupStateSummary with its
    start offset at the log end. `strata group describe` of the Empty group still shows its three
    share partitions with their start offsets at the log end (the coordinator's state index,
    not the members' subscriptions). The group coordinator's node is killed (SIGKILL): the
    node that takes over `__consumer_offsets` shows the same rows, the index having been
    replayed from the log. DeleteGroups then deletes the group and its state on every
    partition: the group is no longer listed, and a new member of a group of the same name
    gets all 30 records again, each at delivery count 1. `strata group delete-offsets` on the
    topic (3 nodes) deletes the state again and takes the topic out of the index: describe
    shows no share partition, and the next member again gets all 30."""
    import json
    bootstrap = cluster.bootstrap
    group = "sgd-" + topic_name
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    create_topic(bootstrap, topic_name, 3, 3)
    keys = ["d-%02d" % i for i in range(30)]
    delivered = produce(bootstrap, topic_name, keys, partitions=3)
    ends = {partition: max(offsets) + 1 for (_, partition), offsets in delivered.items()}
    assert sorted(ends) == [0, 1, 2], delivered

    def strata(*args, check=True):
        out = strata_group(bootstrap, *args)
        assert out.returncode == 0 or not check, out
        return out

    def read_all(name):
        reader = Reader(bootstrap, topic_name, group, name)
        try:
            poll_until([reader], lambda: reader.keys() >= set(keys), 60, "30 records for " + name)
            reader.commit()
            poll_for([reader], SETTLE)  # nothing more comes
            return reader.deliveries
        finally:
            reader.close()

    def share_partitions():
        """{partition: start offset} that `strata group describe` shows, once Empty."""
        out = strata("describe", group, "--format", "json", check=False)
        if out.returncode != 0:
            return None
        described = json.loads(out.stdout)
        if described["members"]:
            return None
        return {row["partition"]: row["start_offset"] for row in described["offsets"]
                if row["topic"] == topic_name}

    first = read_all("first")
    assert sorted(d.key for d in first) == keys, first
    wait_for(lambda: share_partitions() == ends, T, "the Empty group's 3 share partitions at %r" % ends)
    # Without topics, only the group's coordinator answers (its state index); the other two
    # brokers answer NOT_COORDINATOR rather than an empty list.
    answers = sorted(described_offsets_everywhere(bootstrap, group), key=lambda a: a[0])
    assert [error for error, _ in answers] == [0, NOT_COORDINATOR, NOT_COORDINATOR], answers
    assert answers[0][1] == {(topic_name, p): end for p, end in ends.items()}, answers
    summaries = state_summaries(bootstrap, group, topic_id_of(bootstrap, topic_name), [0, 1, 2])
    assert {p: start for p, (_, _, start) in summaries.items()} == ends, summaries
    assert all(state >= 0 and leader >= 0 for state, leader, _ in summaries.values()), summaries

    coordinator = leader_of(cluster, OFFSETS_TOPIC, group_partition(group))
    assert coordinator > 0
    cluster.kill(coordinator)
    wait_for(lambda: leader_of(cluster, OFFSETS_TOPIC, group_partition(group)) not in (-1, coordinator),
             60, "another coordinator of the group")
    wait_for(lambda: share_partitions() == ends, 60,
             "the same share partitions from the coordinator after node %d's kill" % coordinator)
    cluster.nodes[coordinator].restart_after_kill()

    wait_for(lambda: strata("delete", group, check=False).returncode == 0, 60, "DeleteGroups")
    assert group not in list_groups(bootstrap, ["share"])
    again = read_all("after-delete-group")
    assert sorted(d.key for d in again) == keys, again
    assert all(d.count == 1 for d in again), again

    wait_for(lambda: share_partitions() == ends, T, "the new group's share partitions")
    strata("delete-offsets", group, "--topic", topic_name)
    assert share_partitions() == {}, "the topic is still in the group's index"
    over = read_all("after-delete-offsets")
    assert sorted(d.key for d in over) == keys, over


# --- idle share partitions leave memory -------------------------------------------------------
def share_partitions_held(broker):
    """strata_share_partitions summed over the broker's shards (/metrics)."""
    from test_acceptance import metrics
    return sum(value for name, value in metrics(broker).items()
               if name.split("{", 1)[0] == "strata_share_partitions")


def test_an_idle_share_partition_leaves_memory_and_its_state_comes_back_from_the_coordinator(
        tmp_path, topic_name):
    """With `group.share.partition.idle.ms` at 2 s: while a member reads and accepts the 10
    records of a 1-partition topic, its leader holds one share partition
    (`strata_share_partitions` 1). Once the member closed and 2 s passed, it holds none. Then 5
    more records are produced and a new member gets exactly those 5 (offsets 10-14, delivery
    count 1): the share partition was loaded again from its share coordinator, not made anew
    from `share.auto.offset.reset` (earliest, which would deliver all 15)."""
    from conftest import _stop
    from test_acceptance import TunedBroker
    broker = TunedBroker(strata_bin(), tmp_path / "broker",
                         ["--set", "group.share.partition.idle.ms=2000"])
    broker.start()
    try:
        bootstrap = broker.bootstrap
        group = "sgi-" + topic_name
        set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
        create_topic(bootstrap, topic_name, 1)
        produce(bootstrap, topic_name, ["a-%d" % i for i in range(10)])
        first = Reader(bootstrap, topic_name, group, "first")
        try:
            poll_until([first], lambda: len(first.keys()) == 10, 40, "the first 10 records")
            first.commit()
            poll_until([first], lambda: share_partitions_held(broker) == 1, T,
                       "one share partition held while the member reads")
        finally:
            first.close()
        wait_for(lambda: share_partitions_held(broker) == 0, T,
                 "the idle share partition dropped from memory")
        produce(bootstrap, topic_name, ["b-%d" % i for i in range(5)])
        second = Reader(bootstrap, topic_name, group, "second")
        try:
            poll_until([second], lambda: len(second.keys()) >= 5, 40, "the 5 new records")
            second.commit()
            poll_for([second], SETTLE)  # nothing older comes
            assert sorted(d.offset for d in second.deliveries) == list(range(10, 15)), \
                second.deliveries
            assert all(d.count == 1 for d in second.deliveries), second.deliveries
            assert share_partitions_held(broker) == 1
        finally:
            second.close()
    finally:
        _stop(broker)
