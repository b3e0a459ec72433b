"""The CLI answers an operator's mistakes plainly and creates nothing by them: a missing topic,
an unknown group or transactional id, the wrong port, ACLs on a broker that enforces none."""

import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient

import wire
from conftest import strata_bin

pytestmark = pytest.mark.timeout(120)


def cli(*args, timeout=60):
    started = time.monotonic()
    out = subprocess.run([str(strata_bin()), *args], capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL)
    return out.returncode, out.stdout, out.stderr, time.monotonic() - started


def topic_exists(broker, topic):
    answer = wire.parse_metadata_v1_response(
        wire.roundtrip(broker.port, wire.metadata_v1_request(1, None)))
    return topic in [t["name"] for t in answer["topics"]]


def test_consuming_a_missing_topic_says_so_exits_1_and_creates_nothing(shared_broker, topic_name):
    missing = topic_name + "-nope"
    for extra in ([], ["--exit-at-end"]):
        code, out, err, took = cli("consume", missing, "-b", shared_broker.bootstrap, *extra)
        assert code == 1, (out, err)
        assert "topic %s does not exist" % missing in err, err
        assert took < 15
    assert not topic_exists(shared_broker, missing)


def test_reset_offsets_of_an_unknown_group_is_refused_unless_asked_to_create_it(shared_broker, topic_name):
    AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    code, _, err, _ = cli("topic", "create", topic_name, "--partitions", "2", "-b",
                          shared_broker.bootstrap)
    assert code == 0, err
    group = topic_name + "-typo"
    code, out, err, _ = cli("group", "reset-offsets", group, "--topic", topic_name,
                            "--to-earliest", "-b", shared_broker.bootstrap)
    assert code == 1, (out, err)
    assert "group %s does not exist" % group in err and "--create-group" in err, err
    _, listed, _, _ = cli("group", "list", "-b", shared_broker.bootstrap)
    assert group not in listed
    code, out, err, _ = cli("group", "reset-offsets", group, "--topic", topic_name,
                            "--to-earliest", "--create-group", "-b", shared_broker.bootstrap)
    assert code == 0, err
    _, listed, _, _ = cli("group", "list", "-b", shared_broker.bootstrap)
    assert group in listed


def test_aborting_an_unknown_transactional_id_says_so_and_does_not_create_it(shared_broker, topic_name):
    txn_id = topic_name + "-no-such-txn"
    code, out, err, _ = cli("txn", "abort", txn_id, "-b", shared_broker.bootstrap)
    assert code == 1, (out, err)
    assert "transactional id %s does not exist" % txn_id in err, err
    code, listed, err, _ = cli("txn", "list", "-b", shared_broker.bootstrap)
    assert code == 0, err
    assert txn_id not in listed


def test_the_admin_port_by_mistake_fails_in_bounded_time_naming_the_address(shared_broker):
    address = "127.0.0.1:%d" % shared_broker.admin_port
    code, out, err, took = cli("topic", "list", "-b", address)
    assert code != 0, (out, err)
    assert address in err, err
    assert took < 40, "took %.0f s" % took
    # A port nobody listens on: refused at once, named.
    code, _, err, took = cli("topic", "list", "-b", "127.0.0.1:1")
    assert code != 0 and "127.0.0.1:1" in err and took < 15, err


def test_acl_create_warns_when_the_broker_enforces_no_acls(broker):
    code, out, err, _ = cli("acl", "create", "--topic", "audited", "--allow-principal",
                            "User:alice", "--operation", "read", "-b", broker.bootstrap)
    assert code == 0, err
    assert "created:" in out
    assert "enforces no ACLs" in err, err


def test_output_cut_short_by_a_closed_pipe_ends_quietly(shared_broker, topic_name):
    """`strata consume ... | head -1`: the CLI stops at the closed pipe like any Unix tool,
    with nothing on stderr (no panic, no error about the pipe)."""
    lines = "".join("line-%d\n" % i for i in range(20000))
    done = subprocess.run([str(strata_bin()), "produce", topic_name, "-b", shared_broker.bootstrap],
                          input=lines, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    piped = subprocess.run(["bash", "-c", '"$0" consume "$1" -e -b "$2" 2>"$3" | head -1',
                            str(strata_bin()), topic_name, shared_broker.bootstrap,
                            "/dev/stderr"], capture_output=True, text=True, timeout=60)
    assert piped.stdout.startswith("line-"), piped.stdout[:200]
    assert piped.stderr == "", piped.stderr
