"""Truncation (issue #16, acceptance 5), staged deterministically on three real brokers.

The leader L writes batches with acks=1 that one follower (H) copies and the other (N) never
sees, because N is frozen (SIGSTOP) while they are written. (A frozen process still receives
the answer to a fetch it had sent: a few "filler" records written first use that answer up,
so N has no fetch outstanding when the batches that diverge are written.) L is killed and N, the next member
of the ISR, becomes leader in a new epoch. H then holds batches of the old epoch that the new
leader never had: its replica fetch names the old epoch as its last fetched one, the leader
answers with the divergence point (DivergingEpoch), and H truncates to it. OffsetForLeaderEpoch,
the replica API a follower asks for the end of an epoch, is checked on the new leader directly.
When L comes back it truncates the same batches. Those batches were never below the high
watermark, so no consumer ever saw them and nothing acknowledged with acks=all is lost."""

import struct
import time

import pytest

import wire
from cluster import Cluster, metadata_from, wait_for
from test_replication import batches_on_disk, create_replicated, produce, read_all

pytestmark = pytest.mark.timeout(300)

# N stays registered and in the ISR while it is frozen: its session and the lag time are far
# longer than the few seconds it is stopped. L's death is noticed after the session timeout.
SESSION_MS = 12000
EXTRA = ["--set", "replica.lag.time.max.ms=120000",
         "--set", "broker.session.timeout.ms=%d" % SESSION_MS,
         "--set", "broker.heartbeat.interval.ms=500"]
ROLES = {1: "broker,controller", 2: "broker,controller", 3: "broker,controller",
         4: "controller", 5: "controller"}


def layout(node, topic):
    """(leader, isr in the controller's order) of partition 0, as `node` answers."""
    for t in metadata_from(node, [topic])["topics"]:
        if t["name"] == topic:
            for p in t["partitions"]:
                if p["partition"] == 0:
                    return p["leader"], list(p["isr"])
    return None


def epochs(batches):
    """The partition leader epoch of each batch (bytes 12-16 of its header)."""
    return [struct.unpack(">i", b[12:16])[0] for b in batches]


def base_offsets(batches):
    return [struct.unpack(">q", b[0:8])[0] for b in batches]


def end_of_epoch(node, topic, epoch):
    """OffsetForLeaderEpoch v2 asked of `node`: (error, epoch, end offset)."""
    body = wire.roundtrip(node.port, wire.offset_for_leader_epoch_v2_request(7, topic, 0, epoch))
    return wire.parse_offset_for_leader_epoch_v2(body)[(topic, 0)]


def latest(node, topic):
    """The end a consumer can read to on `node` (its high watermark), via confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:%d" % node.port, "group.id": "hw"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=EXTRA, roles=ROLES).start()
    yield c
    c.stop()


def test_a_follower_truncates_batches_of_an_old_epoch_the_new_leader_never_had(cluster):
    topic = "diverge"
    create_replicated(cluster.bootstrap, topic, 1, min_isr=2)
    wait_for(lambda: layout(cluster.nodes[1], topic) and len(layout(cluster.nodes[1], topic)[1]) == 3,
             30, "the topic with a full ISR")
    leader, isr = layout(cluster.nodes[1], topic)
    nxt = next(n for n in isr if n != leader)         # elected when the leader dies
    holder = next(n for n in isr if n not in (leader, nxt))
    L, N, H = cluster.nodes[leader], cluster.nodes[nxt], cluster.nodes[holder]

    base = [b"base-%03d" % i for i in range(50)]
    acked, failed = produce(cluster.bootstrap, topic, base)
    assert len(acked) == 50 and not failed, failed
    wait_for(lambda: all(len(batches_on_disk(n.data_dir, topic, 0)) == len(batches_on_disk(L.data_dir, topic, 0))
                         for n in (N, H)), 30, "both followers hold the base batches")
    old_epoch = epochs(batches_on_disk(L.data_dir, topic, 0))[-1]

    N.stop_process()
    try:
        frozen_at = time.monotonic()
        filler = [b"filler-%03d" % i for i in range(10)]
        acked, failed = produce("127.0.0.1:%d" % L.port, topic, filler,
                                **{"acks": "1", "enable.idempotence": False})
        assert len(acked) == 10 and not failed, failed
        time.sleep(1.0)  # N's outstanding fetch, if any, is answered with the filler
        lost = [b"lost-%03d" % i for i in range(30)]
        acked, failed = produce("127.0.0.1:%d" % L.port, topic, lost,
                                **{"acks": "1", "enable.idempotence": False})
        assert len(acked) == 30 and not failed, failed
        wait_for(lambda: any(b"lost-" in b for b in batches_on_disk(H.data_dir, topic, 0)), 10,
                 "the unfrozen follower copies the acks=1 batches")
        # N has not fetched them, so the high watermark stays below them: never readable.
        assert latest(L, topic) == 50
        cluster.kill(leader)
        assert time.monotonic() - frozen_at < SESSION_MS / 1000 - 2, "N was frozen too long"
    finally:
        N.continue_process()

    wait_for(lambda: (layout(N, topic) or (None,))[0] == nxt, SESSION_MS / 1000 + 30,
             "the next in-sync replica leads")
    # The new leader's answer for the old epoch is where it ends in its log: the divergence
    # point H truncates to (past the filler if N's last fetch brought it).
    error, epoch, end = end_of_epoch(N, topic, old_epoch)
    assert (error, epoch) == (0, old_epoch) and end in (50, 60), (error, epoch, end)
    kept = base + (filler if end == 60 else [])
    wait_for(lambda: not any(b"lost-" in b for b in batches_on_disk(H.data_dir, topic, 0)), 30,
             "the follower truncates the batches of the old epoch")

    after = [b"after-%03d" % i for i in range(40)]
    acked, failed = produce(cluster.bootstrap, topic, after)
    assert len(acked) == 40 and not failed, failed
    assert all(offset >= len(kept) for _, offset in acked.values())
    new_epoch = epochs(batches_on_disk(N.data_dir, topic, 0))[-1]
    assert new_epoch > old_epoch
    assert end_of_epoch(N, topic, new_epoch) == (0, new_epoch, len(kept) + 40)
    # An epoch past the current one is unknown (-1, -1), as Kafka answers.
    assert end_of_epoch(N, topic, new_epoch + 100) == (0, -1, -1)

    L.restart_after_kill()
    wait_for(lambda: len(layout(N, topic)[1]) == 3, 60, "the old leader rejoins the ISR")
    records, ends = read_all(cluster.bootstrap, topic, 1)
    values = sorted(records.values())
    assert values == sorted(kept + after), "read %d records, e.g. %r" % (len(values), values[:3])
    assert ends[0] == len(kept) + 40

    cluster.stop()
    copies = {n: batches_on_disk(cluster.nodes[n].data_dir, topic, 0) for n in (1, 2, 3)}
    assert copies[leader] == copies[nxt] == copies[holder], "replicas differ after truncation"
    assert not any(b"lost-" in b for b in copies[nxt])
    new_epochs = [e for e, o in zip(epochs(copies[nxt]), base_offsets(copies[nxt])) if o >= len(kept)]
    assert new_epochs and all(e > old_epoch for e in new_epochs), new_epochs
