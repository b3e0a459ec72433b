"""TLS listeners (issue #18): SSL next to PLAINTEXT, with certificates the test makes.

The test makes a CA, a server certificate it signs (for 127.0.0.1 and localhost), a client
certificate it signs, and a second, unrelated CA. The broker serves PLAINTEXT and SSL
listeners side by side (Kafka's named `listeners`). Each client is told the address of the
listener it came in on.
  * confluent-kafka, kafka-python and kcat produce and consume over SSL, trusting the CA.
  * A client that trusts only the other CA fails the handshake. The broker keeps serving.
  * With `ssl.client.auth=required`, a client without a certificate is refused, and a client
    with one the CA signed is served.
  * SIGHUP reloads the keystore: new connections get the new certificate, and an open
    connection keeps working.
  * Garbage in place of a TLS ClientHello closes that connection only.
"""

import datetime
import json
import os
import signal
import socket
import ssl
import subprocess
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kafka import KafkaConsumer, KafkaProducer

from clients import wait_until
from conftest import Broker, free_port, strata_bin

T = 30  # seconds: every client call and wait here is bounded by it
pytestmark = pytest.mark.single_node  # a cluster's brokers serve PLAINTEXT in this build


# --- certificates -------------------------------------------------------------------------
def _name(common_name):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "strata tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def make_ca(common_name):
    key = _key()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(common_name))
            .issuer_name(_name(common_name)).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def make_leaf(ca, common_name, server):
    ca_key, ca_cert = ca
    key = _key()
    now = datetime.datetime.now(datetime.timezone.utc)
    usage = x509.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (x509.CertificateBuilder().subject_name(_name(common_name))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if server:
        import ipaddress
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


class Pki:
    """The files a test's broker and clients use, in `directory`."""

    def __init__(self, directory):
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        self.ca = make_ca("strata test CA")
        self.other_ca = make_ca("unrelated CA")
        self.ca_file = self._write("ca.pem", _pem_cert(self.ca[1]))
        self.other_ca_file = self._write("other-ca.pem", _pem_cert(self.other_ca[1]))
        self.keystore = os.path.join(directory, "broker.pem")
        self.server_serial = self.issue_server("broker-1")
        key, cert = make_leaf(self.ca, "client-1", server=False)
        self.client_key = self._write("client.key", _pem_key(key))
        self.client_cert = self._write("client.pem", _pem_cert(cert))

    def _write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def issue_server(self, common_name):
        """(Re)writes the broker's keystore: its key and certificate chain. -> the serial."""
        key, cert = make_leaf(self.ca, common_name, server=True)
        self._write("broker.pem.tmp", _pem_key(key) + _pem_cert(cert) + _pem_cert(self.ca[1]))
        os.replace(os.path.join(self.dir, "broker.pem.tmp"), self.keystore)
        return cert.serial_number


class TlsBroker(Broker):
    """A broker with a PLAINTEXT and an SSL listener."""

    def __init__(self, binary, workdir, pki, extra=()):
        super().__init__(binary, workdir)
        self.ssl_port = free_port()
        while self.ssl_port in (self.port, self.admin_port):
            self.ssl_port = free_port()
        self.pki = pki
        self.extra = list(extra)

    @property
    def ssl_bootstrap(self):
        return "127.0.0.1:%d" % self.ssl_port

    def command(self):
        return [
            str(self.binary), "serve",
            "--data-dir", str(self.data_dir),
            "--admin-listen", "127.0.0.1:%d" % self.admin_port,
            "--cores", "2", "--node-id", "0",
            "--set", "listeners=PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d"
            % (self.port, self.ssl_port),
            "--set", "ssl.keystore.location=" + self.pki.keystore,
            "--set", "ssl.truststore.location=" + self.pki.ca_file,
        ] + self.extra


@pytest.fixture
def pki(tmp_path):
    return Pki(str(tmp_path / "pki"))


def start(tmp_path, pki, extra=()):
    b = TlsBroker(strata_bin(), tmp_path / "broker", pki, extra)
    return b.start()


def ssl_conf(bootstrap, ca, cert=None, key=None):
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca,
            "socket.timeout.ms": 10000}
    if cert:
        conf.update({"ssl.certificate.location": cert, "ssl.key.location": key})
    return conf


def create_topic(conf, name):
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(name, 1, 1)], request_timeout=T).values():
        f.result(timeout=T)


def ck_round_trip(conf, topic, count=100):
    p = ck.Producer(dict(conf, acks="all"))
    for i in range(count):
        p.produce(topic, value=b"ck-%d" % i)
    assert p.flush(T) == 0
    c = ck.Consumer(dict(conf, **{"group.id": "tls-" + topic, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False}))
    c.assign([ck.TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + T
    while len(got) < count and time.monotonic() < deadline:
        for m in c.consume(num_messages=count, timeout=1):
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    assert got == [b"ck-%d" % i for i in range(count)]


def handshake_fails(conf):
    """True when a confluent-kafka client with `conf` cannot get Metadata (the TLS handshake
    fails) within a few seconds."""
    admin = AdminClient(dict(conf, **{"socket.timeout.ms": 3000}))
    try:
        admin.list_topics(timeout=5)
    except ck.KafkaException:
        return True
    return False


def served_certificate_serial(port):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number


@pytest.mark.timeout(120)
def test_clients_produce_and_consume_over_ssl(tmp_path, pki):
    b = start(tmp_path, pki)
    try:
        conf = ssl_conf(b.ssl_bootstrap, pki.ca_file)
        topic = "tls-clients"
        create_topic(conf, topic)
        # Each listener advertises itself: over SSL the broker is the SSL address.
        brokers = AdminClient(conf).list_topics(timeout=T).brokers
        assert ["%s:%d" % (m.host, m.port) for m in brokers.values()] == [b.ssl_bootstrap]
        plain = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=T).brokers
        assert ["%s:%d" % (m.host, m.port) for m in plain.values()] == [b.bootstrap]

        ck_round_trip(conf, topic)

        producer = KafkaProducer(bootstrap_servers=b.ssl_bootstrap, security_protocol="SSL",
                                 ssl_cafile=pki.ca_file, acks="all", request_timeout_ms=T * 1000)
        for i in range(50):
            producer.send(topic, value=b"kp-%d" % i)
        producer.flush(timeout=T)
        producer.close()
        consumer = KafkaConsumer(topic, bootstrap_servers=b.ssl_bootstrap, security_protocol="SSL",
                                 ssl_cafile=pki.ca_file, auto_offset_reset="earliest",
                                 consumer_timeout_ms=5000, enable_auto_commit=False,
                                 group_id=None)
        values = [m.value for m in consumer]
        consumer.close()
        assert values == [b"ck-%d" % i for i in range(100)] + [b"kp-%d" % i for i in range(50)]

        kcat = ["kcat", "-b", b.ssl_bootstrap, "-X", "security.protocol=ssl",
                "-X", "ssl.ca.location=" + pki.ca_file]
        lines = ["kcat-%d" % i for i in range(20)]
        subprocess.run(kcat + ["-P", "-t", topic, "-p", "0"], input="\n".join(lines) + "\n",
                       text=True, timeout=T, check=True)
        out = subprocess.run(kcat + ["-C", "-t", topic, "-p", "0", "-o", "150", "-e"],
                             capture_output=True, text=True, timeout=T, check=True)
        assert out.stdout.splitlines() == lines
        listing = subprocess.run(kcat + ["-L", "-J"], capture_output=True, text=True, timeout=T,
                                 check=True)
        assert json.loads(listing.stdout)["brokers"][0]["name"].startswith(b.ssl_bootstrap)
    finally:
        b.kill()


@pytest.mark.timeout(120)
def test_a_client_that_does_not_trust_the_ca_fails_the_handshake(tmp_path, pki):
    b = start(tmp_path, pki)
    try:
        assert handshake_fails(ssl_conf(b.ssl_bootstrap, pki.other_ca_file))
        # Garbage where a ClientHello belongs closes that connection, nothing else.
        with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10) as s:
            s.sendall(os.urandom(4096))
            s.settimeout(10)
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass
        assert not handshake_fails(ssl_conf(b.ssl_bootstrap, pki.ca_file))
        assert "TLS handshake failed" in b.stderr_tail(200)
    finally:
        b.kill()


@pytest.mark.timeout(120)
def test_mtls_required_refuses_a_client_without_a_certificate(tmp_path, pki):
    b = start(tmp_path, pki, ["--set", "ssl.client.auth=required"])
    try:
        assert handshake_fails(ssl_conf(b.ssl_bootstrap, pki.ca_file))
        # A certificate from another CA is no better.
        other_key, other_cert = make_leaf(pki.other_ca, "stranger", server=False)
        stranger_key = pki._write("stranger.key", _pem_key(other_key))
        stranger_cert = pki._write("stranger.pem", _pem_cert(other_cert))
        assert handshake_fails(ssl_conf(b.ssl_bootstrap, pki.ca_file, stranger_cert, stranger_key))
        conf = ssl_conf(b.ssl_bootstrap, pki.ca_file, pki.client_cert, pki.client_key)
        create_topic(conf, "mtls")
        ck_round_trip(conf, "mtls", count=20)
    finally:
        b.kill()


@pytest.mark.timeout(120)
def test_sighup_reloads_the_certificate_without_dropping_connections(tmp_path, pki):
    b = start(tmp_path, pki)
    try:
        assert served_certificate_serial(b.ssl_port) == pki.server_serial
        conf = ssl_conf(b.ssl_bootstrap, pki.ca_file)
        create_topic(conf, "reload")
        producer = ck.Producer(dict(conf, acks="all"))
        producer.produce("reload", value=b"before")
        assert producer.flush(T) == 0
        new_serial = pki.issue_server("broker-2")
        os.kill(b.proc.pid, signal.SIGHUP)
        wait_until(lambda: served_certificate_serial(b.ssl_port) == new_serial, timeout=T,
                   message="the new certificate on new connections")
        # The producer's connection predates the reload and keeps working.
        producer.produce("reload", value=b"after")
        assert producer.flush(T) == 0
        assert b.running()
    finally:
        b.kill()


@pytest.mark.timeout(120)
def test_strata_cert_self_signed_makes_a_working_mtls_setup(tmp_path):
    out = tmp_path / "certs"
    subprocess.run([str(strata_bin()), "cert", "self-signed", "--out", str(out)], check=True,
                   capture_output=True, timeout=T)
    assert oct(os.stat(out / "broker.pem").st_mode & 0o777) == "0o600"

    class Files:
        keystore = str(out / "broker.pem")
        ca_file = str(out / "ca.pem")

    b = start(tmp_path, Files, ["--set", "ssl.client.auth=required"])
    try:
        assert handshake_fails(ssl_conf(b.ssl_bootstrap, Files.ca_file))
        conf = ssl_conf(b.ssl_bootstrap, Files.ca_file, str(out / "client.pem"),
                        str(out / "client.key"))
        create_topic(conf, "self-signed")
        ck_round_trip(conf, "self-signed", count=10)
    finally:
        b.kill()
