"""SASL_SSL listeners on a three-node cluster (issue #18), and SCRAM credentials kept in the
cluster metadata (the controller's Raft log).

Every node is broker,controller and a voter, with two client listeners:
  PLAINTEXT://127.0.0.1:K   the inter-broker listener (replication, markers) and raw frames
  SASL_SSL://127.0.0.1:S    a certificate signed by a CA the test makes (SAN 127.0.0.1 and
                            localhost), PLAIN for the admin from sasl.jaas.config, and
                            SCRAM-SHA-256/512 for users made with AlterUserScramCredentials.
`--listen` and `--advertise` both carry that two-entry list, so each broker registers both
endpoints, and Metadata answers a client with the endpoints of the listener it came in on.
  * alice (SCRAM-SHA-512) is created through node 1's SASL_SSL listener. Right after the
    answer, one client per node, each bootstrapped from that node's SASL_SSL endpoint only,
    logs in as her within 5 s (the other brokers apply the committed record asynchronously).
  * She produces 100 messages to an RF=3 topic and reads them back through another node.
  * A wrong password is refused by node 3.
A second cluster is locked down (acceptance 5): its only Kafka listener is SASL_SSL and is the
inter-broker one, its CONTROLLER listener is SASL_SSL too, and the authorizer is on.
  * Brokers log in to each other as `broker` (sasl.jaas.config's username, a super user):
    an RF=3 topic replicates, the active controller is killed and a new one takes admin
    changes, the killed node comes back into the ISR, the partition's leader is killed, and
    alice (with ACLs) reads back every message she produced, through the survivors.
  * Without credentials nothing gets in: PLAINTEXT or TLS-only clients get no metadata from
    the broker port (which is also the peer port replicas fetch from), a wrong password is
    refused, and the controller port refuses a plaintext connection, a TLS one that sends a
    request before logging in (answered with the refusal only), and a login as a user that is not a broker or super user,
    while the broker's own login is answered.
Each test starts its own cluster (or node), so the file is single_node: it runs once, in the
single-node stage, like test_cluster.py, and is skipped with STRATA_INTEROP_CLUSTER.
"""

import concurrent.futures
import contextlib
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import Cluster, ClusterNode, broker_ids, metadata_from, wait_for
from conftest import free_port, strata_bin
from test_scram import (ADMIN_PASSWORD, JAAS, SHA_256, SHA_512, T, admin, alter,
                        assert_login_fails, ck_conf, ck_consume, ck_produce, scram_conf,
                        upsertion)
from test_tls import Pki

pytestmark = pytest.mark.single_node  # starts its own cluster: not again in the cluster stage
LOGIN_BOUND_S = 5.0  # how long each broker may take to apply a committed credential
N = 100


class SecureNode(ClusterNode):
    """A cluster node with a PLAINTEXT listener (`port`, inter-broker) and a SASL_SSL one
    (`sasl_ssl_port`), both advertised."""

    def __init__(self, binary, workdir, node_id, cluster):
        super().__init__(binary, workdir, node_id, cluster)
        taken = {self.port, self.admin_port, self.controller_port}
        for other in cluster.nodes.values():
            taken |= {other.port, other.admin_port, other.controller_port, other.sasl_ssl_port}
        self.sasl_ssl_port = free_port()
        while self.sasl_ssl_port in taken:
            self.sasl_ssl_port = free_port()
        self.pki = cluster.pki

    @property
    def sasl_ssl_bootstrap(self):
        return "127.0.0.1:%d" % self.sasl_ssl_port

    @property
    def listeners(self):
        return "PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d" % (self.kafka_port,
                                                                    self.sasl_ssl_port)

    def command(self):
        cmd = super().command()
        # ClusterNode sets both to 127.0.0.1:K; this node lists and advertises both listeners.
        cmd[cmd.index("--listen") + 1] = self.listeners
        cmd[cmd.index("--advertise") + 1] = self.listeners
        return cmd


class SecureCluster(Cluster):
    """`size` SecureNodes (broker,controller, voters), one keystore and PLAIN admin for all."""

    def __init__(self, workdir, pki, size=3):
        self.pki = pki
        self.extra = [
            "--set", "inter.broker.listener.name=PLAINTEXT",
            "--set", "ssl.keystore.location=" + pki.keystore,
            "--set", "sasl.enabled.mechanisms=PLAIN,%s,%s" % (SHA_256, SHA_512),
            "--set", "sasl.jaas.config=" + JAAS,
        ]
        self.nodes = {}
        for node_id in range(1, size + 1):
            self.nodes[node_id] = SecureNode(strata_bin(), workdir / ("node-%d" % node_id),
                                             node_id, self)


@pytest.fixture
def cluster(tmp_path):
    c = SecureCluster(tmp_path, Pki(str(tmp_path / "pki")))
    try:
        yield c.start()
    finally:
        c.stop()


@contextlib.contextmanager
def logs_on_failure(cluster):
    """Prints every node's log tail when the block fails (shown with the failure)."""
    try:
        yield
    except BaseException:
        print(cluster.log_tails())
        raise


def first_login(node, since):
    """Logs in as alice (SCRAM-SHA-512) on `node` alone: each attempt is a fresh
    confluent-kafka client bootstrapped from the node's SASL_SSL endpoint only, which gets
    Metadata from it, so only after authenticating there. Retried until LOGIN_BOUND_S after
    `since`. -> (seconds from `since` to the login or None, attempts, the Metadata or the
    last error)."""
    conf = dict(scram_conf(node, "alice", SHA_512),
                **{"reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100})
    attempts, last = 0, None
    while True:
        remaining = since + LOGIN_BOUND_S - time.monotonic()
        if remaining <= 0:
            return None, attempts, last
        attempts += 1
        try:
            metadata = AdminClient(conf).list_topics(timeout=min(1.0, remaining))
            return time.monotonic() - since, attempts, metadata
        except ck.KafkaException as e:
            last = e


def endpoints(metadata):
    """{(broker id, host, port)} of a confluent-kafka ClusterMetadata."""
    return {(b.id, b.host, b.port) for b in metadata.brokers.values()}


@pytest.mark.timeout(150)
def test_a_user_created_on_one_broker_logs_in_on_every_broker_of_a_3_node_cluster(cluster):
    nodes = cluster.nodes
    with logs_on_failure(cluster):
        wait_for(lambda: broker_ids(nodes[1]) == [1, 2, 3], 30, "three registered brokers")
        # An RF=3 topic, made before alice exists, as the PLAIN admin over node 1's SASL_SSL.
        topic = "alice-rf3"
        client = admin(nodes[1])  # kept alive until the futures resolve
        futures = client.create_topics([NewTopic(topic, 1, 3)], request_timeout=T)
        futures[topic].result(timeout=T)

        # alice, through node 1's SASL_SSL listener only.
        assert alter(nodes[1], [upsertion("alice", SHA_512)]) == {"alice": 0}
        answered = time.monotonic()
        # At once, on every node, each client knowing that node only.
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            logins = {i: pool.submit(first_login, node, answered) for i, node in nodes.items()}
            results = {i: f.result(timeout=LOGIN_BOUND_S + 30) for i, f in logins.items()}
        for i, (elapsed, attempts, _) in sorted(results.items()):
            print("alice's first login on node %d: %s after the alter's answer (%d attempt%s)"
                  % (i, "none" if elapsed is None else "%.3f s" % elapsed, attempts,
                     "" if attempts == 1 else "s"))
        late = {i: r for i, r in results.items() if r[0] is None or r[0] >= LOGIN_BOUND_S}
        assert not late, "no login as alice within %.0f s on nodes %s: %r" % (
            LOGIN_BOUND_S, sorted(late), {i: r[2] for i, r in late.items()})

        # Metadata through node 2 names every broker's endpoint of the listener asked.
        sasl_ssl = {(i, "127.0.0.1", n.sasl_ssl_port) for i, n in nodes.items()}
        plaintext = {(i, "127.0.0.1", n.kafka_port) for i, n in nodes.items()}
        as_alice = AdminClient(scram_conf(nodes[2], "alice", SHA_512)).list_topics(timeout=T)
        assert endpoints(as_alice) == sasl_ssl
        raw = metadata_from(nodes[2])  # Metadata v1 on node 2's PLAINTEXT listener
        assert {(b[0], b[1], b[2]) for b in raw["brokers"]} == plaintext
        replicas = [p["replicas"] for t in metadata_from(nodes[3], [topic])["topics"]
                    if t["name"] == topic for p in t["partitions"]]
        assert [sorted(r) for r in replicas] == [[1, 2, 3]], replicas

        # 100 messages as alice through node 2, read back as alice through node 3.
        values = [b"alice-%d" % i for i in range(N)]
        ck_produce(scram_conf(nodes[2], "alice", SHA_512), topic, values)
        assert ck_consume(scram_conf(nodes[3], "alice", SHA_512), topic, N) == values

        # A wrong password is refused by node 3, and the admin still logs in there.
        assert_login_fails(ck_conf(nodes[3], "alice", SHA_512, "not-alices-password"))
        AdminClient(ck_conf(nodes[3], "admin", "PLAIN", ADMIN_PASSWORD)).list_topics(timeout=T)


LOCKED_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="broker" password="broker-secret" user_broker="broker-secret" '
               'user_admin="admin-secret" user_alice="alice-secret";')


class LockedNode(ClusterNode):
    """A node whose only Kafka listener is SASL_SSL (clients and the other brokers)."""

    @property
    def listener(self):
        return "SASL_SSL://127.0.0.1:%d" % self.kafka_port

    def command(self):
        cmd = super().command()
        cmd[cmd.index("--listen") + 1] = self.listener
        cmd[cmd.index("--advertise") + 1] = self.listener
        return cmd


class LockedCluster(Cluster):
    def __init__(self, workdir, pki, size=3, mechanisms="PLAIN"):
        self.pki = pki
        self.extra = [
            "--set", "inter.broker.listener.name=SASL_SSL",
            "--set", "listener.security.protocol.map=CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL",
            "--set", "ssl.keystore.location=" + pki.keystore,
            "--set", "ssl.truststore.location=" + pki.ca_file,
            "--set", "sasl.enabled.mechanisms=" + mechanisms,
            "--set", "sasl.jaas.config=" + LOCKED_JAAS,
            "--set", "authorizer.class.name=strata",
            "--set", "super.users=User:broker;User:admin",
        ]
        self.nodes = {}
        for node_id in range(1, size + 1):
            self.nodes[node_id] = LockedNode(strata_bin(), workdir / ("node-%d" % node_id),
                                             node_id, self)


def locked_conf(pki, nodes, user, password):
    return {"bootstrap.servers": ",".join("127.0.0.1:%d" % n.kafka_port for n in nodes),
            "security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca_file,
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password,
            "socket.timeout.ms": 10000, "message.timeout.ms": 60000}


def partition_state(conf, topic):
    """(leader, ISR) of the topic's partition 0 as the cluster answers; (None, []) if unknown."""
    try:
        metadata = AdminClient(conf).list_topics(topic, timeout=10)
    except ck.KafkaException:
        return None, []
    t = metadata.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None, []
    return t.partitions[0].leader, sorted(t.partitions[0].isrs)


def controller_call(port, message, pki=None):
    """One controller-protocol exchange (`[len u32 LE][json]`), over TLS when `pki` is given.
    -> the decoded answer, or None when the node closed the connection without one."""
    import json
    import socket
    import ssl
    import struct
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock = raw
    try:
        if pki is not None:
            context = ssl.create_default_context(cafile=pki.ca_file)
            sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        answers = []
        for m in (message if isinstance(message, list) else [message]):
            payload = json.dumps(m).encode()
            sock.sendall(struct.pack("<I", len(payload)) + payload)
            head = b""
            while len(head) < 4:
                chunk = sock.recv(4 - len(head))
                if not chunk:
                    return answers or None
                head += chunk
            (size,) = struct.unpack("<I", head)
            body = b""
            while len(body) < size:
                chunk = sock.recv(size - len(body))
                if not chunk:
                    return answers or None
                body += chunk
            answers.append(json.loads(body))
        return answers
    except (ConnectionError, ssl.SSLError, socket.timeout):
        return None
    finally:
        sock.close()


def login(user, password):
    return {"authenticate": {"mechanism": "PLAIN", "user": user, "password": password}}


@pytest.mark.timeout(300)
def test_a_locked_down_cluster_replicates_and_fails_over_with_sasl_ssl_everywhere(tmp_path):
    pki = Pki(str(tmp_path / "pki"))
    cluster = LockedCluster(tmp_path, pki)
    nodes = cluster.nodes
    try:
        cluster.start()
        admin_conf = locked_conf(pki, nodes.values(), "admin", "admin-secret")
        alice_conf = locked_conf(pki, nodes.values(), "alice", "alice-secret")

        def brokers(conf=admin_conf):
            try:
                return sorted(AdminClient(conf).list_topics(timeout=5).brokers)
            except ck.KafkaException:
                return None
        wait_for(lambda: brokers() == [1, 2, 3], 60, "three brokers registered over SASL_SSL")
        topic = "locked"
        client = AdminClient(admin_conf)
        futures = client.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})],
                                       request_timeout=T)
        futures[topic].result(timeout=T)
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                           ResourcePatternType, ResourceType)
        acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                           "*", operation, AclPermissionType.ALLOW)
                for operation in (AclOperation.READ, AclOperation.WRITE)]
        # ck_consume's group.
        acls.append(AclBinding(ResourceType.GROUP, "scram-" + topic, ResourcePatternType.LITERAL,
                               "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
        for future in client.create_acls(acls, request_timeout=T).values():
            future.result(timeout=T)
        # Every replica in sync: the followers fetch over SASL_SSL, logged in as `broker`.
        wait_for(lambda: partition_state(admin_conf, topic)[1] == [1, 2, 3], 60,
                 "all three replicas in the ISR")
        first = [b"first-%d" % i for i in range(N)]
        ck_produce(alice_conf, topic, first)

        # Controller failover: kill the active controller; a new one takes an admin change.
        controller = client.describe_cluster(request_timeout=T).result(timeout=T).controller.id
        nodes[controller].kill()
        survivors = [n for i, n in nodes.items() if i != controller]
        admin_left = locked_conf(pki, survivors, "admin", "admin-secret")

        def created_after_failover():
            survivor_admin = AdminClient(admin_left)  # alive until the future resolves
            try:
                fs = survivor_admin.create_topics([NewTopic("after-failover", 1, 2)],
                                                  request_timeout=10)
                fs["after-failover"].result(timeout=15)
                return True
            except ck.KafkaException as e:
                return e.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
        wait_for(created_after_failover, 90, "a topic created after the controller was killed")
        second = [b"second-%d" % i for i in range(N)]
        ck_produce(locked_conf(pki, survivors, "alice", "alice-secret"), topic, second)

        # The killed node comes back and catches up into the ISR over SASL_SSL.
        nodes[controller].restart_after_kill()
        wait_for(lambda: partition_state(admin_conf, topic)[1] == [1, 2, 3], 90,
                 "the restarted node back in the ISR")

        # The partition's leader dies; alice reads everything through the survivors.
        leader, _ = partition_state(admin_conf, topic)
        nodes[leader].kill()
        rest = [n for i, n in nodes.items() if i != leader]
        alice_rest = locked_conf(pki, rest, "alice", "alice-secret")
        wait_for(lambda: partition_state(locked_conf(pki, rest, "admin", "admin-secret"),
                                         topic)[0] not in (None, -1, leader), 60,
                 "a new leader after the leader was killed")
        assert ck_consume(alice_rest, topic, 2 * N) == first + second
    except BaseException:
        print(cluster.log_tails())
        raise
    finally:
        cluster.stop()


@pytest.mark.timeout(180)
def test_without_credentials_nothing_reaches_the_broker_or_controller_ports(tmp_path):
    pki = Pki(str(tmp_path / "pki"))
    cluster = LockedCluster(tmp_path, pki)
    nodes = cluster.nodes
    try:
        cluster.start()
        node = nodes[1]
        good = locked_conf(pki, [node], "admin", "admin-secret")
        wait_for(lambda: len(AdminClient(good).list_topics(timeout=10).brokers) == 3, 60,
                 "three brokers")

        def no_metadata(conf):
            try:
                AdminClient(dict(conf, **{"socket.timeout.ms": 3000})).list_topics(timeout=5)
                return False
            except ck.KafkaException:
                return True
        bootstrap = "127.0.0.1:%d" % node.kafka_port
        assert no_metadata({"bootstrap.servers": bootstrap}), "PLAINTEXT got metadata"
        assert no_metadata({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                            "ssl.ca.location": pki.ca_file}), "TLS without SASL got metadata"
        assert no_metadata(locked_conf(pki, [node], "admin", "wrong")), "a wrong password got in"

        port = node.controller_port
        quorum = "describe_quorum"
        # The broker's own login opens the controller port: the probe's frames are right.
        answers = controller_call(port, [login("broker", "broker-secret"), quorum], pki)
        assert answers is not None and answers[0] == {"authenticated": {"Ok": None}}, answers
        assert "quorum" in answers[1], answers
        # Plaintext: the TLS handshake fails, nothing is answered.
        assert controller_call(port, quorum) is None
        # TLS, but a request before the login: refused, never served, and closed.
        answers = controller_call(port, [quorum, quorum], pki)
        assert answers == [{"authenticated": {"Err": "a request before the login"}}], answers
        # A valid PLAIN user that is neither this node's login nor a super user: refused.
        answers = controller_call(port, [login("alice", "alice-secret"), quorum], pki)
        assert answers is not None and len(answers) == 1, answers
        assert "Err" in answers[0]["authenticated"], answers
        answers = controller_call(port, [login("broker", "wrong"), quorum], pki)
        assert answers is not None and len(answers) == 1 and "Err" in answers[0]["authenticated"]
    except BaseException:
        print(cluster.log_tails())
        raise
    finally:
        cluster.stop()
