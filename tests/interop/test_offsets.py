"""Committed offsets (the first part of issue #5): commits by both clients, read back, and
kept across a SIGKILL restart; an unknown group has no offsets and no error."""
import confluent_kafka as ck
import kafka
from kafka.structs import OffsetAndMetadata

from clients import ck_consumer, ck_produce, make_messages, kp_consumer
from test_acceptance import create_topic

T = 30


def committed(bootstrap, group, topic, partitions):
    c = ck_consumer(bootstrap, **{"group.id": group})
    try:
        result = c.committed([ck.TopicPartition(topic, p) for p in partitions], timeout=T)
        return {tp.partition: tp.offset for tp in result}
    finally:
        c.close()


def test_confluent_commits_survive_a_sigkill_restart_and_position_consumers(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    msgs = make_messages(100, prefix="offsets")
    ck_produce(broker.bootstrap, topic_name, msgs[:50], partition=0)
    ck_produce(broker.bootstrap, topic_name, msgs[50:], partition=1)
    group = topic_name + "-group"
    assert committed(broker.bootstrap, group, topic_name, [0, 1]) == {0: ck.OFFSET_INVALID, 1: ck.OFFSET_INVALID}

    c = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        c.commit(offsets=[ck.TopicPartition(topic_name, 0, 30), ck.TopicPartition(topic_name, 1, 40)],
                 asynchronous=False)
    finally:
        c.close()
    assert committed(broker.bootstrap, group, topic_name, [0, 1]) == {0: 30, 1: 40}

    broker.restart()  # SIGKILL, then start on the same data directory
    assert committed(broker.bootstrap, group, topic_name, [0, 1]) == {0: 30, 1: 40}

    # A consumer assigned without an explicit offset starts at the committed one.
    c = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        c.assign([ck.TopicPartition(topic_name, 0)])
        first = None
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                first = m
                break
        assert first is not None and first.offset() == 30
        assert first.value() == msgs[30][1]
    finally:
        c.close()


def test_kafka_python_commits_and_reads_back_with_metadata(shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, 1)
    group = topic_name + "-kp"
    c = kp_consumer(shared_broker.bootstrap, group_id=group)
    tp = kafka.TopicPartition(topic_name, 0)
    try:
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(5, "checkpoint-a", -1)})
        assert c.committed(tp) == 5
        metadata = c.committed(tp, metadata=True)
        assert metadata.offset == 5 and metadata.metadata == "checkpoint-a"
    finally:
        c.close()
    # The same group, seen from librdkafka.
    assert committed(shared_broker.bootstrap, group, topic_name, [0]) == {0: 5}


def test_unknown_group_has_no_offsets_and_no_error(shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, 1)
    assert committed(shared_broker.bootstrap, "never-seen-" + topic_name, topic_name, [0]) == {0: ck.OFFSET_INVALID}


def strata(*args):
    import subprocess
    from conftest import strata_bin
    out = subprocess.run([str(strata_bin()), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def lag_rows(bootstrap, group, topic):
    rows = {}
    for line in strata("group", "describe", group, "-b", bootstrap).splitlines():
        fields = line.split()
        if fields and fields[0] == topic:
            rows[int(fields[1])] = (fields[2], int(fields[3]), fields[4])
    return rows


def test_group_cli_and_metrics_show_lag_before_and_after_consuming(shared_broker, topic_name):
    import urllib.request
    create_topic(shared_broker.bootstrap, topic_name, 2)
    msgs = make_messages(100, prefix="lag")
    ck_produce(shared_broker.bootstrap, topic_name, msgs[:50], partition=0)
    ck_produce(shared_broker.bootstrap, topic_name, msgs[50:], partition=1)
    group = topic_name + "-lag"
    c = ck_consumer(shared_broker.bootstrap, **{"group.id": group})
    try:
        c.commit(offsets=[ck.TopicPartition(topic_name, 0, 30), ck.TopicPartition(topic_name, 1, 40)],
                 asynchronous=False)
    finally:
        c.close()
    assert lag_rows(shared_broker.bootstrap, group, topic_name) == {0: ("30", 50, "20"), 1: ("40", 50, "10")}
    assert group in strata("group", "list", "-b", shared_broker.bootstrap)
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % shared_broker.admin_port, timeout=10) as r:
        metrics = r.read().decode()
    assert 'strata_consumer_group_lag{group="%s",topic="%s",partition="0"} 20' % (group, topic_name) in metrics
    # "Consume" the rest by moving the group to the end: lag 0.
    strata("group", "reset-offsets", group, "--topic", topic_name, "--to-latest", "-b", shared_broker.bootstrap)
    assert lag_rows(shared_broker.bootstrap, group, topic_name) == {0: ("50", 50, "0"), 1: ("50", 50, "0")}
    strata("group", "reset-offsets", group, "--topic", topic_name, "--to-offset", "10", "-b", shared_broker.bootstrap)
    assert committed(shared_broker.bootstrap, group, topic_name, [0, 1]) == {0: 10, 1: 10}
    # By time: before every record, the first offset; after every record, the end.
    strata("group", "reset-offsets", group, "--topic", topic_name, "--to-timestamp", "0",
           "-b", shared_broker.bootstrap)
    assert committed(shared_broker.bootstrap, group, topic_name, [0, 1]) == {0: 0, 1: 0}
    strata("group", "reset-offsets", group, "--topic", topic_name, "--to-timestamp",
           "99999999999999", "-b", shared_broker.bootstrap)
    assert committed(shared_broker.bootstrap, group, topic_name, [0, 1]) == {0: 50, 1: 50}


def test_deleting_a_group_removes_its_offsets_durably(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    group = topic_name + "-del"
    c = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        c.commit(offsets=[ck.TopicPartition(topic_name, 0, 7)], asynchronous=False)
    finally:
        c.close()
    assert committed(broker.bootstrap, group, topic_name, [0]) == {0: 7}
    assert "deleted group" in strata("group", "delete", group, "-b", broker.bootstrap)
    assert committed(broker.bootstrap, group, topic_name, [0]) == {0: ck.OFFSET_INVALID}
    broker.restart()
    assert committed(broker.bootstrap, group, topic_name, [0]) == {0: ck.OFFSET_INVALID}, "the tombstone survives"
    assert group not in strata("group", "list", "-b", broker.bootstrap)


def test_offsets_of_groups_without_members_expire_after_the_retention(tmp_path, topic_name):
    import time
    from conftest import _stop, strata_bin
    from test_acceptance import TunedBroker
    b = TunedBroker(strata_bin(), tmp_path / "broker", ["--offsets-retention-ms", "2000"])
    b.start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        group = topic_name + "-expiring"
        c = ck_consumer(b.bootstrap, **{"group.id": group})
        try:
            c.commit(offsets=[ck.TopicPartition(topic_name, 0, 9)], asynchronous=False)
        finally:
            c.close()
        assert committed(b.bootstrap, group, topic_name, [0]) == {0: 9}
        deadline = time.monotonic() + 15
        while committed(b.bootstrap, group, topic_name, [0]) == {0: 9} and time.monotonic() < deadline:
            time.sleep(0.5)
        assert committed(b.bootstrap, group, topic_name, [0]) == {0: ck.OFFSET_INVALID}
        assert "expired committed offsets" in b.stderr_tail(200)
    finally:
        _stop(b)


def test_the_offsets_topic_is_compacted_and_replays_the_live_state(tmp_path, topic_name):
    import time
    from conftest import _stop, strata_bin
    from test_acceptance import TunedBroker
    b = TunedBroker(strata_bin(), tmp_path / "broker", ["--offsets-compact-bytes", "8192"])
    b.start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        group = topic_name + "-busy"
        c = ck_consumer(b.bootstrap, **{"group.id": group})
        try:
            for offset in range(300):  # ~300 commit records: well over 8 KiB
                c.commit(offsets=[ck.TopicPartition(topic_name, 0, offset)], asynchronous=False)
        finally:
            c.close()
        deadline = time.monotonic() + 15
        while "compacted committed offsets" not in b.stderr_tail(400) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "compacted committed offsets" in b.stderr_tail(400)
        assert committed(b.bootstrap, group, topic_name, [0]) == {0: 299}
        b.restart()  # SIGKILL: the replay starts at the compacted log start
        assert committed(b.bootstrap, group, topic_name, [0]) == {0: 299}
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % b.admin_port, timeout=10) as r:
            metrics = r.read().decode()
        starts = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                  if line.startswith('strata_log_start_offset{') and 'topic="__consumer_offsets"' in line]
        # Compaction runs whenever the partition passes 8 KiB, so it may run before the last
        # commits (then the log start is below their offsets): what matters is that it moved
        # (the superseded commits are gone) and that the replay above still answered 299.
        assert max(starts) > 0, "the log start never moved: %r" % starts
    finally:
        _stop(b)


def test_committed_leader_epochs_are_stored_and_returned(broker, topic_name):
    """KIP-320: OffsetCommit v6+ carries the leader epoch of the record before the offset, and
    OffsetFetch v5+ returns it (consumers use it to detect log truncation); strata dropped it
    and answered -1. It survives a SIGKILL restart (replayed from __consumer_offsets)."""
    create_topic(broker.bootstrap, topic_name, 2)
    group = topic_name + "-epochs"
    c = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        c.commit(offsets=[ck.TopicPartition(topic_name, 0, 30, leader_epoch=7),
                          ck.TopicPartition(topic_name, 1, 40)], asynchronous=False)
    finally:
        c.close()

    def epochs():
        c = ck_consumer(broker.bootstrap, **{"group.id": group})
        try:
            result = c.committed([ck.TopicPartition(topic_name, p) for p in (0, 1)], timeout=T)
            return {tp.partition: (tp.offset, tp.leader_epoch) for tp in result}
        finally:
            c.close()

    assert epochs() == {0: (30, 7), 1: (40, None)}
    broker.restart()
    assert epochs() == {0: (30, 7), 1: (40, None)}
