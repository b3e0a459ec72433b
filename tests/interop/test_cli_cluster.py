"""The CLI on a three-node cluster, through one node's address: `strata produce` sends each
partition's records to its leader and prints where each landed, `strata consume` reads every
partition from its leader (with a group's committed offsets too), and the same commands,
with `strata user`, `acl` and `topic`, work on a cluster whose only listener is SASL_SSL, with
librdkafka's client settings from a profile file or `-X`."""

import os
import subprocess

import pytest

from cluster import Cluster, wait_for
from conftest import strata_bin
from test_security_cluster import LockedCluster
from test_tls import Pki

pytestmark = [pytest.mark.single_node, pytest.mark.timeout(300)]

LINES = 1000
PARTITIONS = 6


def cli(*args, stdin=None, env=None, timeout=120):
    out = subprocess.run([str(strata_bin()), *args], input=stdin, capture_output=True,
                         text=True, timeout=timeout, env=env)
    return out.returncode, out.stdout, out.stderr


def ok(*args, **kwargs):
    code, out, err = cli(*args, **kwargs)
    assert code == 0, "strata %s: %s" % (" ".join(args), err)
    return out


def keyed_lines():
    return "".join("key-%d\tvalue-%d\n" % (i, i) for i in range(LINES))


def produce_and_read_back(bootstrap, topic, settings=(), group="cli-group"):
    """1,000 keyed lines through `bootstrap` alone; where each landed (partition, offset),
    then read back exactly: by partition and offset, once more with a group, and nothing more
    for that group afterwards."""
    produced = ok("produce", topic, "-b", bootstrap, *settings, "-k", "\t",
                  "--format", "%p %o %k\\n", stdin=keyed_lines())
    landed = {}
    for line in produced.splitlines():
        partition, offset, key = line.split(" ")
        landed[(int(partition), int(offset))] = key
    assert len(landed) == LINES, "one line per record, each at its own place"
    assert {p for p, _ in landed} == set(range(PARTITIONS)), "keys spread over every partition"
    consumed = ok("consume", topic, "-b", bootstrap, *settings, "-e",
                  "--format", "%p %o %k %v\\n")
    read = {}
    for line in consumed.splitlines():
        partition, offset, key, value = line.split(" ")
        assert value == key.replace("key", "value")
        read[(int(partition), int(offset))] = key
    assert read == landed
    with_group = ok("consume", topic, "-b", bootstrap, *settings, "-e", "--group", group,
                    "--format", "%k\\n")
    assert sorted(with_group.splitlines()) == sorted(landed.values())
    again = ok("consume", topic, "-b", bootstrap, *settings, "-e", "--group", group)
    assert again == "", "the group committed what it read"
    described = ok("group", "describe", group, "-b", bootstrap, *settings)
    assert described.count(topic) == PARTITIONS, described
    # Ranges and counts: the first ten records of partition 0, then the last two.
    first = ok("consume", topic, "-b", bootstrap, *settings, "-p", "0", "-o", "0:10",
               "--format", "%o\\n")
    assert first.split() == [str(i) for i in range(10)]
    last = ok("consume", topic, "-b", bootstrap, *settings, "-p", "0", "-o", "-2", "-e",
              "--format", "%o\\n")
    end = max(o for p, o in landed if p == 0) + 1
    assert last.split() == [str(end - 2), str(end - 1)]
    return landed


def test_produce_and_consume_through_one_node_reach_every_leader(tmp_path):
    cluster = Cluster(tmp_path).start()
    try:
        node = cluster.nodes[2]
        ok("topic", "create", "keyed", "--partitions", str(PARTITIONS),
           "--replication-factor", "3", "-b", node.bootstrap)
        described = ok("topic", "describe", "keyed", "-b", node.bootstrap)
        leaders = {line.split()[1] for line in described.splitlines()
                   if line.split() and line.split()[0].isdigit()}
        assert leaders == {"1", "2", "3"}, described
        produce_and_read_back(node.bootstrap, "keyed")
    finally:
        cluster.stop()


def test_every_command_reaches_a_sasl_ssl_only_cluster_with_librdkafka_settings(tmp_path):
    pki = Pki(str(tmp_path / "pki"))
    # PLAIN for the brokers and the admin, SCRAM-SHA-512 for users made with `strata user`.
    cluster = LockedCluster(tmp_path, pki, mechanisms="PLAIN,SCRAM-SHA-512")
    try:
        cluster.start()
        node = cluster.nodes[1]
        # The admin's settings in a profile file, found through the environment.
        profile = tmp_path / "admin.properties"
        profile.write_text("# librdkafka's names\nsecurity.protocol=SASL_SSL\n"
                           "ssl.ca.location=%s\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                           "sasl.password=admin-secret\n" % pki.ca_file)
        admin_env = dict(os.environ, STRATA_CLIENT_CONFIG=str(profile))
        wait_for(lambda: cli("topic", "list", "-b", node.bootstrap, env=admin_env)[0] == 0, 60,
                 "the admin's login")
        ok("user", "create", "carol", "--password", "carol-secret", "--mechanism",
           "SCRAM-SHA-512", "-b", node.bootstrap, env=admin_env)
        ok("topic", "create", "secured", "--partitions", str(PARTITIONS),
           "--replication-factor", "3", "-b", node.bootstrap, env=admin_env)
        ok("acl", "create", "--topic", "secured", "--allow-principal", "User:carol",
           "--operation", "read,write,describe", "-b", node.bootstrap, env=admin_env)
        ok("acl", "create", "--group", "carol-group", "--allow-principal", "User:carol",
           "--operation", "read,describe", "-b", node.bootstrap, env=admin_env)
        listed = ok("acl", "list", "-b", node.bootstrap, env=admin_env)
        assert "User:carol" in listed
        # carol with -X flags alone (SCRAM-SHA-512 over TLS).
        carol = ["-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + pki.ca_file,
                 "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=carol",
                 "-X", "sasl.password=carol-secret"]
        wait_for(lambda: cli("topic", "describe", "secured", "-b", node.bootstrap, *carol)[0] == 0,
                 30, "carol's login on node 1")
        produce_and_read_back(node.bootstrap, "secured", carol, group="carol-group")
        # A wrong password is refused, named, with exit 1.
        wrong = carol[:-1] + ["sasl.password=not-carols"]
        code, _, err = cli("topic", "list", "-b", node.bootstrap, *wrong)
        assert code == 1 and "SASL_AUTHENTICATION_FAILED" in err, err
        # Plaintext to a SASL_SSL listener fails in bounded time, naming the address.
        code, _, err = cli("topic", "list", "-b", node.bootstrap, timeout=60)
        assert code == 1 and node.bootstrap in err, err
    finally:
        cluster.stop()
