"""SASL SCRAM-SHA-256 and SCRAM-SHA-512 (issue #18) and the admin APIs that manage them
(KIP-554: DescribeUserScramCredentials, key 50, and AlterUserScramCredentials, key 51).

One broker serves a PLAINTEXT listener on loopback (for `strata user` and raw frames) and a
SASL_SSL listener with a certificate signed by a CA the test makes. `sasl.enabled.mechanisms`
is PLAIN,SCRAM-SHA-256,SCRAM-SHA-512. The PLAIN user `admin` comes from the PlainLoginModule
line in `sasl.jaas.config`. SCRAM users are created as that admin, through confluent-kafka's
AdminClient over SASL_SSL.
  * alice (SCRAM-SHA-256) and bob (SCRAM-SHA-512) log in right after they are created, with no
    wait. confluent-kafka and kafka-python each produce and consume as them.
  * A wrong password, a mechanism the user has no credential for, an unknown user, and a SCRAM
    password tried over PLAIN all fail to authenticate, each within a bounded time.
  * Describe shows each credential's mechanism and iterations. Bad alterations get Kafka's
    errors: UNACCEPTABLE_CREDENTIAL (93) for an empty user or iterations outside 4096-16384,
    UNSUPPORTED_SASL_MECHANISM (33) for an unknown mechanism, RESOURCE_NOT_FOUND (91) for
    deleting or describing what does not exist, and DUPLICATE_RESOURCE (92) for the same user
    and mechanism twice in one alter, or the same user twice in one describe. The client
    libraries refuse an empty user, an unknown mechanism and a duplicated describe before
    sending anything, so those three are sent as raw frames.
  * Deleting a credential makes that user's next login with it fail.
  * `strata user create/list/delete` over PLAINTEXT manage a user who logs in over SASL_SSL.
  * Credentials survive a kill -9 and restart. strata-metadata.json keeps salt, StoredKey,
    ServerKey and iterations only: no password, no salted password, no ClientKey.
"""

import base64
import hashlib
import hmac
import json
import logging
import os
import re
import subprocess
import time

import confluent_kafka as ck
import kafka.errors
import pytest
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import wire
from conftest import Broker, free_port, strata_bin
from test_tls import Pki

T = 30  # seconds: every client call and wait here is bounded by it
N = 100  # messages each client produces per user
pytestmark = pytest.mark.single_node  # a cluster's brokers serve PLAINTEXT in this build
ADMIN_PASSWORD = "admin-secret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="%s" user_admin="%s";' % (ADMIN_PASSWORD, ADMIN_PASSWORD))
SHA_256, SHA_512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
MECHANISMS = {SHA_256: ScramMechanism.SCRAM_SHA_256, SHA_512: ScramMechanism.SCRAM_SHA_512}
HASHES = {SHA_256: "sha256", SHA_512: "sha512"}
PASSWORDS = {"alice": "alice-scram-Secret-1", "bob": "bob-scram-Secret-512",
             "carol": "carol-cli-Secret-7", "dave": "dave-two-mechanisms",
             "heidi": "heidi-cli-listed"}
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93
# How confluent-kafka reports a refused login (librdkafka turns the broker's 58 into this).
AUTH_FAILED = {ck.KafkaError._AUTHENTICATION, SASL_AUTHENTICATION_FAILED}


class ScramBroker(Broker):
    """A broker with a PLAINTEXT listener (`port`) and a SASL_SSL one (`sasl_ssl_port`)."""

    def __init__(self, binary, workdir, pki):
        super().__init__(binary, workdir)
        self.sasl_ssl_port = free_port()
        while self.sasl_ssl_port in (self.port, self.admin_port):
            self.sasl_ssl_port = free_port()
        self.pki = pki

    @property
    def sasl_ssl_bootstrap(self):
        return "127.0.0.1:%d" % self.sasl_ssl_port

    def command(self):
        return [
            str(self.binary), "serve",
            "--data-dir", str(self.data_dir),
            "--admin-listen", "127.0.0.1:%d" % self.admin_port,
            "--cores", "2", "--node-id", "0",
            "--set", "listeners=PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d"
            % (self.port, self.sasl_ssl_port),
            "--set", "ssl.keystore.location=" + self.pki.keystore,
            "--set", "sasl.enabled.mechanisms=PLAIN,%s,%s" % (SHA_256, SHA_512),
            "--set", "sasl.jaas.config=" + JAAS,
        ]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("scram")
    b = ScramBroker(strata_bin(), root / "broker", Pki(str(root / "pki"))).start()
    yield b
    b.kill()


# --- confluent-kafka ----------------------------------------------------------------------
def ck_conf(broker, user, mechanism, password):
    return {"bootstrap.servers": broker.sasl_ssl_bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": broker.pki.ca_file, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "socket.timeout.ms": 10000}


def scram_conf(broker, user, mechanism, password=None):
    return ck_conf(broker, user, mechanism, PASSWORDS[user] if password is None else password)


def admin(broker):
    """confluent-kafka's AdminClient as the PLAIN admin over SASL_SSL."""
    return AdminClient(ck_conf(broker, "admin", "PLAIN", ADMIN_PASSWORD))


def codes_of(futures):
    """{key: 0, or the error code the future raised} of a dict of admin futures."""
    codes = {}
    for key, future in futures.items():
        try:
            future.result(timeout=T)
            codes[key] = 0
        except ck.KafkaException as e:
            codes[key] = e.args[0].code()
    return codes


def alter(broker, alterations):
    """AlterUserScramCredentials through confluent-kafka -> {user: error code, 0 when done}."""
    client = admin(broker)  # kept alive until the futures resolve (destroyed, it fails them)
    return codes_of(client.alter_user_scram_credentials(alterations, request_timeout=T))


def upsertion(user, mechanism, iterations=4096, password=None):
    password = PASSWORDS[user] if password is None else password
    info = ScramCredentialInfo(MECHANISMS[mechanism], iterations)
    return UserScramCredentialUpsertion(user, info, password.encode())


def deletion(user, mechanism):
    return UserScramCredentialDeletion(user, MECHANISMS[mechanism])


def upsert(broker, user, *mechanisms, iterations=4096):
    codes = alter(broker, [upsertion(user, m, iterations) for m in mechanisms])
    assert codes == {user: 0}, codes


def describe(broker, user):
    """-> sorted [(mechanism name, iterations)] of the user's credentials, or the error code."""
    client = admin(broker)  # kept alive until the future resolves
    future = client.describe_user_scram_credentials([user], request_timeout=T)[user]
    try:
        description = future.result(timeout=T)
    except ck.KafkaException as e:
        return e.args[0].code()
    assert description.user == user
    return infos(description)


def infos(description):
    names = {v: k for k, v in MECHANISMS.items()}
    return sorted((names[i.mechanism], i.iterations) for i in description.scram_credential_infos)


def create_topic(conf, name):
    client = AdminClient(conf)  # kept alive until the futures resolve
    for f in client.create_topics([NewTopic(name, 1, 1)], request_timeout=T).values():
        f.result(timeout=T)


def ck_produce(conf, topic, values):
    p = ck.Producer(dict(conf, acks="all"))
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(T) == 0


def ck_consume(conf, topic, count):
    c = ck.Consumer(dict(conf, **{"group.id": "scram-" + topic, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False}))
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + T
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=count - len(got), timeout=1):
                assert m.error() is None, m.error()
                got.append(m.value())
        return got
    finally:
        c.close()


def logs_in(conf):
    """True once a confluent-kafka client with conf got Metadata (so it authenticated)."""
    AdminClient(conf).list_topics(timeout=T)
    return True


def login_error(conf):
    """(the authentication error a confluent-kafka client with conf reports, seconds it took);
    (None, T) with no such error within T seconds. Other errors seen are in the message."""
    errors = []
    started = time.monotonic()
    p = ck.Producer(dict(conf, error_cb=errors.append))
    while time.monotonic() - started < T:
        p.poll(0.2)
        refused = [e for e in errors if e.code() in AUTH_FAILED]
        if refused:
            return refused[0], time.monotonic() - started
    return None, "no authentication error in %ds; errors: %r" % (T, errors)


def assert_login_fails(conf):
    error, elapsed = login_error(conf)
    assert error is not None, elapsed
    assert elapsed < 10, "the refusal took %.1fs" % elapsed


# --- kafka-python -------------------------------------------------------------------------
def kp_conf(broker, user, mechanism, password=None):
    return dict(bootstrap_servers=broker.sasl_ssl_bootstrap, security_protocol="SASL_SSL",
                ssl_cafile=broker.pki.ca_file, sasl_mechanism=mechanism,
                sasl_plain_username=user,
                sasl_plain_password=PASSWORDS[user] if password is None else password,
                request_timeout_ms=T * 1000, api_version_auto_timeout_ms=10000)


def kp_produce(conf, topic, values):
    p = KafkaProducer(acks="all", max_block_ms=T * 1000, **conf)
    try:
        futures = [p.send(topic, value=v) for v in values]
        p.flush(timeout=T)
        for f in futures:
            f.get(timeout=T)
    finally:
        p.close(timeout=5)


def kp_consume(conf, topic, count):
    c = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                      fetch_max_wait_ms=100, **conf)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + T
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500, max_records=count - len(got)).values():
                got.extend(r.value for r in records)
        return got
    finally:
        c.close()


def kp_login_failure(caplog, conf):
    """What kafka-python makes of a refused login -> (what it raised and logged, seconds).
    kafka-python 2.3 logs the broker's SaslAuthenticate error, closes the connection and keeps
    retrying, so the produce fails with a timeout once max_block_ms is up."""
    caplog.clear()
    caplog.set_level(logging.ERROR, logger="kafka")
    raised = None
    producer = None
    started = time.monotonic()
    try:
        producer = KafkaProducer(**dict(conf, max_block_ms=3000, api_version_auto_timeout_ms=3000))
        producer.send("scram-never-written", value=b"x").get(timeout=5)
    except kafka.errors.KafkaError as e:
        raised = e
    finally:
        if producer is not None:
            producer.close(timeout=5)
    elapsed = time.monotonic() - started
    text = [repr(raised)] + [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    return raised, "\n".join(text), elapsed


# --- raw frames (PLAINTEXT listener) ------------------------------------------------------
TAGS = wire.EMPTY_TAGGED_FIELDS


def compact_bytes(b):
    return wire.uvarint(len(b) + 1) + b


def compact_array(items):
    return wire.uvarint(len(items) + 1) + b"".join(items)


def compact_str(r):
    n = r.uvarint()
    return None if n == 0 else r.raw(n - 1).decode()


def scram_call(broker, api_key, body):
    """One v0 request of key 50 or 51 (flexible: request header v2, response header v1) on
    the PLAINTEXT listener -> a Reader at the response body."""
    with wire.connect(broker.port, T) as s:
        s.sendall(wire.frame(wire.request_header_v2(api_key, 0, 7) + body + TAGS))
        correlation_id, body = wire.read_response(s, T)
    assert correlation_id == 7
    r = wire.Reader(body)
    r.skip_tagged_fields()
    return r


def alter_raw(broker, deletions=(), upsertions=()):
    """AlterUserScramCredentials v0. deletions: (user, mechanism code); upsertions: (user,
    mechanism code, iterations, password). -> [(user, error code)]"""
    def upsert_entry(user, code, iterations, password):
        salt = os.urandom(32)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)
        return (wire.compact_string(user) + wire.i8(code) + wire.i32(iterations)
                + compact_bytes(salt) + compact_bytes(salted) + TAGS)

    body = (compact_array([wire.compact_string(u) + wire.i8(m) + TAGS for u, m in deletions])
            + compact_array([upsert_entry(*u) for u in upsertions]))
    r = scram_call(broker, ALTER_USER_SCRAM_CREDENTIALS, body)
    r.i32()  # throttle time
    results = r.compact_array(lambda r: (compact_str(r), r.i16(), compact_str(r),
                                         r.skip_tagged_fields()))
    return [(user, code) for user, code, _message, _ in results or []]


def describe_raw(broker, users):
    """DescribeUserScramCredentials v0 -> (error code, [(user, error code, [(mechanism code,
    iterations)])])."""
    body = compact_array([wire.compact_string(u) + TAGS for u in users])
    r = scram_call(broker, DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    r.i32()  # throttle time
    error, _message = r.i16(), compact_str(r)
    results = r.compact_array(lambda r: (
        compact_str(r), r.i16(), compact_str(r),
        r.compact_array(lambda r: (r.i8(), r.i32(), r.skip_tagged_fields())),
        r.skip_tagged_fields()))
    return error, [(user, code, [(m, i) for m, i, _ in creds or []])
                   for user, code, _message, creds, _ in results or []]


def strata(*args):
    out = subprocess.run([str(strata_bin()), *args], capture_output=True, text=True, timeout=T)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


# --- tests --------------------------------------------------------------------------------
def test_new_users_produce_and_consume_with_scram_sha_256_and_sha_512(broker):
    """Users created through AlterUserScramCredentials log in at once (the first login comes
    right after the alter's answer) with both mechanisms. confluent-kafka and kafka-python
    each produce N messages and each read all 2N back over SASL_SSL."""
    for user, mechanism in (("alice", SHA_256), ("bob", SHA_512)):
        upsert(broker, user, mechanism)
        conf = scram_conf(broker, user, mechanism)
        topic = "scram-" + user
        create_topic(conf, topic)  # the first login, with no wait after the upsert
        ck_values = [b"ck-%s-%d" % (user.encode(), i) for i in range(N)]
        kp_values = [b"kp-%s-%d" % (user.encode(), i) for i in range(N)]
        ck_produce(conf, topic, ck_values)
        kp = kp_conf(broker, user, mechanism)
        kp_produce(kp, topic, kp_values)
        assert ck_consume(conf, topic, 2 * N) == ck_values + kp_values, user
        assert kp_consume(kp, topic, 2 * N) == ck_values + kp_values, user


def test_a_wrong_password_mechanism_or_user_fails_authentication_in_bounded_time(broker, caplog):
    """A login is refused, in a few seconds and without hanging, when the password is wrong,
    when the user has no credential for the mechanism used, when the user does not exist, and
    when a SCRAM password is tried over PLAIN (PLAIN users come from sasl.jaas.config only).
    kafka-python reports the broker's SASL_AUTHENTICATION_FAILED."""
    upsert(broker, "alice", SHA_256)
    upsert(broker, "bob", SHA_512)
    assert logs_in(scram_conf(broker, "alice", SHA_256))
    assert_login_fails(scram_conf(broker, "alice", SHA_256, password="not-alices-password"))
    assert_login_fails(scram_conf(broker, "alice", SHA_512))  # she has SCRAM-SHA-256 only
    assert_login_fails(ck_conf(broker, "nobody", SHA_256, "whatever"))
    assert_login_fails(ck_conf(broker, "alice", "PLAIN", PASSWORDS["alice"]))

    raised, text, elapsed = kp_login_failure(
        caplog, kp_conf(broker, "bob", SHA_512, password="not-bobs-password"))
    assert raised is not None, "kafka-python produced with a wrong password:\n" + text
    assert "SaslAuthenticationFailed" in text, text
    assert elapsed < 20, "kafka-python took %.1fs to give up" % elapsed
    # The broker still serves the right password.
    assert logs_in(scram_conf(broker, "bob", SHA_512))


def test_describe_shows_mechanisms_and_iterations_and_bad_alterations_get_kafkas_errors(broker):
    """Describe answers each credential's mechanism and iterations, per user and for all users.
    Every refused alteration gets Kafka's error code and changes nothing."""
    upsert(broker, "alice", SHA_256, iterations=8192)
    # One user with both mechanisms in one request is not a duplicate; 4096 and 16384 are the
    # bounds, both allowed.
    codes = alter(broker, [upsertion("dave", SHA_256, 4096), upsertion("dave", SHA_512, 16384)])
    assert codes == {"dave": 0}, codes
    assert describe(broker, "alice") == [(SHA_256, 8192)]
    assert describe(broker, "dave") == [(SHA_256, 4096), (SHA_512, 16384)]
    client = admin(broker)
    everyone = client.describe_user_scram_credentials(request_timeout=T).result(timeout=T)
    assert infos(everyone["alice"]) == [(SHA_256, 8192)]
    assert infos(everyone["dave"]) == [(SHA_256, 4096), (SHA_512, 16384)]

    # Through confluent-kafka: what the broker must refuse.
    assert alter(broker, [upsertion("alice", SHA_256, 4095)]) == {"alice": UNACCEPTABLE_CREDENTIAL}
    assert alter(broker, [upsertion("alice", SHA_256, 16385)]) == {"alice": UNACCEPTABLE_CREDENTIAL}
    assert describe(broker, "alice") == [(SHA_256, 8192)]  # unchanged
    assert alter(broker, [deletion("nobody", SHA_256)]) == {"nobody": RESOURCE_NOT_FOUND}
    assert alter(broker, [deletion("alice", SHA_512)]) == {"alice": RESOURCE_NOT_FOUND}
    assert alter(broker, [upsertion("frank", SHA_256, password="f"), deletion("frank", SHA_256)]) \
        == {"frank": DUPLICATE_RESOURCE}
    assert describe(broker, "frank") == RESOURCE_NOT_FOUND  # nothing of the request applied
    assert describe(broker, "nobody") == RESOURCE_NOT_FOUND

    # Raw frames: confluent-kafka refuses these before sending.
    with wire.connect(broker.port, T) as s:
        s.sendall(wire.api_versions_request(1))
        _, body = wire.read_response(s, T)
    versions = wire.parse_api_versions_response(body, 0)[1]
    assert versions.get(DESCRIBE_USER_SCRAM_CREDENTIALS, (None,))[0] == 0, versions
    assert versions.get(ALTER_USER_SCRAM_CREDENTIALS, (None,))[0] == 0, versions
    assert alter_raw(broker, upsertions=[("", 1, 4096, "pw")]) == [("", UNACCEPTABLE_CREDENTIAL)]
    assert alter_raw(broker, upsertions=[("mallory", 3, 4096, "pw")]) \
        == [("mallory", UNSUPPORTED_SASL_MECHANISM)]
    assert alter_raw(broker, deletions=[("alice", 0)]) == [("alice", UNSUPPORTED_SASL_MECHANISM)]
    error, results = describe_raw(broker, ["alice", "alice"])
    assert error == 0 and results, (error, results)
    assert {(user, code) for user, code, _ in results} == {("alice", DUPLICATE_RESOURCE)}, results
    assert describe_raw(broker, ["alice"]) == (0, [("alice", 0, [(1, 8192)])])
    assert describe(broker, "mallory") == RESOURCE_NOT_FOUND


def test_deleting_a_credential_makes_the_next_login_fail(broker):
    """Deleting one of a user's credentials refuses her next login with that mechanism at once,
    while her other mechanism still works. With none left, she is not found."""
    upsert(broker, "alice", SHA_256, SHA_512)
    assert logs_in(scram_conf(broker, "alice", SHA_256))
    assert alter(broker, [deletion("alice", SHA_256)]) == {"alice": 0}
    assert_login_fails(scram_conf(broker, "alice", SHA_256))
    assert logs_in(scram_conf(broker, "alice", SHA_512))
    assert describe(broker, "alice") == [(SHA_512, 4096)]
    assert alter(broker, [deletion("alice", SHA_512)]) == {"alice": 0}
    assert_login_fails(scram_conf(broker, "alice", SHA_512))
    assert describe(broker, "alice") == RESOURCE_NOT_FOUND


def test_strata_user_cli_creates_lists_and_deletes_users(broker):
    """`strata user create` over PLAINTEXT makes a user who logs in over SASL_SSL at once.
    `strata user list` shows her, and a user made through the admin API, one line per user and
    mechanism. After `strata user delete`, her login fails."""
    strata("user", "create", "carol", "--password", PASSWORDS["carol"], "--mechanism", SHA_512,
           "--iterations", "8192", "--bootstrap", broker.bootstrap)
    conf = scram_conf(broker, "carol", SHA_512)
    create_topic(conf, "scram-carol")
    values = [b"carol-%d" % i for i in range(10)]
    ck_produce(conf, "scram-carol", values)
    assert ck_consume(conf, "scram-carol", len(values)) == values
    assert describe(broker, "carol") == [(SHA_512, 8192)]

    upsert(broker, "heidi", SHA_256)
    rows = [line.split() for line in strata("user", "list", "--bootstrap", broker.bootstrap)
            .splitlines()]
    assert ["carol", SHA_512, "8192"] in rows, rows
    assert ["heidi", SHA_256, "4096"] in rows, rows

    strata("user", "delete", "carol", "--bootstrap", broker.bootstrap)
    strata("user", "delete", "heidi", "--mechanism", SHA_256, "--bootstrap", broker.bootstrap)
    assert_login_fails(conf)
    rows = [line.split() for line in strata("user", "list", "--bootstrap", broker.bootstrap)
            .splitlines()]
    assert not [row for row in rows if row and row[0] in ("carol", "heidi")], rows
    assert describe(broker, "carol") == RESOURCE_NOT_FOUND


def _bytes(value):
    """Bytes as stored in JSON: a list of numbers, hex or base64."""
    if isinstance(value, list):
        return bytes(value)
    if re.fullmatch(r"(?:[0-9a-fA-F]{2})+", value):
        return bytes.fromhex(value)
    return base64.b64decode(value, validate=True)


def test_credentials_survive_a_restart_and_only_salted_keys_are_stored(broker):
    """After kill -9 and a start on the same data directory, bob still logs in. His entry in
    strata-metadata.json is salt, StoredKey, ServerKey and iterations, consistent with his
    password (RFC 5802), and neither the password, the salted password nor the ClientKey
    appears there, in any encoding, nor does any SCRAM password appear in the broker's log."""
    upsert(broker, "bob", SHA_512)
    broker.restart()
    conf = scram_conf(broker, "bob", SHA_512)
    create_topic(conf, "scram-after-restart")
    values = [b"restart-%d" % i for i in range(10)]
    ck_produce(conf, "scram-after-restart", values)
    assert kp_consume(kp_conf(broker, "bob", SHA_512), "scram-after-restart", 10) == values
    assert describe(broker, "bob") == [(SHA_512, 4096)]

    text = (broker.data_dir / "strata-metadata.json").read_text()
    entries = [e for e in json.loads(text).get("scram", []) if e.get("user") == "bob"]
    assert len(entries) == 1, text
    entry = entries[0]
    assert entry["mechanism"] in (SHA_512, 2) and entry["iterations"] == 4096, entry
    password = PASSWORDS["bob"]
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), _bytes(entry["salt"]), 4096)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert _bytes(entry["stored_key"]) == hashlib.sha512(client_key).digest()
    assert _bytes(entry["server_key"]) == hmac.new(salted, b"Server Key", "sha512").digest()

    compact = re.sub(r"\s", "", text)
    assert password not in text
    for secret in (salted, client_key):
        for encoded in (secret.hex(), secret.hex().upper(), base64.b64encode(secret).decode(),
                        base64.b64encode(secret).decode().rstrip("="),
                        ",".join(str(b) for b in secret)):
            assert encoded not in compact, "a salted password or ClientKey is stored"
    log = broker.stderr_path.read_text(errors="replace") + broker.stdout_path.read_text(
        errors="replace")
    assert not [p for p in PASSWORDS.values() if p in log]
