"""Consumer groups (issue #5, classic protocol): partitions shared by members with each
client-side assignor, rebalances when members leave or die, kafka-python interop, and the
coordinator's answers to commits from strangers."""
import collections
import os
import signal
import subprocess
import sys
import threading
import time

import confluent_kafka as ck
import kafka
import pytest

from clients import ck_produce, make_messages, wait_until
from conftest import Broker, _stop, strata_bin
from test_acceptance import TunedBroker, create_topic

N = 3000
PARTITIONS = 12


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    b = TunedBroker(strata_bin(), tmp_path_factory.mktemp("group-broker"),
                    ["--group-initial-rebalance-delay-ms", "300"])
    b.start()
    yield b
    _stop(b)


def fill(bootstrap, topic):
    create_topic(bootstrap, topic, PARTITIONS)
    msgs = make_messages(N, prefix=topic, with_nulls=False)
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (key, value, _) in enumerate(msgs):
        p.produce(topic, key=key, value=value, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    return {m[1] for m in msgs}


def ck_member(bootstrap, group, strategy, **extra):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "partition.assignment.strategy": strategy,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500}
    conf.update(extra)
    return ck.Consumer(conf)


def run_members(bootstrap, topic, strategy, members, stop_when):
    seen = collections.Counter()
    assignments = {}
    stop = threading.Event()
    errors = []

    def member(index):
        c = ck_member(bootstrap, topic, strategy)
        try:
            c.subscribe([topic])
            while not stop.is_set():
                m = c.poll(0.2)
                assignments[index] = sorted(tp.partition for tp in c.assignment())
                if m is None:
                    continue
                if m.error():
                    errors.append(m.error())
                    continue
                seen[m.value()] += 1
                c.commit(message=m, asynchronous=True)
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    def settled():
        owned = sorted(p for parts in assignments.values() for p in parts)
        return (stop_when(seen) and len(assignments) == members
                and all(assignments.get(i) for i in range(members)) and owned == list(range(PARTITIONS)))

    # Done when everything is consumed and the group has settled on a full, disjoint
    # assignment (a late member may still be joining when the last message is read).
    wait_until(settled, timeout=60, interval=0.2, message="members to consume and settle")
    final = {index: list(parts) for index, parts in assignments.items()}
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors[:3]
    return seen, final


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_share_twelve_partitions_and_consume_each_message_once(group_broker, topic_name, strategy):
    values = fill(group_broker.bootstrap, topic_name)
    seen, assignments = run_members(group_broker.bootstrap, topic_name, strategy, 3,
                                    lambda seen: sum(seen.values()) >= N)
    assert set(seen) == values and all(count == 1 for count in seen.values()), "each message exactly once"
    owned = [p for parts in assignments.values() for p in parts]
    assert sorted(owned) == list(range(PARTITIONS)), "every partition owned by exactly one member: %r" % assignments
    assert len(assignments) == 3 and all(parts for parts in assignments.values())


def test_a_member_that_closes_hands_its_partitions_over(group_broker, topic_name):
    fill(group_broker.bootstrap, topic_name)
    first = ck_member(group_broker.bootstrap, topic_name, "range")
    second = ck_member(group_broker.bootstrap, topic_name, "range")
    try:
        first.subscribe([topic_name])
        second.subscribe([topic_name])

        def split():
            for c in (first, second):
                c.poll(0.1)
            return len(first.assignment()) == 6 and len(second.assignment()) == 6

        wait_until(split, timeout=30, interval=0.1, message="two members with 6 partitions each")
        second.close()
        second = None

        def took_over():
            first.poll(0.1)
            return len(first.assignment()) == PARTITIONS

        wait_until(took_over, timeout=30, interval=0.1, message="the remaining member to own all partitions")
    finally:
        first.close()
        if second is not None:
            second.close()


MEMBER_SCRIPT = r"""
import sys, confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 6000,
                 "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
                 "partition.assignment.strategy": "range"})
c.subscribe([sys.argv[3]])
announced = False
while True:
    c.poll(0.1)
    if c.assignment() and not announced:
        print("ASSIGNED", len(c.assignment()), flush=True)
        announced = True
"""


def test_a_sigkilled_member_is_evicted_after_its_session_timeout(group_broker, topic_name):
    fill(group_broker.bootstrap, topic_name)
    child = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, group_broker.bootstrap, topic_name, topic_name],
                             stdout=subprocess.PIPE, text=True)
    survivor = ck_member(group_broker.bootstrap, topic_name, "range")
    try:
        line = child.stdout.readline()
        assert line.startswith("ASSIGNED"), line
        survivor.subscribe([topic_name])

        def shared():
            survivor.poll(0.1)
            return 0 < len(survivor.assignment()) < PARTITIONS

        wait_until(shared, timeout=30, interval=0.1, message="the partitions to be shared")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed_at = time.monotonic()

        def took_over():
            survivor.poll(0.1)
            return len(survivor.assignment()) == PARTITIONS

        wait_until(took_over, timeout=40, interval=0.1, message="eviction of the killed member")
        assert time.monotonic() - killed_at >= 3, "evicted by session timeout, not at once"
    finally:
        survivor.close()
        if child.poll() is None:
            child.kill()


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_kafka_python_group_members_share_partitions(group_broker, topic_name, strategy):
    values = fill(group_broker.bootstrap, topic_name)
    assignor = {"range": kafka.coordinator.assignors.range.RangePartitionAssignor,
                "roundrobin": kafka.coordinator.assignors.roundrobin.RoundRobinPartitionAssignor}[strategy]
    seen = collections.Counter()
    assignments = {}
    stop = threading.Event()

    def member(index):
        c = kafka.KafkaConsumer(topic_name, bootstrap_servers=group_broker.bootstrap, group_id=topic_name,
                                partition_assignment_strategy=[assignor], auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                                api_version_auto_timeout_ms=15000)
        try:
            while not stop.is_set():
                for records in c.poll(timeout_ms=200).values():
                    for r in records:
                        seen[r.value] += 1
                assignments[index] = sorted(tp.partition for tp in c.assignment())
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    def settled():
        owned = sorted(p for parts in list(assignments.values()) for p in parts)
        return sum(seen.values()) >= N and len(assignments) == 2 and owned == list(range(PARTITIONS))

    wait_until(settled, timeout=60, interval=0.2, message="kafka-python members to consume and settle")
    final = {index: list(parts) for index, parts in assignments.items()}
    stop.set()
    for t in threads:
        t.join(30)
    assert set(seen) == values and all(c == 1 for c in seen.values())
    assert all(final.values()), "both members own partitions: %r" % final


def test_a_static_member_that_restarts_within_its_session_gets_its_partitions_back_without_a_rebalance(
        group_broker, topic_name):
    fill(group_broker.bootstrap, topic_name)
    assigns = collections.Counter()

    def static_member(instance, name):
        c = ck_member(group_broker.bootstrap, topic_name, "range",
                      **{"group.instance.id": instance, "session.timeout.ms": 20000})
        c.subscribe([topic_name], on_assign=lambda consumer, parts: assigns.update([name]))
        return c

    a = static_member("static-a", "a")
    b = static_member("static-b", "b")
    try:
        def split():
            for c in (a, b):
                c.poll(0.1)
            return len(a.assignment()) == 6 and len(b.assignment()) == 6

        wait_until(split, timeout=30, interval=0.1, message="two static members with 6 partitions each")
        before = sorted(tp.partition for tp in a.assignment())
        b_assigns = assigns["b"]
        a.close()  # a static member leaves no LeaveGroup behind: its place is kept
        a = static_member("static-a", "a-again")

        def back():
            a.poll(0.1)
            b.poll(0.1)
            return len(a.assignment()) == 6

        wait_until(back, timeout=30, interval=0.1, message="the restarted static member to get partitions")
        assert sorted(tp.partition for tp in a.assignment()) == before, "the same partitions come back"
        for _ in range(10):
            b.poll(0.1)
        assert assigns["b"] == b_assigns, "the other member was not rebalanced"
    finally:
        a.close()
        b.close()


def test_a_closed_static_members_group_can_be_deleted_as_soon_as_its_session_ends(group_broker, topic_name):
    """librdkafka's 0081 closes static members (they send no LeaveGroup) and deletes their
    groups one second after the session timeout. Kafka expires a session on a precise timer,
    so the group is Empty by then: strata's group timers run before it answers, not only on its
    100 ms timer task (which answered NON_EMPTY_GROUP for a DeleteGroups within one tick)."""
    from confluent_kafka.admin import AdminClient
    fill(group_broker.bootstrap, topic_name)
    session_ms = 6000
    c = ck_member(group_broker.bootstrap, topic_name, "range",
                  **{"group.instance.id": "static-closed", "session.timeout.ms": session_ms})
    c.subscribe([topic_name])
    got = []
    wait_until(lambda: got.append(c.poll(0.1)) or (any(m is not None and not m.error() for m in got)
                                                  and len(c.assignment()) == PARTITIONS),
               timeout=30, interval=0.1, message="the static member's assignment and a message")
    c.commit(asynchronous=False)  # a commit counts as a heartbeat (Kafka's rule too)
    c.close()  # a static member sends no LeaveGroup: the session ends session_ms after the commit
    closed = time.monotonic()
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    described = admin.describe_consumer_groups([topic_name])[topic_name].result(timeout=10)
    assert len(described.members) == 1, "the member stays for its session"
    time.sleep(max(0.0, closed + session_ms / 1000 + 0.03 - time.monotonic()))
    admin.delete_consumer_groups([topic_name])[topic_name].result(timeout=10)
    assert topic_name not in {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}


def test_after_a_member_leaves_mid_stream_no_committed_message_is_skipped(group_broker, topic_name):
    values = fill(group_broker.bootstrap, topic_name)
    seen = collections.Counter()
    first = ck_member(group_broker.bootstrap, topic_name, "range")
    second = ck_member(group_broker.bootstrap, topic_name, "range")
    try:
        first.subscribe([topic_name])
        second.subscribe([topic_name])

        def consume(c):
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                seen[m.value()] += 1
                try:
                    c.commit(message=m, asynchronous=False)  # committed only once processed
                except ck.KafkaException as error:
                    # During a rebalance the commit is refused (as in Kafka); the message is
                    # then delivered again, which is allowed: only skipping is not.
                    assert error.args[0].code() in (ck.KafkaError.REBALANCE_IN_PROGRESS,
                                                    ck.KafkaError.ILLEGAL_GENERATION,
                                                    ck.KafkaError.UNKNOWN_MEMBER_ID), error

        # Both consume until the second has handled a part of its share, then it leaves.
        deadline = time.monotonic() + 60
        while sum(seen.values()) < N // 3 and time.monotonic() < deadline:
            consume(first)
            consume(second)
        second.close()
        second = None
        while set(seen) != values and time.monotonic() < deadline:
            consume(first)
        missing = values - set(seen)
        assert not missing, "%d messages were skipped after the handover" % len(missing)
    finally:
        first.close()
        if second is not None:
            second.close()


def describe_group(bootstrap, group):
    admin = ck.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=15)


def test_a_stable_group_survives_a_coordinator_sigkill_restart_without_a_rebalance(tmp_path, topic_name):
    """Group metadata (generation, members, assignments) is a record in __consumer_offsets, kept
    by its compaction: after a SIGKILL restart the group is Stable with the same members, and
    members that keep heartbeating are not rebalanced."""
    b = TunedBroker(strata_bin(), tmp_path / "broker",
                    ["--group-initial-rebalance-delay-ms", "300", "--offsets-compact-bytes", "8192"])
    b.start()
    assigns = collections.Counter()
    members = []
    try:
        fill(b.bootstrap, topic_name)
        for name in ("a", "b"):
            c = ck_member(b.bootstrap, topic_name, "range", **{"session.timeout.ms": 20000})
            c.subscribe([topic_name], on_assign=lambda consumer, parts, name=name: assigns.update([name]))
            members.append(c)

        def split():
            for c in members:
                c.poll(0.1)
            return all(len(c.assignment()) == 6 for c in members)

        wait_until(split, timeout=30, interval=0.1, message="two members with 6 partitions each")
        # Enough commits to compact the group's __consumer_offsets partition: the rewrite must
        # carry the group's metadata record along with the live offsets.
        for round_ in range(40):
            for c in members:
                c.commit(offsets=[ck.TopicPartition(topic_name, tp.partition, round_) for tp in c.assignment()],
                         asynchronous=False)
        wait_until(lambda: "compacted committed offsets" in b.stderr_tail(400), timeout=15, interval=0.3,
                   message="the offsets partition to be compacted")
        before = describe_group(b.bootstrap, topic_name)
        assert before.state == ck.ConsumerGroupState.STABLE
        ids = sorted(m.member_id for m in before.members)
        assigned = {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
                    for m in before.members}
        counts = dict(assigns)

        b.restart()  # SIGKILL, then the same data directory

        after = describe_group(b.bootstrap, topic_name)
        assert after.state == ck.ConsumerGroupState.STABLE, after.state
        assert sorted(m.member_id for m in after.members) == ids
        assert {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
                for m in after.members} == assigned
        deadline = time.monotonic() + 4  # several heartbeat intervals against the new process
        while time.monotonic() < deadline:
            for c in members:
                c.poll(0.1)
        assert dict(assigns) == counts, "no member was rebalanced"
        assert all(len(c.assignment()) == 6 for c in members)
        settled = describe_group(b.bootstrap, topic_name)
        assert settled.state == ck.ConsumerGroupState.STABLE
        assert sorted(m.member_id for m in settled.members) == ids
    finally:
        for c in members:
            c.close()
        _stop(b)


def test_a_group_left_empty_stays_empty_after_a_restart(tmp_path, topic_name):
    """The Empty state is stored too: a group whose members all left comes back Empty with its
    committed offsets, and a deleted group does not come back."""
    b = TunedBroker(strata_bin(), tmp_path / "broker", ["--group-initial-rebalance-delay-ms", "300"])
    b.start()
    try:
        fill(b.bootstrap, topic_name)
        c = ck_member(b.bootstrap, topic_name, "range")
        c.subscribe([topic_name])
        got = []
        wait_until(lambda: got.append(c.poll(0.1)) or any(m is not None and not m.error() for m in got),
                   timeout=30, interval=0.05, message="a member that consumed")
        c.commit(asynchronous=False)
        c.close()  # LeaveGroup: the group becomes Empty
        wait_until(lambda: describe_group(b.bootstrap, topic_name).state == ck.ConsumerGroupState.EMPTY,
                   timeout=15, interval=0.2, message="the group to be Empty")
        time.sleep(0.3)  # the coordinator's tick stores the Empty state within 100 ms
        b.restart()
        after = describe_group(b.bootstrap, topic_name)
        assert after.state == ck.ConsumerGroupState.EMPTY and not after.members
        admin = ck.admin.AdminClient({"bootstrap.servers": b.bootstrap})
        admin.delete_consumer_groups([topic_name])[topic_name].result(timeout=15)
        b.restart()
        gone = describe_group(b.bootstrap, topic_name)
        assert gone.state == ck.ConsumerGroupState.DEAD and not gone.members
    finally:
        _stop(b)


def _offset_delete(port, group, topics):
    """OffsetDelete v0 over a raw socket (no Python client has it; librdkafka's test 0081 drives
    it through the C API): {topic: [partition]} -> (error_code, {(topic, partition): code})."""
    import wire
    body = wire.string(group) + wire.array(
        [wire.string(t) + wire.array([wire.i32(p) for p in ps]) for t, ps in topics.items()])
    answer = wire.Reader(wire.roundtrip(port, wire.frame(wire.request_header_v1(47, 0, 5) + body)))
    error = answer.i16()
    answer.i32()  # throttle time
    result = answer.array(lambda r: (r.string(), r.array(lambda r: (r.i32(), r.i16()))))
    return error, {(t, p): code for t, parts in result for p, code in parts}


def test_offset_delete_on_a_group_with_members_spares_subscribed_topics(group_broker, topic_name):
    """OffsetDelete (KIP-496) while a confluent-kafka consumer is a member: the offsets of a
    topic no member is subscribed to are deleted; a subscribed topic's partitions answer
    GROUP_SUBSCRIBED_TO_TOPIC (86) and keep their offsets; an unknown partition answers
    UNKNOWN_TOPIC_OR_PARTITION (3). strata refused the whole request with NON_EMPTY_GROUP."""
    from confluent_kafka import TopicPartition

    bootstrap = group_broker.bootstrap
    subscribed, other = topic_name, topic_name + "-other"
    create_topic(bootstrap, subscribed, 1)
    create_topic(bootstrap, other, 1)
    ck_produce(bootstrap, subscribed, make_messages(5, with_nulls=False), partition=0)
    group = topic_name + "-g"
    member = ck_member(bootstrap, group, "range")
    try:
        member.subscribe([subscribed])
        wait_until(lambda: member.poll(0.2) is not None and member.assignment(), timeout=30,
                   message="the member joins")
        member.commit(offsets=[TopicPartition(subscribed, 0, 3), TopicPartition(other, 0, 4)],
                      asynchronous=False)
        error, codes = _offset_delete(group_broker.port, group,
                                      {subscribed: [0], other: [0, 7], "no-such-topic": [0]})
        assert error == 0
        assert codes == {(subscribed, 0): 86, (other, 0): 0, (other, 7): 3, ("no-such-topic", 0): 3}, codes
        committed = member.committed([TopicPartition(subscribed, 0), TopicPartition(other, 0)], timeout=10)
        assert [tp.offset for tp in committed] == [3, ck.OFFSET_INVALID]
    finally:
        member.close()
    # Once the group is empty, the subscribed topic's offsets go too.
    error, codes = _offset_delete(group_broker.port, group, {subscribed: [0]})
    assert (error, codes) == (0, {(subscribed, 0): 0})
