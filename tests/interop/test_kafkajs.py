"""KafkaJS (Node.js, pinned in tests/interop/js/package-lock.json, installed by
scripts/interop.sh into target/interop-js) against strata: its idempotent producer, plain and
gzip batches with headers, a consumer group that commits, the admin client's CreateTopics and
OffsetFetch, and two group members sharing a topic. KafkaJS speaks its own API versions
(Produce v7, Fetch v11, JoinGroup v5, ...), so this covers a third client family."""
import json
import os
import shutil
import subprocess

import pytest

from clients import ck_consume, ck_produce, ck_watermarks, make_messages
from conftest import REPO_ROOT
from test_acceptance import create_topic

NODE_MODULES = REPO_ROOT / "target" / "interop-js" / "node_modules"
SCRIPT = REPO_ROOT / "tests" / "interop" / "js" / "client.js"

pytestmark = pytest.mark.skipif(
    not (shutil.which("node") and (NODE_MODULES / "kafkajs").is_dir()),
    reason="node or the pinned kafkajs is missing (scripts/interop.sh installs it)")


def kafkajs(*args):
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), KAFKAJS_NO_PARTITIONER_WARNING="1")
    out = subprocess.run(["node", str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                         timeout=180, env=env)
    assert out.returncode == 0, "kafkajs failed:\n%s\n%s" % (out.stdout[-2000:], out.stderr[-4000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kafkajs_idempotent_produce_group_consume_and_commit(shared_broker, topic_name):
    n = 1000
    result = kafkajs("roundtrip", shared_broker.bootstrap, topic_name, topic_name + "-g", n)
    assert sorted(result["values"]) == sorted("value-%d" % i for i in range(n)), "each message once"
    # The log holds each message exactly once (the idempotent producer wrote no duplicates)...
    ends = [ck_watermarks(shared_broker.bootstrap, topic_name, p)[1] for p in range(3)]
    assert sum(ends) == n
    # ...and the group committed the end of every partition.
    assert sorted(result["committed"]) == [[p, ends[p]] for p in range(3)]
    # A record read back by confluent-kafka carries KafkaJS's key, value and header.
    first = ck_consume(shared_broker.bootstrap, topic_name, 1, partition=0)[0]
    assert first[0].startswith(b"key-") and first[1].startswith(b"value-")
    assert dict(first[2])["n"] == first[1][len(b"value-"):]


def test_two_kafkajs_members_share_a_topic(shared_broker, topic_name):
    n = 600
    create_topic(shared_broker.bootstrap, topic_name, 6)
    msgs = make_messages(n, prefix=topic_name, with_nulls=False)
    for partition in range(6):
        ck_produce(shared_broker.bootstrap, topic_name, msgs[partition::6], partition=partition)
    result = kafkajs("group", shared_broker.bootstrap, topic_name, topic_name + "-g", n)
    a, b = result["assigned"]
    assert a and b, "both members got partitions: %r" % result
    assert sorted(a + b) == list(range(6)), "every partition owned by exactly one member: %r" % result
    assert result["total"] >= n


def test_kafkajs_transactions_commit_abort_and_send_offsets(shared_broker, topic_name):
    """Issue #17, acceptance 6: KafkaJS's transactions (InitProducerId v1, AddPartitionsToTxn,
    AddOffsetsToTxn, TxnOffsetCommit, EndTxn at its own versions): a committed transaction's
    messages and offsets are visible, an aborted one's are not, to KafkaJS's read_committed
    consumer and to confluent-kafka's."""
    n = 200
    result = kafkajs("transactions", shared_broker.bootstrap, topic_name, topic_name + "-g", n)
    assert sorted(result["values"]) == sorted("committed-%d" % i for i in range(n))
    assert result["committed"] == [[0, 7], [1, -1]], "offsets of the committed transaction only"
    import confluent_kafka as ck
    reader = ck.Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name,
                          "isolation.level": "read_committed"})
    # Each partition: n/2 committed, one commit marker, n/2 aborted, one abort marker.
    for p in range(2):
        low, high = reader.get_watermark_offsets(ck.TopicPartition(topic_name, p), timeout=10)
        assert (low, high) == (0, n + 2)
    reader.close()
