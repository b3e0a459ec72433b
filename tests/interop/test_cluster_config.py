"""The cluster keys of issue #15 with Kafka's KRaft names, settled before the controller
exists: `broker.rack` reaches clients; `process.roles`, `controller.quorum.voters`,
`controller.listener.names`, named `listeners` and `listener.security.protocol.map` are parsed
and cross-checked as Kafka does; what this build cannot run yet is refused at startup with a
message naming the key and the issue that builds it, never ignored."""
import subprocess

import kafka
from confluent_kafka.admin import AdminClient

from conftest import _stop, free_port, strata_bin
from test_acceptance import TunedBroker


def test_broker_rack_is_reported_in_describe_cluster_and_metadata(tmp_path):
    b = TunedBroker(strata_bin(), tmp_path / "broker", ["--set", "broker.rack=rack-a"])
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        cluster = admin.describe_cluster().result(timeout=10)
        assert [(n.id, n.rack) for n in cluster.nodes] == [(0, "rack-a")]
        client = kafka.KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            described = client.describe_cluster()
        finally:
            client.close()
        assert [(n["node_id"], n["rack"]) for n in described["brokers"]] == [(0, "rack-a")]
    finally:
        _stop(b)


def test_kafkas_listener_form_with_a_controller_entry_serves_the_client_listener(tmp_path):
    """`PLAINTEXT://...,CONTROLLER://...` with the default roles and no voters: the client
    listener serves; the controller entry is the (one-node) controller's own."""
    port, controller = free_port(), free_port()
    b = TunedBroker(strata_bin(), tmp_path / "broker",
                    ["--set", "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (port, controller),
                     "--set", "advertised.listeners=PLAINTEXT://127.0.0.1:%d" % port])
    b.port = port
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        cluster = admin.describe_cluster().result(timeout=10)
        assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", port)]
    finally:
        _stop(b)


def refused(tmp_path, *sets):
    args = [str(strata_bin()), "serve", "--data-dir", str(tmp_path / "data"),
            "--listen", "127.0.0.1:%d" % free_port(), "--admin-listen", "127.0.0.1:%d" % free_port()]
    for s in sets:
        args += ["--set", s]
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0, "started with %r" % (sets,)
    return done.stderr + done.stdout


def test_what_this_build_cannot_run_is_refused_naming_the_key_and_the_issue(tmp_path):
    for sets, expected in [
        # A broker-only node is a Raft learner the leader pushes to: it needs a listener.
        (("process.roles=broker", "controller.quorum.voters=1@127.0.0.1:19093"),
         "a broker-only node needs a CONTROLLER://HOST:PORT listener"),
        # An SSL listener (here the only one, renamed by the map) needs its key and chain.
        (("listener.security.protocol.map=PLAINTEXT:SSL",),
         "an SSL listener needs ssl.keystore.location"),
    ]:
        text = refused(tmp_path, *sets)
        assert expected in text, (sets, text)


def test_inconsistent_cluster_keys_are_refused_as_kafka_refuses_them(tmp_path):
    for sets, expected in [
        (("process.roles=broker",), "needs controller.quorum.voters"),
        (("controller.quorum.voters=1@127.0.0.1:19093",), "must be one of controller.quorum.voters"),
        (("process.roles=broker,kafka",), "use broker, controller or broker,controller"),
        (("controller.quorum.voters=0@nowhere",), "not HOST:PORT"),
        (("inter.broker.listener.name=REPLICATION",), "inter.broker.listener.name"),
    ]:
        text = refused(tmp_path, *sets)
        assert expected in text, (sets, text)


def _cluster_id(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_cluster().result(timeout=10).cluster_id


def test_the_data_directory_records_its_identity_and_refuses_another_node_or_cluster(tmp_path):
    """meta.properties as Kafka writes it: a directory serves the cluster and node that made it;
    a lost metadata file is rebuilt (by `strata recover-metadata`) under the same cluster id."""
    from conftest import Broker
    b = Broker(strata_bin(), tmp_path / "broker")
    b.start()
    try:
        cluster_id = _cluster_id(b.bootstrap)
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce("identity-kept", b"v")
        assert p.flush(10) == 0
        code, _ = b.terminate()
        assert code == 0
        meta = dict(line.split("=", 1) for line in (b.data_dir / "meta.properties").read_text().splitlines()
                    if line and not line.startswith("#"))
        assert meta["version"] == "1" and meta["node.id"] == "0" and meta["cluster.id"] == cluster_id
        assert len(meta["directory.id"]) == 22
        other_node = subprocess.run([a if a != "0" else "5" for a in b.command()],
                                    capture_output=True, text=True, timeout=60)
        assert other_node.returncode != 0
        assert "belongs to node 0, but node.id is 5" in other_node.stderr + other_node.stdout
        # A lost metadata file: recover-metadata keeps the directory's cluster id.
        (b.data_dir / "strata-metadata.json").unlink()
        rebuilt = subprocess.run([str(strata_bin()), "recover-metadata", "--data-dir", str(b.data_dir)],
                                 capture_output=True, text=True, timeout=60)
        assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
        assert "kept from meta.properties (%s)" % cluster_id in rebuilt.stdout, rebuilt.stdout
        b.start()
        assert _cluster_id(b.bootstrap) == cluster_id
        code, _ = b.terminate()
        assert code == 0
        # Another cluster's directory.
        text = (b.data_dir / "meta.properties").read_text().replace(cluster_id, "AAAAAAAAAAAAAAAAAAAAAA")
        (b.data_dir / "meta.properties").write_text(text)
        foreign = subprocess.run(b.command(), capture_output=True, text=True, timeout=60)
        assert foreign.returncode != 0
        assert "belongs to cluster \"AAAAAAAAAAAAAAAAAAAAAA\"" in foreign.stderr + foreign.stdout
    finally:
        b.kill()
