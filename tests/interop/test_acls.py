"""Kafka ACLs (issue #18, acceptance point 3): CreateAcls, DescribeAcls and DeleteAcls, and the
authorizer that enforces them.

One broker serves a PLAINTEXT listener (its clients are User:ANONYMOUS) and a SASL_PLAINTEXT
one with PLAIN users from `sasl.jaas.config`. `authorizer.class.name` turns the authorizer on,
`super.users=User:admin`, and `allow.everyone.if.no.acl.found` keeps its default (false): with
no matching ACL a request is refused. The module's broker starts with topics `a-orders` and
`b-other` and, created by admin, alice's ACLs: ALLOW READ and WRITE on TOPIC PREFIXED `a-`, and
ALLOW READ on GROUP LITERAL `a-group`. bob has no ACL at all.
  * alice produces 1,000 messages to `a-orders` with confluent-kafka and consumes them all as a
    member of `a-group`, committing them; her metadata lists `a-` topics only.
  * bob's confluent-kafka producer gets TOPIC_AUTHORIZATION_FAILED (29) for every message; his
    consumer in `a-group` gets GROUP_AUTHORIZATION_FAILED (30); his metadata lists no topic;
    his admin client's DeleteTopics gets 29 and CreateAcls/DescribeAcls/DeleteAcls get
    CLUSTER_AUTHORIZATION_FAILED (31).
  * The same on raw frames (wire.py, after SaslHandshake v1 + SaslAuthenticate v1 PLAIN):
    Produce v3 29, Fetch v4 29, Metadata v1 for all topics none, Metadata v1 naming a topic 29
    (one that does not exist too, and it is not auto-created), FindCoordinator v1 and JoinGroup
    v1 30, OffsetCommit v2 30, DeleteTopics v1 29 (the topic stays), CreateTopics v2 29 (not
    created), CreateAcls/DescribeAcls/DeleteAcls v1 31. alice's OffsetCommit to her group for a
    topic she may not read is 29.
  * The PLAINTEXT listener is User:ANONYMOUS: nothing without an ACL, and an ACL for
    User:ANONYMOUS applies there.
  * DENY beats ALLOW: a DENY WRITE on `a-locked` beats both her prefixed and a literal ALLOW
    WRITE: 29, while her produce to `a-orders` in the same producer succeeds, and her READ and
    DESCRIBE of `a-locked` stay allowed. Deleting the DENY lifts it.
  * The super user does anything with no ACL naming it: creates, produces, consumes in a group,
    commits and deletes a topic.
  * DescribeAcls answers exactly the bindings its filter matches (ANY, MATCH, LITERAL,
    PREFIXED filters); CreateAcls, DescribeAcls and DeleteAcls give the same bindings in v1 and
    in the flexible v3.
  * ALTER on the cluster lets a user create and delete ACLs (and describe them, ALTER implying
    DESCRIBE); DESCRIBE on the cluster lets one describe them only (31 otherwise). CREATE on a
    topic prefix lets a user create topics under it, and only there (29).
  * Bindings Kafka refuses (pattern MATCH or ANY, operation or permission ANY, resource type
    ANY, an empty name, a cluster not named kafka-cluster, a principal with no type) get
    INVALID_REQUEST (42) each and are not stored; a valid one in the same request is.
  * Transactional ids: InitProducerId for an id the principal may not WRITE gets
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), and confluent-kafka's init_transactions fails
    with it; a prefixed ALLOW WRITE lets a transactional producer commit.
  * kafka-python's KafkaAdminClient creates and describes ACLs, its producer and consumer work
    with them and its producer is refused without them.
  * ACLs survive a kill -9 and restart, and so does their deletion: DeleteAcls answers the
    deleted bindings and alice is refused afterwards, and still after another restart.

ACL changes reach every connection shortly after CreateAcls/DeleteAcls answer (Kafka applies
them asynchronously too). Where a test depends on a change, it waits, bounded, until the change
holds on several fresh connections in a row before using clients.
"""

import time

import confluent_kafka as ck
import kafka.errors
import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         ResourcePattern, ResourcePatternFilter)
from kafka.admin import ResourceType as KpResourceType

import wire
from clients import wait_until
from conftest import Broker, free_port, strata_bin

T = 30  # seconds: every client call and wait here is bounded by it
N = 1000  # messages alice produces and consumes in the acceptance scenario
pytestmark = pytest.mark.single_node  # raw frames, SASL listeners and restarts of one process
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret",
             "carol": "carol-secret", "dave": "dave-secret", "erin": "erin-secret",
             "frank": "frank-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" '
        + " ".join('user_%s="%s"' % kv for kv in PASSWORDS.items()) + ";")
CLUSTER_NAME = "kafka-cluster"

# API keys
PRODUCE, FETCH, METADATA, OFFSET_COMMIT = 0, 1, 3, 8
FIND_COORDINATOR, JOIN_GROUP, SASL_HANDSHAKE = 10, 11, 17
CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID = 19, 20, 22
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, SASL_AUTHENTICATE = 29, 30, 31, 36
# Error codes
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST = 31, 42
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
# Answers a coordinator gives while it loads: asked again.
COORDINATOR_RETRIABLE = {14, 15, 16, 51}
# Kafka's codes on the wire (confluent-kafka's enums carry the same values; its BROKER is
# Kafka's CLUSTER resource type).
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4  # pattern types (ANY is also the other enums' 1)
ALL_OPERATIONS, READ, WRITE, ALTER = 2, 3, 4, 7
DENY, ALLOW = 2, 3


class AclBroker(Broker):
    """A broker with the authorizer on: PLAINTEXT on `port` (User:ANONYMOUS) and
    SASL_PLAINTEXT with PLAIN on `sasl_port`."""

    def __init__(self, binary, workdir):
        super().__init__(binary, workdir)
        self.sasl_port = free_port()
        while self.sasl_port in (self.port, self.admin_port):
            self.sasl_port = free_port()

    @property
    def sasl_bootstrap(self):
        return "127.0.0.1:%d" % self.sasl_port

    def command(self):
        return [
            str(self.binary), "serve",
            "--data-dir", str(self.data_dir),
            "--admin-listen", "127.0.0.1:%d" % self.admin_port,
            "--cores", "2", "--node-id", "0",
            "--set", "listeners=PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d"
            % (self.port, self.sasl_port),
            "--set", "sasl.jaas.config=" + JAAS,
            "--set", "authorizer.class.name=strata",
            "--set", "super.users=User:admin",
        ]


# --- confluent-kafka ----------------------------------------------------------------------
def ck_conf(broker, user):
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user],
            "socket.timeout.ms": 10000}


def binding(restype, name, pattern, user, operation, permission=AclPermissionType.ALLOW):
    return AclBinding(restype, name, pattern, "User:" + user, "*", operation, permission)


def principal_filter(principal):
    """Every binding of one principal."""
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                            AclOperation.ANY, AclPermissionType.ANY)


ALICE_ACLS = sorted([
    binding(ResourceType.TOPIC, "a-", ResourcePatternType.PREFIXED, "alice", AclOperation.READ),
    binding(ResourceType.TOPIC, "a-", ResourcePatternType.PREFIXED, "alice", AclOperation.WRITE),
    binding(ResourceType.GROUP, "a-group", ResourcePatternType.LITERAL, "alice",
            AclOperation.READ),
], key=str)
ALICE = principal_filter("User:alice")


def codes_of(futures):
    """{key: 0, or the error code its future raised} of a dict of admin futures."""
    codes = {}
    for key, future in futures.items():
        try:
            future.result(timeout=T)
            codes[key] = 0
        except ck.KafkaException as e:
            codes[key] = e.args[0].code()
    return codes


def create_acls(broker, user, bindings):
    """CreateAcls through confluent-kafka as `user` -> [error code per binding, 0 if created]."""
    client = AdminClient(ck_conf(broker, user))  # kept alive until the futures resolve
    codes = codes_of(client.create_acls(bindings, request_timeout=T))
    return [codes[b] for b in bindings]


def describe_acls(broker, user, acl_filter):
    """DescribeAcls through confluent-kafka -> the matching bindings sorted, or the error code."""
    client = AdminClient(ck_conf(broker, user))
    try:
        return sorted(client.describe_acls(acl_filter, request_timeout=T).result(timeout=T),
                      key=str)
    except ck.KafkaException as e:
        return e.args[0].code()


def delete_acls(broker, user, filters):
    """DeleteAcls through confluent-kafka -> per filter the deleted bindings sorted, or the
    error code."""
    client = AdminClient(ck_conf(broker, user))
    out = []
    futures = client.delete_acls(filters, request_timeout=T)
    for f in filters:
        try:
            out.append(sorted(futures[f].result(timeout=T), key=str))
        except ck.KafkaException as e:
            out.append(e.args[0].code())
    return out


def create_topics(broker, user, names, partitions=1):
    client = AdminClient(ck_conf(broker, user))
    codes = codes_of(client.create_topics([NewTopic(n, partitions, 1) for n in names],
                                          request_timeout=T))
    return [codes[n] for n in names]


def delete_topics(broker, user, names):
    client = AdminClient(ck_conf(broker, user))
    codes = codes_of(client.delete_topics(names, request_timeout=T))
    return [codes[n] for n in names]


def listed_topics(broker, user):
    """The topic names a Metadata request for all topics shows `user` (confluent-kafka)."""
    metadata = AdminClient(ck_conf(broker, user)).list_topics(timeout=T)
    assert metadata.brokers, "no broker in the metadata"
    return set(metadata.topics)


def produce_codes(conf, messages):
    """Produces each (topic, value) with one confluent-kafka producer -> the error code of each
    delivery, 0 when delivered. A produce() the client refuses at once (the topic already in
    error) counts with the code it raised. Every message is settled within T."""
    codes = [None] * len(messages)
    p = ck.Producer(dict(conf, **{"acks": "all", "enable.idempotence": False, "linger.ms": 5,
                                  "message.timeout.ms": 20000}))
    for i, (topic, value) in enumerate(messages):
        def report(err, _msg, i=i):
            codes[i] = 0 if err is None else err.code()
        try:
            p.produce(topic, value=value, on_delivery=report)
        except ck.KafkaException as e:
            codes[i] = e.args[0].code()
        p.poll(0)
    assert p.flush(T) == 0, "messages still undelivered after %ds" % T
    return codes


def group_consumer(conf, group):
    return ck.Consumer(dict(conf, **{"group.id": group, "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False, "session.timeout.ms": 10000,
                                     "fetch.wait.max.ms": 100}))


def consume_in_group(conf, topic, group, count):
    """Subscribes as a member of `group`, reads `count` messages from the group's position and
    commits them synchronously -> (values, [(topic, partition, offset, error)] committed)."""
    c = group_consumer(conf, group)
    try:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + T
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=min(500, count - len(got)), timeout=1):
                assert m.error() is None, m.error()
                got.append(m.value())
        committed = c.commit(asynchronous=False) if got else []
        return got, [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed]
    finally:
        c.close()


def committed_offset(conf, topic, group):
    c = group_consumer(conf, group)
    try:
        (tp,) = c.committed([ck.TopicPartition(topic, 0)], timeout=T)
        assert tp.error is None, tp.error
        return tp.offset
    finally:
        c.close()


def watermarks(conf, topic, group="a-group"):
    """(low, high) of partition 0. The consumer joins no group; `group` is only its group.id."""
    c = group_consumer(conf, group)
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=T, cached=False)
    finally:
        c.close()


def read_partition(conf, topic, count, isolation="read_uncommitted"):
    """The values of the first `count` records of partition 0, read with assign (no group)."""
    c = group_consumer(dict(conf, **{"isolation.level": isolation}), "a-group")
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + T
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=min(500, count - len(got)), timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        return got
    finally:
        c.close()


# --- raw frames ---------------------------------------------------------------------------
TAGS = wire.EMPTY_TAGGED_FIELDS


class Session:
    """One raw connection: logged in as `user` with SASL PLAIN on the SASL_PLAINTEXT listener,
    or, with no user, User:ANONYMOUS on the PLAINTEXT listener."""

    def __init__(self, broker, user=None):
        self.sock = wire.connect(broker.port if user is None else broker.sasl_port, T)
        self.correlation_id = 0
        try:
            if user is not None:
                r = self.call(SASL_HANDSHAKE, 1, wire.string("PLAIN"))
                assert r.i16() == 0, "SaslHandshake refused PLAIN"
                token = ("\0%s\0%s" % (user, PASSWORDS[user])).encode()
                r = self.call(SASL_AUTHENTICATE, 1, wire.bytes_(token))
                assert r.i16() == 0, "%s could not log in: %r" % (user, r.string())
        except BaseException:
            self.sock.close()
            raise

    def call(self, api_key, version, body, flexible=False):
        """Sends one request -> a Reader at its response's body. flexible: request header v2
        and response header v1 (tagged fields), as flexible versions have."""
        self.correlation_id += 1
        header = wire.request_header_v2 if flexible else wire.request_header_v1
        self.sock.sendall(wire.frame(header(api_key, version, self.correlation_id) + body))
        correlation_id, answer = wire.read_response(self.sock, T)
        assert correlation_id == self.correlation_id, (correlation_id, self.correlation_id)
        r = wire.Reader(answer)
        if flexible:
            r.skip_tagged_fields()
        return r

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def produce(s, topic, value=b"raw"):
    """Produce v3, acks=all, one record to partition 0 -> its error code."""
    batch = wire.record_batch([(None, value)])
    body = (wire.string(None) + wire.i16(-1) + wire.i32(10000)
            + wire.array([wire.string(topic) + wire.array([wire.i32(0) + wire.bytes_(batch)])]))
    r = s.call(PRODUCE, 3, body)
    return wire.parse_produce_v3_response(r.raw(r.remaining()))[(topic, 0)][0]


def fetch(s, topic, offset=0):
    """Fetch v4 of partition 0 -> its error code."""
    partition = wire.i32(0) + wire.i64(offset) + wire.i32(1 << 20)
    body = (wire.i32(-1) + wire.i32(100) + wire.i32(1) + wire.i32(16 << 20) + wire.i8(0)
            + wire.array([wire.string(topic) + wire.array([partition])]))
    r = s.call(FETCH, 4, body)
    return wire.parse_fetch_v4_response(r.raw(r.remaining()))[(topic, 0)]["error"]


def metadata(s, topics=None):
    """Metadata v1 (topics None: all topics) -> {topic: error code}."""
    body = wire.array(None if topics is None else [wire.string(t) for t in topics])
    r = s.call(METADATA, 1, body)
    answer = wire.parse_metadata_v1_response(r.raw(r.remaining()))
    assert answer["brokers"], "no broker in the metadata"
    return {t["name"]: t["error"] for t in answer["topics"]}


def find_coordinator(s, key, key_type=0):
    """FindCoordinator v1 (key type 0: a group, 1: a transactional id) -> its error code."""
    r = s.call(FIND_COORDINATOR, 1, wire.string(key) + wire.i8(key_type))
    r.i32()  # throttle time
    return r.i16()


def join_group(s, group):
    """JoinGroup v1 as a new member -> its error code."""
    body = (wire.string(group) + wire.i32(10000) + wire.i32(10000) + wire.string("")
            + wire.string("consumer") + wire.array([wire.string("range") + wire.bytes_(b"")]))
    return s.call(JOIN_GROUP, 1, body).i16()


def offset_commit(s, group, topic, offset=0):
    """OffsetCommit v2 with no generation (a standalone commit) -> {(topic, partition): code}."""
    partition = wire.i32(0) + wire.i64(offset) + wire.string(None)
    body = (wire.string(group) + wire.i32(-1) + wire.string("") + wire.i64(-1)
            + wire.array([wire.string(topic) + wire.array([partition])]))
    r = s.call(OFFSET_COMMIT, 2, body)
    return {(t, p): code for t, parts in r.array(lambda r: (r.string(), r.array(
        lambda r: (r.i32(), r.i16())))) for p, code in parts}


def delete_topics_raw(s, names):
    """DeleteTopics v1 -> {topic: error code}."""
    r = s.call(DELETE_TOPICS, 1, wire.array([wire.string(n) for n in names]) + wire.i32(10000))
    r.i32()  # throttle time
    return dict(r.array(lambda r: (r.string(), r.i16())))


def create_topics_raw(s, names):
    """CreateTopics v2, one partition and one replica each -> {topic: error code}."""
    topics = [wire.string(n) + wire.i32(1) + wire.i16(1) + wire.array([]) + wire.array([])
              for n in names]
    r = s.call(CREATE_TOPICS, 2, wire.array(topics) + wire.i32(10000) + wire.i8(0))
    r.i32()  # throttle time
    return {name: code for name, code, _ in r.array(lambda r: (r.string(), r.i16(), r.string()))}


def init_producer_id(s, transactional_id):
    """InitProducerId v1 -> its error code, asked again while the coordinator loads."""
    body = wire.string(transactional_id) + wire.i32(60000)
    seen = {}

    def attempt():
        r = s.call(INIT_PRODUCER_ID, 1, body)
        r.i32()  # throttle time
        seen["code"] = r.i16()
        return seen["code"] not in COORDINATOR_RETRIABLE

    wait_until(attempt, timeout=T, interval=0.3, message="InitProducerId %s" % transactional_id)
    return seen["code"]


class AclCodec:
    """The ACL APIs' encodings: v1 (classic) or v2+ (flexible: compact strings and arrays,
    tagged fields)."""

    def __init__(self, version):
        self.version = version
        self.flexible = version >= 2

    def string(self, s):
        return wire.compact_string(s) if self.flexible else wire.string(s)

    def array(self, items):
        if self.flexible:
            return wire.uvarint(len(items) + 1) + b"".join(items)
        return wire.array(items)

    def tags(self):
        return TAGS if self.flexible else b""

    def read_string(self, r):
        if not self.flexible:
            return r.string()
        n = r.uvarint()
        return None if n == 0 else r.raw(n - 1).decode()

    def read_array(self, r, item):
        return (r.compact_array(item) if self.flexible else r.array(item)) or []

    def skip_tags(self, r):
        if self.flexible:
            r.skip_tagged_fields()

    def entry(self, resource_type, name, pattern, principal, host, operation, permission):
        """A creation or a filter: the seven fields in the order both have."""
        return (wire.i8(resource_type) + self.string(name) + wire.i8(pattern)
                + self.string(principal) + self.string(host) + wire.i8(operation)
                + wire.i8(permission) + self.tags())


def create_acls_raw(s, bindings, version=1):
    """CreateAcls -> [error code per binding]. bindings: 7-tuples (resource type, name,
    pattern type, principal, host, operation, permission)."""
    c = AclCodec(version)
    body = c.array([c.entry(*b) for b in bindings]) + c.tags()
    r = s.call(CREATE_ACLS, version, body, flexible=c.flexible)
    r.i32()  # throttle time

    def result(r):
        code, _message = r.i16(), c.read_string(r)
        c.skip_tags(r)
        return code

    return c.read_array(r, result)


def describe_acls_raw(s, acl_filter, version=1):
    """DescribeAcls -> (error code, sorted 7-tuples of the bindings). acl_filter: a 7-tuple,
    None for the names to match any."""
    c = AclCodec(version)
    r = s.call(DESCRIBE_ACLS, version, c.entry(*acl_filter), flexible=c.flexible)
    r.i32()  # throttle time
    code, _message = r.i16(), c.read_string(r)

    def acl(r):
        entry = (c.read_string(r), c.read_string(r), r.i8(), r.i8())
        c.skip_tags(r)
        return entry

    def resource(r):
        resource_type, name, pattern = r.i8(), c.read_string(r), r.i8()
        acls = c.read_array(r, acl)
        c.skip_tags(r)
        return [(resource_type, name, pattern) + a for a in acls]

    resources = c.read_array(r, resource)
    return code, sorted(b for bindings in resources for b in bindings)


def delete_acls_raw(s, filters, version=1):
    """DeleteAcls -> per filter (error code, sorted 7-tuples of the deleted bindings)."""
    c = AclCodec(version)
    body = c.array([c.entry(*f) for f in filters]) + c.tags()
    r = s.call(DELETE_ACLS, version, body, flexible=c.flexible)
    r.i32()  # throttle time

    def matching(r):
        code, _message = r.i16(), c.read_string(r)
        acl = (r.i8(), c.read_string(r), r.i8(), c.read_string(r), c.read_string(r), r.i8(),
               r.i8())
        c.skip_tags(r)
        assert code == 0, "deleting %r: error %d" % (acl, code)
        return acl

    def result(r):
        code, _message = r.i16(), c.read_string(r)
        acls = c.read_array(r, matching)
        c.skip_tags(r)
        return code, sorted(acls)

    return c.read_array(r, result)


def as_tuple(b):
    """A confluent-kafka AclBinding as the raw helpers' 7-tuple."""
    return (b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host,
            b.operation.value, b.permission_type.value)


def settle(broker, user, check, expected, what, times=4):
    """Waits (bounded by T) until check(session) == expected on `times` fresh connections in a
    row: an ACL change has reached every shard the connections land on."""
    streak = {"n": 0, "last": None}

    def once():
        with Session(broker, user) as s:
            streak["last"] = check(s)
        streak["n"] = streak["n"] + 1 if streak["last"] == expected else 0
        return streak["n"] >= times

    try:
        wait_until(once, timeout=T, interval=0.05, message=what)
    except AssertionError:
        raise AssertionError("%s: last answer %r, expected %r" % (what, streak["last"], expected))


# --- kafka-python -------------------------------------------------------------------------
def kp_conf(broker, user):
    return dict(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="PLAIN", sasl_plain_username=user,
                sasl_plain_password=PASSWORDS[user], request_timeout_ms=T * 1000,
                api_version_auto_timeout_ms=10000)


# --- the module's broker ------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = AclBroker(strata_bin(), tmp_path_factory.mktemp("acls") / "broker").start()
    try:
        assert create_topics(b, "admin", ["a-orders", "b-other"]) == [0, 0]
        assert create_acls(b, "admin", ALICE_ACLS) == [0, 0, 0]
        settle(b, "alice", lambda s: metadata(s, ["a-orders"]), {"a-orders": 0},
               "alice's ACLs in force")
    except BaseException:
        b.kill()
        raise
    yield b
    b.kill()


# --- tests --------------------------------------------------------------------------------
def test_alice_produces_and_consumes_in_her_group_on_her_prefix(broker):
    """alice, allowed READ and WRITE on TOPIC PREFIXED `a-` and READ on GROUP `a-group`,
    produces N messages and consumes all of them as a member of a-group, committing them. Her
    metadata lists `a-orders` and no topic outside her prefix."""
    conf = ck_conf(broker, "alice")
    low, _ = watermarks(conf, "a-orders")
    start = committed_offset(conf, "a-orders", "a-group")
    start = low if start < 0 else start  # other tests may have produced before this one
    values = [b"alice-%d" % i for i in range(N)]
    assert produce_codes(conf, [("a-orders", v) for v in values]) == [0] * N
    _, high = watermarks(conf, "a-orders")
    got, committed = consume_in_group(conf, "a-orders", "a-group", high - start)
    assert len(got) == high - start and got[-N:] == values, (len(got), high - start)
    assert committed == [("a-orders", 0, high, None)]
    assert committed_offset(conf, "a-orders", "a-group") == high

    topics = listed_topics(broker, "alice")
    assert "a-orders" in topics and "b-other" not in topics, topics
    assert all(t.startswith("a-") for t in topics), topics


def test_bob_with_no_acl_is_refused_by_the_clients(broker):
    """bob's confluent-kafka producer gets 29 for every message; his consumer in a-group gets
    30; his metadata lists no topic; his admin client gets 29 deleting a topic and 31 for every
    ACL API. Nothing he tried changed anything."""
    conf = ck_conf(broker, "bob")
    assert produce_codes(conf, [("a-orders", b"bob-%d" % i) for i in range(5)]) == \
        [TOPIC_AUTHORIZATION_FAILED] * 5

    c = group_consumer(conf, "a-group")
    codes, got = set(), []
    try:
        c.subscribe(["a-orders"])
        deadline = time.monotonic() + T
        while GROUP_AUTHORIZATION_FAILED not in codes and time.monotonic() < deadline:
            for m in c.consume(num_messages=10, timeout=0.5):
                if m.error() is None:
                    got.append(m.value())
                else:
                    codes.add(m.error().code())
    finally:
        c.close()
    assert GROUP_AUTHORIZATION_FAILED in codes and not got, (codes, got[:3])

    assert listed_topics(broker, "bob") == set()
    assert delete_topics(broker, "bob", ["a-orders"]) == [TOPIC_AUTHORIZATION_FAILED]
    assert create_topics(broker, "bob", ["b-by-bob"]) == [TOPIC_AUTHORIZATION_FAILED]
    bob_read = binding(ResourceType.TOPIC, "b-", ResourcePatternType.PREFIXED, "bob",
                       AclOperation.READ)
    assert create_acls(broker, "bob", [bob_read]) == [CLUSTER_AUTHORIZATION_FAILED]
    # librdkafka reads DescribeAcls' top-level error code but never reports it
    # (rd_kafka_DescribeAclsResponse_parse, 2.12): bob sees no binding. The raw test checks
    # the 31 itself.
    assert describe_acls(broker, "bob", ALICE) == []
    assert delete_acls(broker, "bob", [ALICE]) == [CLUSTER_AUTHORIZATION_FAILED]

    topics = listed_topics(broker, "admin")
    assert "a-orders" in topics and "b-by-bob" not in topics, topics
    assert describe_acls(broker, "admin", ALICE) == ALICE_ACLS
    assert describe_acls(broker, "admin", principal_filter("User:bob")) == []


def test_bob_gets_kafkas_error_codes_on_raw_requests(broker):
    """Each API bob uses, on a connection authenticated as him, answers the exact code."""
    with Session(broker, "bob") as s:
        assert produce(s, "a-orders") == TOPIC_AUTHORIZATION_FAILED
        assert fetch(s, "a-orders") == TOPIC_AUTHORIZATION_FAILED
        assert metadata(s) == {}
        # A topic he may not describe, existing or not, answers the same: its existence is
        # not disclosed, and it is not auto-created.
        assert metadata(s, ["a-orders", "a-nothing"]) == {
            "a-orders": TOPIC_AUTHORIZATION_FAILED, "a-nothing": TOPIC_AUTHORIZATION_FAILED}
        assert find_coordinator(s, "a-group") == GROUP_AUTHORIZATION_FAILED
        assert join_group(s, "a-group") == GROUP_AUTHORIZATION_FAILED
        assert offset_commit(s, "a-group", "a-orders") == {
            ("a-orders", 0): GROUP_AUTHORIZATION_FAILED}
        assert delete_topics_raw(s, ["a-orders"]) == {"a-orders": TOPIC_AUTHORIZATION_FAILED}
        assert create_topics_raw(s, ["b-raw-by-bob"]) == {
            "b-raw-by-bob": TOPIC_AUTHORIZATION_FAILED}
        bob_all = (TOPIC, "b-other", LITERAL, "User:bob", "*", ALL_OPERATIONS, ALLOW)
        assert create_acls_raw(s, [bob_all]) == [CLUSTER_AUTHORIZATION_FAILED]
        any_filter = (ANY, None, ANY, None, None, ANY, ANY)
        assert describe_acls_raw(s, any_filter) == (CLUSTER_AUTHORIZATION_FAILED, [])
        assert delete_acls_raw(s, [any_filter]) == [(CLUSTER_AUTHORIZATION_FAILED, [])]
    with Session(broker, "alice") as s:
        # alice may use her group, but not for a topic she may not read.
        assert offset_commit(s, "a-group", "b-other") == {
            ("b-other", 0): TOPIC_AUTHORIZATION_FAILED}
    topics = listed_topics(broker, "admin")
    assert "a-orders" in topics, "bob's DeleteTopics deleted it"
    assert not topics & {"a-nothing", "b-raw-by-bob"}, topics
    assert describe_acls(broker, "admin", principal_filter("User:bob")) == []
    assert describe_acls(broker, "admin", ALICE) == ALICE_ACLS


def test_the_plaintext_listener_is_user_anonymous(broker):
    """With no ACL for User:ANONYMOUS, a PLAINTEXT client sees and writes nothing. An ALLOW
    DESCRIBE on `b-other` for User:ANONYMOUS shows it that topic, and only it, and does not let
    it write there."""
    with Session(broker) as s:
        assert metadata(s) == {}
        assert produce(s, "b-other") == TOPIC_AUTHORIZATION_FAILED
        everything = (TOPIC, "b-", PREFIXED, "User:ANONYMOUS", "*", ALL_OPERATIONS, ALLOW)
        assert create_acls_raw(s, [everything]) == [CLUSTER_AUTHORIZATION_FAILED]
    anonymous = AclBinding(ResourceType.TOPIC, "b-other", ResourcePatternType.LITERAL,
                           "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    anonymous_filter = principal_filter("User:ANONYMOUS")
    try:
        assert create_acls(broker, "admin", [anonymous]) == [0]
        settle(broker, None, metadata, {"b-other": 0}, "User:ANONYMOUS's DESCRIBE in force")
        plaintext = AdminClient({"bootstrap.servers": broker.bootstrap,
                                 "socket.timeout.ms": 10000})
        assert set(plaintext.list_topics(timeout=T).topics) == {"b-other"}
        with Session(broker) as s:
            assert produce(s, "b-other") == TOPIC_AUTHORIZATION_FAILED
        assert listed_topics(broker, "bob") == set()  # an ACL for ANONYMOUS is not bob's
        assert delete_acls(broker, "admin", [anonymous_filter]) == [[anonymous]]
    finally:
        delete_acls(broker, "admin", [anonymous_filter])  # when the test failed before it
    settle(broker, None, metadata, {}, "User:ANONYMOUS's DESCRIBE deleted")


def test_deny_beats_allow_for_the_denied_operation_only(broker):
    """A DENY WRITE on TOPIC LITERAL `a-locked` for alice beats her prefixed ALLOW WRITE and a
    literal one on the same topic: her produce there gets 29, while in the same producer her
    produce to `a-orders` is delivered. The DENY is of WRITE only: she still describes and reads
    `a-locked`. Once the DENY is deleted, she writes there."""
    assert create_topics(broker, "admin", ["a-locked"]) == [0]
    deny = binding(ResourceType.TOPIC, "a-locked", ResourcePatternType.LITERAL, "alice",
                   AclOperation.WRITE, AclPermissionType.DENY)
    allow = binding(ResourceType.TOPIC, "a-locked", ResourcePatternType.LITERAL, "alice",
                    AclOperation.WRITE, AclPermissionType.ALLOW)
    on_a_locked = AclBindingFilter(ResourceType.TOPIC, "a-locked", ResourcePatternType.LITERAL,
                                   None, None, AclOperation.ANY, AclPermissionType.ANY)
    try:
        assert create_acls(broker, "admin", [deny, allow]) == [0, 0]
        settle(broker, "alice", lambda s: produce(s, "a-locked"), TOPIC_AUTHORIZATION_FAILED,
               "alice's DENY in force")
        conf = ck_conf(broker, "alice")
        messages = [("a-locked", b"locked-%d" % i) for i in range(5)] + \
                   [("a-orders", b"open-%d" % i) for i in range(5)]
        assert produce_codes(conf, messages) == [TOPIC_AUTHORIZATION_FAILED] * 5 + [0] * 5
        with Session(broker, "alice") as s:
            assert metadata(s, ["a-locked"]) == {"a-locked": 0}
            assert fetch(s, "a-locked") == 0
            assert produce(s, "a-orders") == 0
        assert delete_acls(broker, "admin", [on_a_locked]) == [sorted([deny, allow], key=str)]
    finally:
        delete_acls(broker, "admin", [on_a_locked])
    settle(broker, "alice", lambda s: produce(s, "a-locked"), 0, "alice's DENY lifted")
    assert produce_codes(ck_conf(broker, "alice"), [("a-locked", b"unlocked")]) == [0]
    assert describe_acls(broker, "admin", ALICE) == ALICE_ACLS
    # What landed on a-locked: the raw records of the last settle and the one after the DENY
    # was lifted, none of the refused ones.
    admin = ck_conf(broker, "admin")
    _, high = watermarks(admin, "a-locked")
    landed = read_partition(admin, "a-locked", high)
    assert landed[-1] == b"unlocked" and b"raw" in landed, landed
    assert not [v for v in landed if v.startswith(b"locked-")], landed


def test_a_super_user_does_anything_with_no_acl_naming_it(broker):
    """admin, in super.users and named by no ACL, creates a topic, produces to it, consumes it
    in a group and commits, describes ACLs and deletes the topic. Its metadata lists every
    topic."""
    assert describe_acls(broker, "admin", principal_filter("User:admin")) == []
    conf = ck_conf(broker, "admin")
    assert create_topics(broker, "admin", ["s-admin"]) == [0]
    values = [b"admin-%d" % i for i in range(200)]
    assert produce_codes(conf, [("s-admin", v) for v in values]) == [0] * 200
    got, committed = consume_in_group(conf, "s-admin", "s-group", 200)
    assert got == values and committed == [("s-admin", 0, 200, None)]
    assert committed_offset(conf, "s-admin", "s-group") == 200
    with Session(broker, "admin") as s:
        listed = metadata(s)
        assert {"a-orders", "b-other", "s-admin"} <= set(listed), listed
        assert all(code == 0 for code in listed.values()), listed
        assert fetch(s, "s-admin") == 0
    assert delete_topics(broker, "admin", ["s-admin"]) == [0]
    wait_until(lambda: "s-admin" not in listed_topics(broker, "admin"), timeout=T,
               message="s-admin deleted")


def test_describe_acls_answers_exactly_what_its_filter_matches(broker):
    """Filters by principal, by resource type, by exact name (LITERAL), by prefix (PREFIXED),
    by MATCH (every pattern that applies to a name), by operation and by permission, through
    confluent-kafka and on raw DescribeAcls v1 and v3."""
    prefixed = [b for b in ALICE_ACLS if b.resource_pattern_type == ResourcePatternType.PREFIXED]
    group = [b for b in ALICE_ACLS if b.restype == ResourceType.GROUP]
    reads = [b for b in ALICE_ACLS if b.operation == AclOperation.READ]
    cases = [
        (ALICE, ALICE_ACLS),
        (AclBindingFilter(ResourceType.TOPIC, "a-orders", ResourcePatternType.MATCH, None, None,
                          AclOperation.ANY, AclPermissionType.ANY), prefixed),
        (AclBindingFilter(ResourceType.TOPIC, "a-", ResourcePatternType.PREFIXED, None, None,
                          AclOperation.ANY, AclPermissionType.ANY), prefixed),
        (AclBindingFilter(ResourceType.TOPIC, "a-", ResourcePatternType.LITERAL, None, None,
                          AclOperation.ANY, AclPermissionType.ANY), []),
        (AclBindingFilter(ResourceType.TOPIC, "a-orders", ResourcePatternType.LITERAL, None, None,
                          AclOperation.ANY, AclPermissionType.ANY), []),
        (AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, "User:alice", None,
                          AclOperation.ANY, AclPermissionType.ANY), group),
        (AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW), sorted(reads, key=str)),
        (AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                          AclOperation.ANY, AclPermissionType.DENY), []),
        (AclBindingFilter(ResourceType.TOPIC, "b-other", ResourcePatternType.MATCH, None, None,
                          AclOperation.ANY, AclPermissionType.ANY), []),
    ]
    for acl_filter, expected in cases:
        assert describe_acls(broker, "admin", acl_filter) == expected, acl_filter
        with Session(broker, "admin") as s:
            for version in (1, 3):
                assert describe_acls_raw(s, as_tuple(acl_filter), version) == (
                    0, sorted(as_tuple(b) for b in expected)), (version, acl_filter)


def test_acl_apis_v1_and_v3_create_describe_and_delete_the_same_bindings(broker):
    """CreateAcls v3 (flexible), DescribeAcls v1 and v3, DeleteAcls v1 and v3 on raw frames: the
    same bindings in both encodings; a filter that matches nothing deletes nothing."""
    topic = (TOPIC, "g-", PREFIXED, "User:grace", "*", READ, ALLOW)
    txn = (TRANSACTIONAL_ID, "g-txn", LITERAL, "User:grace", "*", WRITE, DENY)
    grace = (ANY, None, ANY, "User:grace", None, ANY, ANY)
    with Session(broker, "admin") as s:
        assert create_acls_raw(s, [topic, txn], version=3) == [0, 0]
        for version in (1, 3):
            wait_until(lambda: describe_acls_raw(s, grace, version) == (0, sorted([topic, txn])),
                       timeout=T, message="grace's ACLs described in v%d" % version)
        nothing = (GROUP, None, ANY, "User:grace", None, ANY, ANY)
        topics_only = (TOPIC, None, ANY, "User:grace", None, ANY, ANY)
        assert delete_acls_raw(s, [topics_only, nothing], version=1) == [(0, [topic]), (0, [])]
        assert describe_acls_raw(s, grace, 3) == (0, [txn])
        assert delete_acls_raw(s, [grace], version=3) == [(0, [txn])]
        assert describe_acls_raw(s, grace, 1) == (0, [])
        assert delete_acls_raw(s, [grace], version=3) == [(0, [])]


def test_bindings_kafka_refuses_are_invalid_request_and_not_stored(broker):
    """Each refused binding, alone in its request, gets INVALID_REQUEST (42). In a request with
    a valid binding and an invalid one, the valid one is created and the other refused."""
    good = (TOPIC, "m-good", LITERAL, "User:mallory", "*", READ, ALLOW)
    bad = {
        "pattern MATCH": (TOPIC, "m-bad", MATCH, "User:mallory", "*", READ, ALLOW),
        "pattern ANY": (TOPIC, "m-bad", ANY, "User:mallory", "*", READ, ALLOW),
        "operation ANY": (TOPIC, "m-bad", LITERAL, "User:mallory", "*", ANY, ALLOW),
        "permission ANY": (TOPIC, "m-bad", LITERAL, "User:mallory", "*", READ, ANY),
        "resource type ANY": (ANY, "m-bad", LITERAL, "User:mallory", "*", READ, ALLOW),
        "empty name": (TOPIC, "", LITERAL, "User:mallory", "*", READ, ALLOW),
        "cluster not named kafka-cluster": (CLUSTER, "m-bad", LITERAL, "User:mallory", "*",
                                            ALTER, ALLOW),
        "principal with no type": (TOPIC, "m-bad", LITERAL, "mallory", "*", READ, ALLOW),
    }
    mallory = (ANY, None, ANY, "User:mallory", None, ANY, ANY)
    with Session(broker, "admin") as s:
        for what, b in bad.items():
            assert create_acls_raw(s, [b]) == [INVALID_REQUEST], what
        assert create_acls_raw(s, [good, bad["operation ANY"]]) == [0, INVALID_REQUEST]
        wait_until(lambda: describe_acls_raw(s, mallory) == (0, [good]), timeout=T,
                   message="mallory's one valid ACL described")
        assert delete_acls_raw(s, [mallory]) == [(0, [good])]
    # A cluster binding named kafka-cluster is valid (confluent-kafka calls CLUSTER "BROKER").
    cluster = binding(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL, "mallory",
                      AclOperation.DESCRIBE)
    assert create_acls(broker, "admin", [cluster]) == [0]
    assert delete_acls(broker, "admin", [principal_filter("User:mallory")]) == [[cluster]]


def test_alter_on_the_cluster_manages_acls_and_create_on_a_prefix_creates_topics(broker):
    """carol, allowed ALTER on the cluster, creates and deletes ACLs and describes them (ALTER
    implies DESCRIBE). dave, allowed DESCRIBE on the cluster, describes them but gets 31
    creating or deleting one. carol, allowed CREATE on TOPIC PREFIXED `c-`, creates `c-made`
    and gets 29 for `b-made`."""
    carol_alter = binding(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL, "carol",
                          AclOperation.ALTER)
    carol_create = binding(ResourceType.TOPIC, "c-", ResourcePatternType.PREFIXED, "carol",
                           AclOperation.CREATE)
    dave_describe = binding(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL,
                            "dave", AclOperation.DESCRIBE)
    dave_read = binding(ResourceType.TOPIC, "c-made", ResourcePatternType.LITERAL, "dave",
                        AclOperation.READ)
    dave = principal_filter("User:dave")
    assert create_acls(broker, "admin", [carol_alter, carol_create, dave_describe]) == [0, 0, 0]
    any_filter = (ANY, None, ANY, "User:dave", None, ANY, ANY)
    settle(broker, "dave", lambda s: describe_acls_raw(s, any_filter)[0], 0,
           "dave's DESCRIBE on the cluster in force")
    settle(broker, "carol", lambda s: describe_acls_raw(s, any_filter)[0], 0,
           "carol's ALTER on the cluster in force")

    assert create_acls(broker, "carol", [dave_read]) == [0]
    wait_until(lambda: describe_acls(broker, "dave", dave) == sorted([dave_describe, dave_read],
                                                                     key=str),
               timeout=T, message="carol's ACL for dave described by dave")
    assert describe_acls(broker, "carol", dave) == sorted([dave_describe, dave_read], key=str)
    assert create_acls(broker, "dave", [dave_read]) == [CLUSTER_AUTHORIZATION_FAILED]
    dave_read_filter = AclBindingFilter(ResourceType.TOPIC, "c-made", ResourcePatternType.LITERAL,
                                        "User:dave", None, AclOperation.ANY,
                                        AclPermissionType.ANY)
    assert delete_acls(broker, "dave", [dave_read_filter]) == [CLUSTER_AUTHORIZATION_FAILED]
    assert delete_acls(broker, "carol", [dave_read_filter]) == [[dave_read]]
    assert describe_acls(broker, "carol", dave) == [dave_describe]

    assert create_topics(broker, "carol", ["c-made", "b-made"]) == [0, TOPIC_AUTHORIZATION_FAILED]
    topics = listed_topics(broker, "admin")
    assert "c-made" in topics and "b-made" not in topics, topics
    # CREATE alone does not let carol write to what she created.
    assert produce_codes(ck_conf(broker, "carol"), [("c-made", b"x")]) == \
        [TOPIC_AUTHORIZATION_FAILED]


def test_a_transactional_id_needs_write_on_it(broker):
    """frank, allowed WRITE on TRANSACTIONAL_ID PREFIXED `f-` and on TOPIC `f-events`, commits
    a transaction as `f-1` with confluent-kafka. InitProducerId for `b-txn` (him) or for
    `f-raw` (bob) gets 53, and confluent-kafka's init_transactions for `b-1` fails with it."""
    assert create_topics(broker, "admin", ["f-events"]) == [0]
    frank = [binding(ResourceType.TRANSACTIONAL_ID, "f-", ResourcePatternType.PREFIXED, "frank",
                     AclOperation.WRITE),
             binding(ResourceType.TOPIC, "f-events", ResourcePatternType.LITERAL, "frank",
                     AclOperation.WRITE)]
    assert create_acls(broker, "admin", frank) == [0, 0]
    settle(broker, "frank", lambda s: metadata(s, ["f-events"]), {"f-events": 0},
           "frank's WRITE (so DESCRIBE) in force")
    with Session(broker, "frank") as s:
        assert init_producer_id(s, "f-raw") == 0
        assert init_producer_id(s, "b-txn") == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    with Session(broker, "bob") as s:
        assert init_producer_id(s, "f-raw") == TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    conf = ck_conf(broker, "frank")
    p = ck.Producer(dict(conf, **{"transactional.id": "f-1"}))
    p.init_transactions(T)
    p.begin_transaction()
    values = [b"txn-%d" % i for i in range(10)]
    for v in values:
        p.produce("f-events", value=v)
    p.commit_transaction(T)

    refused = ck.Producer(dict(conf, **{"transactional.id": "b-1"}))
    with pytest.raises(ck.KafkaException) as raised:
        refused.init_transactions(T)
    assert raised.value.args[0].code() == TRANSACTIONAL_ID_AUTHORIZATION_FAILED, raised.value

    assert read_partition(ck_conf(broker, "admin"), "f-events", len(values),
                          isolation="read_committed") == values


def test_kafka_python_admin_creates_and_describes_acls_that_its_clients_obey(broker):
    """kafka-python's KafkaAdminClient (CreateAcls/DescribeAcls v1) as admin gives erin WRITE and
    READ on TOPIC PREFIXED `e-`; its producer and consumer as erin round-trip on `e-events`,
    and its producer to `b-other` raises TopicAuthorizationFailedError. As bob the admin client
    is refused with ClusterAuthorizationFailedError."""
    assert create_topics(broker, "admin", ["e-events"]) == [0]
    prefix = ResourcePattern(KpResourceType.TOPIC, "e-", ACLResourcePatternType.PREFIXED)
    acls = [ACL("User:erin", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, prefix),
            ACL("User:erin", "*", ACLOperation.READ, ACLPermissionType.ALLOW, prefix)]
    erin = ACLFilter("User:erin", None, ACLOperation.ANY, ACLPermissionType.ANY,
                     ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY))
    admin = KafkaAdminClient(**kp_conf(broker, "admin"))
    try:
        result = admin.create_acls(acls)
        assert result["failed"] == [] and len(result["succeeded"]) == 2, result
        described = {}

        def describe():
            described["acls"], described["error"] = admin.describe_acls(erin)
            return set(described["acls"]) == set(acls)

        wait_until(describe, timeout=T, message="erin's ACLs described by kafka-python")
        assert described["error"] is kafka.errors.NoError and len(described["acls"]) == 2
    finally:
        admin.close()
    settle(broker, "erin", lambda s: metadata(s, ["e-events"]), {"e-events": 0},
           "erin's ACLs in force")

    conf = kp_conf(broker, "erin")
    producer = KafkaProducer(acks="all", max_block_ms=T * 1000, **conf)
    try:
        values = [b"kp-%d" % i for i in range(20)]
        futures = [producer.send("e-events", value=v) for v in values]
        producer.flush(timeout=T)
        for f in futures:
            f.get(timeout=T)
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send("b-other", value=b"no").get(timeout=T)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100,
                             **conf)
    try:
        tp = TopicPartition("e-events", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + T
        while len(got) < len(values) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
    assert got == values

    bob = KafkaAdminClient(**kp_conf(broker, "bob"))
    try:
        result = bob.create_acls([ACL("User:bob", "*", ACLOperation.READ,
                                      ACLPermissionType.ALLOW, prefix)])
        assert result["succeeded"] == [] and len(result["failed"]) == 1, result
        assert result["failed"][0][1] is kafka.errors.ClusterAuthorizationFailedError, result
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            bob.describe_acls(erin)
    finally:
        bob.close()


@pytest.mark.timeout(240)
def test_acls_and_their_deletion_survive_a_restart(tmp_path):
    """On a fresh broker alice is refused until her ACLs exist. They survive a kill -9 and
    restart: described at once, and she produces and consumes in her group. DeleteAcls answers
    exactly the deleted bindings, after which she is refused; after another kill -9 and restart
    they are still gone and she is still refused."""
    b = AclBroker(strata_bin(), tmp_path / "broker").start()
    try:
        conf = ck_conf(b, "alice")
        assert create_topics(b, "admin", ["a-orders"]) == [0]
        assert produce_codes(conf, [("a-orders", b"too-early")]) == [TOPIC_AUTHORIZATION_FAILED]
        with Session(b, "alice") as s:
            assert find_coordinator(s, "a-group") == GROUP_AUTHORIZATION_FAILED
            assert metadata(s) == {}

        assert create_acls(b, "admin", ALICE_ACLS) == [0, 0, 0]
        settle(b, "alice", lambda s: metadata(s, ["a-orders"]), {"a-orders": 0},
               "alice's ACLs in force")
        before = [b"before-%d" % i for i in range(100)]
        assert produce_codes(conf, [("a-orders", v) for v in before]) == [0] * 100

        b.restart()
        assert describe_acls(b, "admin", ALICE) == ALICE_ACLS
        with Session(b, "alice") as s:  # in force as soon as the broker is ready
            assert metadata(s, ["a-orders"]) == {"a-orders": 0}
        after = [b"after-%d" % i for i in range(100)]
        assert produce_codes(conf, [("a-orders", v) for v in after]) == [0] * 100
        got, committed = consume_in_group(conf, "a-orders", "a-group", 200)
        assert got == before + after
        assert committed == [("a-orders", 0, 200, None)]

        assert delete_acls(b, "admin", [ALICE]) == [ALICE_ACLS]
        settle(b, "alice", lambda s: metadata(s, ["a-orders"]),
               {"a-orders": TOPIC_AUTHORIZATION_FAILED}, "alice's ACLs deleted")
        assert produce_codes(conf, [("a-orders", b"too-late")]) == [TOPIC_AUTHORIZATION_FAILED]
        with Session(b, "alice") as s:
            assert find_coordinator(s, "a-group") == GROUP_AUTHORIZATION_FAILED
            assert fetch(s, "a-orders") == TOPIC_AUTHORIZATION_FAILED
        assert describe_acls(b, "admin", ALICE) == []

        b.restart()
        assert describe_acls(b, "admin", principal_filter(None)) == []
        with Session(b, "alice") as s:
            assert metadata(s) == {}
            assert produce(s, "a-orders") == TOPIC_AUTHORIZATION_FAILED
        assert watermarks(ck_conf(b, "admin"), "a-orders") == (0, 200)
    except BaseException:
        print("strata log tail (%s):\n%s" % (b.stderr_path, b.stderr_tail()))  # shown on failure
        raise
    finally:
        b.kill()


class CliAclBroker(AclBroker):
    """The operator's setup for `strata acl`: the PLAINTEXT listener on loopback is a super
    user (User:ANONYMOUS in `super.users`), clients log in on SASL_PLAINTEXT."""

    def command(self):
        command = super().command()
        command[command.index("super.users=User:admin")] = "super.users=User:admin;User:ANONYMOUS"
        return command


def strata_cli(broker, *args):
    import subprocess
    done = subprocess.run([str(strata_bin()), *args, "-b", broker.bootstrap],
                          capture_output=True, text=True, timeout=T)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.timeout(120)
def test_strata_acl_creates_lists_and_deletes_acls_that_the_broker_enforces(tmp_path):
    """`strata acl create` gives alice READ and WRITE on the prefix `a-` and READ on her group;
    `strata acl list` shows exactly those three; alice then produces and consumes. `strata acl
    delete --principal User:alice` removes them (and says which), after which she is refused.
    A bad operation name is refused by the CLI with the list of valid ones."""
    b = CliAclBroker(strata_bin(), tmp_path / "broker").start()
    try:
        conf = ck_conf(b, "alice")
        assert create_topics(b, "admin", ["a-cli"]) == [0]
        assert produce_codes(conf, [("a-cli", b"too-early")]) == [TOPIC_AUTHORIZATION_FAILED]
        code, out, err = strata_cli(b, "acl", "create", "--topic", "a-", "--prefixed",
                                    "--allow-principal", "User:alice", "--operation", "read,write")
        assert code == 0, err
        assert out.count("created: ALLOW User:alice") == 2, out
        code, out, err = strata_cli(b, "acl", "create", "--group", "a-group",
                                    "--allow-principal", "alice", "--operation", "read")
        assert code == 0, err
        code, out, err = strata_cli(b, "acl", "list")
        assert code == 0, err
        rows = sorted(line.split() for line in out.splitlines()[1:])
        assert rows == [
            ["User:alice", "ALLOW", "READ", "GROUP", "a-group", "LITERAL", "*"],
            ["User:alice", "ALLOW", "READ", "TOPIC", "a-", "PREFIXED", "*"],
            ["User:alice", "ALLOW", "WRITE", "TOPIC", "a-", "PREFIXED", "*"],
        ], out
        assert describe_acls(b, "admin", ALICE) == ALICE_ACLS
        settle(b, "alice", lambda s: metadata(s, ["a-cli"]), {"a-cli": 0}, "ACLs from the CLI")
        assert produce_codes(conf, [("a-cli", b"v%d" % i) for i in range(10)]) == [0] * 10
        got, _ = consume_in_group(conf, "a-cli", "a-group", 10)
        assert got == [b"v%d" % i for i in range(10)]

        code, out, err = strata_cli(b, "acl", "create", "--topic", "x", "--allow-principal",
                                    "alice", "--operation", "reed")
        assert code != 0 and "unknown operation" in err and "read" in err, (out, err)

        code, out, err = strata_cli(b, "acl", "delete", "--principal", "User:alice")
        assert code == 0, err
        assert out.count("deleted: ALLOW User:alice") == 3, out
        assert describe_acls(b, "admin", ALICE) == []
        settle(b, "alice", lambda s: metadata(s, ["a-cli"]),
               {"a-cli": TOPIC_AUTHORIZATION_FAILED}, "ACLs deleted by the CLI")
        assert produce_codes(conf, [("a-cli", b"too-late")]) == [TOPIC_AUTHORIZATION_FAILED]
    except BaseException:
        print("strata log tail (%s):\n%s" % (b.stderr_path, b.stderr_tail()))  # shown on failure
        raise
    finally:
        b.kill()


def test_a_kip848_regex_subscription_gets_only_the_topics_its_principal_may_describe(broker):
    """alice, a KIP-848 consumer (group.protocol=consumer), subscribes to the regex `^(a|b)-.*`:
    the broker resolves it to the topics she may describe, so she is assigned a-orders (and
    other topics under her `a-` prefix) and never b-other, which the regex matches too."""
    group = "a-kip848-regex"
    grant = binding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "alice",
                    AclOperation.READ)
    assert create_acls(broker, "admin", [grant]) == [0]
    conf = dict(ck_conf(broker, "alice"), **{"group.id": group, "group.protocol": "consumer",
                                             "auto.offset.reset": "earliest"})
    consumer = ck.Consumer(conf)
    try:
        consumer.subscribe(["^(a|b)-.*"])
        seen = set()

        def assigned():
            consumer.poll(0.2)
            topics = {tp.topic for tp in consumer.assignment()}
            seen.update(topics)
            return topics

        wait_until(assigned, timeout=T, interval=0.05, message="alice's regex assignment")
        deadline = time.monotonic() + 3  # a later heartbeat must not add b-other either
        while time.monotonic() < deadline:
            assigned()
        # Other tests add topics under alice's prefix; none outside it may come.
        assert "a-orders" in seen and all(t.startswith("a-") for t in seen), seen
        # What the broker assigned (her client would drop a topic it cannot describe).
        admin = ck.admin.AdminClient(ck_conf(broker, "admin"))
        described = admin.describe_consumer_groups([group])[group].result(T)
        assigned = {tp.topic for m in described.members for tp in m.assignment.topic_partitions}
        assert "a-orders" in assigned and "b-other" not in assigned, assigned
    finally:
        consumer.close()
