"""SASL PLAIN on SASL_PLAINTEXT and SASL_SSL listeners (issue #18).

One broker serves PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners. PLAIN's users come from
Kafka's PlainLoginModule line in `sasl.jaas.config`.
  * confluent-kafka produces and consumes as alice over SASL_SSL and over SASL_PLAINTEXT, and
    kafka-python over SASL_SSL.
  * A wrong password gets SASL_AUTHENTICATION_FAILED (58) with Kafka's message, and the
    connection is closed. confluent-kafka reports an authentication error.
  * A request other than ApiVersions or the SASL ones before authentication closes the
    connection.
  * 1,000 failed logins in a row and a SASL frame announcing 100 MB leave the broker serving
    other clients. The failures are counted in /metrics and the broker's memory stays bounded.
  * Re-authentication (KIP-368) with `connections.max.reauth.ms`: SaslAuthenticate v1 answers
    the session lifetime; a request after it passes closes the connection; a re-authentication
    on the same connection renews it, and one with another mechanism is refused; a
    confluent-kafka producer running past several lifetimes re-authenticates and loses nothing.
"""

import os
import socket
import struct
import time
import urllib.request

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

import wire
from conftest import Broker, free_port, strata_bin
from test_tls import Pki

T = 30
pytestmark = pytest.mark.single_node  # a cluster's brokers serve PLAINTEXT in this build
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33


class SaslBroker(Broker):
    def __init__(self, binary, workdir, pki):
        super().__init__(binary, workdir)
        taken = {self.port, self.admin_port}
        self.sasl_port = free_port()
        while self.sasl_port in taken:
            self.sasl_port = free_port()
        taken.add(self.sasl_port)
        self.sasl_ssl_port = free_port()
        while self.sasl_ssl_port in taken:
            self.sasl_ssl_port = free_port()
        self.pki = pki

    def command(self):
        return [
            str(self.binary), "serve",
            "--data-dir", str(self.data_dir),
            "--admin-listen", "127.0.0.1:%d" % self.admin_port,
            "--cores", "2", "--node-id", "0",
            "--set", "listeners=PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d,"
            "SASL_SSL://127.0.0.1:%d" % (self.port, self.sasl_port, self.sasl_ssl_port),
            "--set", "ssl.keystore.location=" + self.pki.keystore,
            "--set", "sasl.jaas.config=" + JAAS,
        ]

    def metric(self, name):
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.admin_port,
                                      timeout=10).read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def rss_mib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl")
    b = SaslBroker(strata_bin(), root / "broker", Pki(str(root / "pki"))).start()
    yield b
    b.kill()


def sasl_conf(bootstrap, protocol, password="alice-secret", ca=None):
    conf = {"bootstrap.servers": bootstrap, "security.protocol": protocol,
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": password,
            "socket.timeout.ms": 10000}
    if ca:
        conf["ssl.ca.location"] = ca
    return conf


def round_trip(conf, topic, count=50):
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=T).values():
        f.result(timeout=T)
    p = ck.Producer(dict(conf, acks="all"))
    for i in range(count):
        p.produce(topic, value=b"v-%d" % i)
    assert p.flush(T) == 0
    c = ck.Consumer(dict(conf, **{"group.id": "sasl-" + topic, "auto.offset.reset": "earliest"}))
    c.assign([ck.TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + T
    while len(got) < count and time.monotonic() < deadline:
        for m in c.consume(num_messages=count, timeout=1):
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    assert got == [b"v-%d" % i for i in range(count)]


def handshake(sock, mechanism="PLAIN"):
    sock.sendall(wire.frame(wire.request_header_v1(SASL_HANDSHAKE, 1, 1) + wire.string(mechanism)))
    _, body = wire.read_response(sock, T)
    r = wire.Reader(body)
    return r.i16(), r.array(lambda r: r.string())


def authenticate(sock, token):
    """SaslAuthenticate v1 -> (error code, message)."""
    sock.sendall(wire.frame(wire.request_header_v1(SASL_AUTHENTICATE, 1, 2) + wire.bytes_(token)))
    _, body = wire.read_response(sock, T)
    r = wire.Reader(body)
    return r.i16(), r.string()


def test_clients_authenticate_with_plain_over_sasl_ssl_and_sasl_plaintext(broker):
    ssl_conf = sasl_conf("127.0.0.1:%d" % broker.sasl_ssl_port, "SASL_SSL", ca=broker.pki.ca_file)
    round_trip(ssl_conf, "sasl-ssl")
    round_trip(sasl_conf("127.0.0.1:%d" % broker.sasl_port, "SASL_PLAINTEXT"), "sasl-plaintext")
    # Each listener advertises itself.
    brokers = AdminClient(ssl_conf).list_topics(timeout=T).brokers
    assert [m.port for m in brokers.values()] == [broker.sasl_ssl_port]

    common = dict(bootstrap_servers="127.0.0.1:%d" % broker.sasl_ssl_port,
                  security_protocol="SASL_SSL", ssl_cafile=broker.pki.ca_file,
                  sasl_mechanism="PLAIN", sasl_plain_username="alice",
                  sasl_plain_password="alice-secret")
    producer = KafkaProducer(acks="all", request_timeout_ms=T * 1000, **common)
    for i in range(20):
        producer.send("sasl-ssl", value=b"kp-%d" % i)
    producer.flush(timeout=T)
    producer.close()
    consumer = KafkaConsumer("sasl-ssl", auto_offset_reset="earliest", consumer_timeout_ms=5000,
                             enable_auto_commit=False, group_id=None, **common)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"v-%d" % i for i in range(50)] + [b"kp-%d" % i for i in range(20)]


def test_a_wrong_password_is_sasl_authentication_failed_and_closes_the_connection(broker):
    with wire.connect(broker.sasl_port, T) as s:
        assert handshake(s) == (0, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        code, message = authenticate(s, b"\0alice\0wrong")
        assert code == SASL_AUTHENTICATION_FAILED
        assert message == "Authentication failed: Invalid username or password"
        assert wire.wait_closed(s, timeout=10)
    with wire.connect(broker.sasl_port, T) as s:
        assert handshake(s, "GSSAPI")[0] == UNSUPPORTED_SASL_MECHANISM
        assert wire.wait_closed(s, timeout=10)
    errors = []
    p = ck.Producer(dict(sasl_conf("127.0.0.1:%d" % broker.sasl_port, "SASL_PLAINTEXT",
                                   password="wrong"), error_cb=errors.append))
    deadline = time.monotonic() + T
    while not errors and time.monotonic() < deadline:
        p.poll(0.5)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION, errors
    assert "Invalid username or password" in errors[0].str()
    # The password is never logged; the user and the address are.
    log = "\n".join(line for line in broker.stderr_tail(400).splitlines()
                    if not line.startswith("=== interop"))  # the harness's command line
    assert "SASL authentication failed" in log and 'user="alice"' in log
    # Not even the configured ones, in the startup line of settings.
    assert "alice-secret" not in log and "sasl.jaas.config=[hidden]" in log


def test_requests_before_authentication_close_the_connection(broker):
    with wire.connect(broker.sasl_port, T) as s:
        # ApiVersions is allowed (clients ask it first)...
        s.sendall(wire.api_versions_request(1))
        _, body = wire.read_response(s, T)
        assert wire.parse_api_versions_response(body, 0)[0] == 0
        # ... Metadata is not.
        s.sendall(wire.metadata_v1_request(2))
        assert wire.wait_closed(s, timeout=10)


@pytest.mark.timeout(180)
def test_failed_logins_and_a_huge_sasl_token_leave_the_broker_serving(broker):
    before = broker.metric("strata_authentication_failures_total")
    for _ in range(1000):
        with wire.connect(broker.sasl_port, T) as s:
            assert handshake(s)[0] == 0
            assert authenticate(s, b"\0alice\0nope")[0] == SASL_AUTHENTICATION_FAILED
    assert broker.metric("strata_authentication_failures_total") - before == 1000
    # A SaslAuthenticate frame announcing 100 MB before authentication: closed unread.
    rss = broker.rss_mib()
    with wire.connect(broker.sasl_port, T) as s:
        assert handshake(s)[0] == 0
        header = wire.request_header_v1(SASL_AUTHENTICATE, 1, 2)
        s.sendall(struct.pack(">i", 100 * 1024 * 1024) + header + struct.pack(">i", 100 << 20))
        try:
            s.sendall(os.urandom(1 << 20))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert wire.wait_closed(s, timeout=10)
    assert broker.rss_mib() < rss + 64, "memory grew by %.0f MiB" % (broker.rss_mib() - rss)
    # Other clients are still served.
    round_trip(sasl_conf("127.0.0.1:%d" % broker.sasl_port, "SASL_PLAINTEXT"), "after-abuse", 5)
    assert broker.running()


REAUTH_MS = 2000
METADATA = 3


class ReauthBroker(SaslBroker):
    def command(self):
        return super().command() + ["--set", "connections.max.reauth.ms=%d" % REAUTH_MS]


def authenticate_v1(sock, token):
    """SaslAuthenticate v1 -> (error code, message, session lifetime ms)."""
    sock.sendall(wire.frame(wire.request_header_v1(SASL_AUTHENTICATE, 1, 2) + wire.bytes_(token)))
    _, body = wire.read_response(sock, T)
    r = wire.Reader(body)
    code, message = r.i16(), r.string() or None  # null or "" on success (Kafka sends "")
    r.bytes_()
    return code, message, r.i64()


def metadata_ok(sock):
    sock.sendall(wire.metadata_v1_request(9, topics=[]))
    wire.read_response(sock, T)


def test_sessions_expire_and_are_renewed_by_re_authentication(tmp_path):
    b = ReauthBroker(strata_bin(), tmp_path / "broker", Pki(str(tmp_path / "pki"))).start()
    try:
        # The lifetime is answered, and a request after it closes the connection.
        with wire.connect(b.sasl_port, T) as s:
            assert handshake(s)[0] == 0
            assert authenticate_v1(s, b"\0alice\0alice-secret") == (0, None, REAUTH_MS)
            metadata_ok(s)
            time.sleep(REAUTH_MS / 1000 + 0.3)
            s.sendall(wire.metadata_v1_request(10, topics=[]))
            assert wire.wait_closed(s, timeout=10), "served after the session expired"
        # Re-authenticating on the connection renews the session.
        with wire.connect(b.sasl_port, T) as s:
            assert handshake(s)[0] == 0
            assert authenticate_v1(s, b"\0alice\0alice-secret")[0] == 0
            time.sleep(REAUTH_MS / 1000 * 0.6)
            assert handshake(s)[0] == 0
            assert authenticate_v1(s, b"\0alice\0alice-secret") == (0, None, REAUTH_MS)
            time.sleep(REAUTH_MS / 1000 * 0.6)
            metadata_ok(s)  # past the first lifetime, within the second
        # Another principal (or mechanism) is refused, and the connection closed.
        with wire.connect(b.sasl_port, T) as s:
            assert handshake(s)[0] == 0
            assert authenticate_v1(s, b"\0alice\0alice-secret")[0] == 0
            assert handshake(s)[0] == 0
            code, message, _ = authenticate_v1(s, b"\0admin\0admin-secret")
            assert code == SASL_AUTHENTICATION_FAILED and "re-authentication" in message
            assert wire.wait_closed(s, timeout=10)
        with wire.connect(b.sasl_port, T) as s:
            assert handshake(s)[0] == 0
            assert authenticate_v1(s, b"\0alice\0alice-secret")[0] == 0
            assert handshake(s, "SCRAM-SHA-256")[0] == 34  # ILLEGAL_SASL_STATE
            assert wire.wait_closed(s, timeout=10)

        # librdkafka re-authenticates before each lifetime ends (KIP-368, librdkafka 2.2+).
        before = b.metric("strata_reauthentications_total")
        errors = []
        conf = sasl_conf("127.0.0.1:%d" % b.sasl_port, "SASL_PLAINTEXT")
        producer = ck.Producer(dict(conf, acks="all", error_cb=errors.append))
        delivered = []
        end = time.monotonic() + 3.5 * REAUTH_MS / 1000
        sent = 0
        while time.monotonic() < end:
            producer.produce("reauth", value=b"r-%d" % sent,
                             on_delivery=lambda e, m: delivered.append(e))
            sent += 1
            producer.poll(0.05)
        assert producer.flush(T) == 0
        assert len(delivered) == sent and not any(delivered), delivered[:3]
        assert not errors, errors
        reauths = b.metric("strata_reauthentications_total") - before
        assert reauths >= 2, "%d re-authentications in %.1f lifetimes" % (reauths, 3.5)
    finally:
        b.kill()
