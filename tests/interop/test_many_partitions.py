"""Issue #38: the partitions a node holds are not capped by its open-files limit. Each shard
keeps a bounded cache of open segment files, sized from RLIMIT_NOFILE; a file not recently read
or written is closed, and opened again when it is needed."""

import shutil
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka.admin import NewTopic

from clients import ck_admin, ck_consume_each, ck_produce_each, ck_watermarks_each
from conftest import strata_bin
from test_hostile import (MANY_PARTITIONS_CONSUMER, MANY_PARTITIONS_PRODUCER, SMALL_SEGMENTS,
                          _LimitedBroker, _assert_each, _assert_no_emfile, _metric_sum,
                          _metrics_text, _open_files, _open_files_limit, _resident_mib)

NOFILE = 4096
TOPICS = 5
PARTITIONS_PER_TOPIC = 5000
PARTITIONS = TOPICS * PARTITIONS_PER_TOPIC


def _partition(n):
    """The n-th of the 25,000 partitions: (topic, partition)."""
    return "many-%d" % (n // PARTITIONS_PER_TOPIC), n % PARTITIONS_PER_TOPIC


def _create_topics(broker, tick, timeout_s=300):
    """Creates many-0 .. many-4, one CreateTopics each; returns the seconds each took."""
    admin = ck_admin(broker.bootstrap, **{"socket.timeout.ms": timeout_s * 1000})
    took = []
    for t in range(TOPICS):
        name = "many-%d" % t
        started = time.monotonic()
        future = admin.create_topics(
            [NewTopic(name, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1,
                      config=SMALL_SEGMENTS)],
            operation_timeout=timeout_s, request_timeout=timeout_s)[name]
        deadline = started + timeout_s + 30
        while not future.done() and time.monotonic() < deadline:
            tick()
            time.sleep(1.0)
        assert future.done(), "CreateTopics of %s unanswered after %ds" % (name, timeout_s + 30)
        future.result(timeout=0)  # raises the topic's error, if any
        took.append(time.monotonic() - started)
    metadata = admin.list_topics(timeout=60)
    counts = {name: len(metadata.topics[name].partitions)
              for name in ("many-%d" % t for t in range(TOPICS)) if name in metadata.topics}
    assert counts == {"many-%d" % t: PARTITIONS_PER_TOPIC for t in range(TOPICS)}, counts
    return took


@pytest.mark.timeout(1500)
def test_25000_partitions_under_an_open_files_limit_of_4096_produce_consume_and_restart(
        tmp_path, capsys):
    """# issue #38, acceptance point 3

    25,000 partitions on one node under nofile=4096: each takes a record (acks=all) and serves
    it back to one consumer assigned to all of them, the broker's descriptors stay under the
    limit throughout (sampled each second, /proc/<pid>/fd) as does its gauge
    `strata_segment_files_open`, and it stops cleanly and starts again under the same limit with
    the records there (watermarks of 200 partitions across the range) and takes new ones (100
    partitions, read back after the old record).

    The partitions are five topics of 5,000 (many-0 .. many-4), created one CreateTopics each:
    the broker takes at most 10,000 partitions in one topic (PARTITIONS_PER_TOPIC_MAX), and
    each creation is bounded and timed on its own. `segment.bytes` is 64 KiB, where a segment's
    preallocation stops: whatever the preallocation policy, the test reserves at most 1.6 GB
    (a fixed 8 MiB ahead of each partition would be 195 GiB). Each phase's time is printed."""
    broker = _LimitedBroker(strata_bin(), tmp_path / "broker", NOFILE)
    peak = [0]

    def tick():
        peak[0] = max(peak[0], _open_files(broker))

    def phase(name, started, detail=""):
        tick()
        with capsys.disabled():
            print("\n25,000 partitions: %-28s %7.1f s  (descriptors %d, peak %d; RSS %d MiB)%s"
                  % (name, time.monotonic() - started, _open_files(broker), peak[0],
                     _resident_mib(broker), detail), flush=True)

    everything = [_partition(n) for n in range(PARTITIONS)]
    key = {_partition(n): b"p%d" % n for n in range(PARTITIONS)}
    try:
        started = time.monotonic()
        broker.start(timeout=60)
        assert _open_files_limit(broker) == NOFILE
        phase("start", started)

        started = time.monotonic()
        took = _create_topics(broker, tick)
        phase("create (5 x 5,000)", started, "; each " + ", ".join("%.1f s" % s for s in took))

        started = time.monotonic()
        delivered = ck_produce_each(broker.bootstrap,
                                    [(t, p, key[(t, p)], b"v") for t, p in everything],
                                    timeout=600, tick=tick,
                                    **dict(MANY_PARTITIONS_PRODUCER,
                                           **{"message.timeout.ms": 590000,
                                              "request.timeout.ms": 300000,
                                              "socket.timeout.ms": 300000}))
        phase("produce (acks=all)", started)
        _assert_each(delivered, {tp: [0] for tp in everything}, "delivered offsets")

        started = time.monotonic()
        got = ck_consume_each(broker.bootstrap, [(t, p, OFFSET_BEGINNING) for t, p in everything],
                              PARTITIONS, timeout=600, settle=3.0, tick=tick,
                              **MANY_PARTITIONS_CONSUMER)
        phase("consume", started)
        _assert_each(got, {tp: [(0, key[tp], b"v")] for tp in everything}, "records read")

        descriptors = _open_files(broker)
        assert descriptors < NOFILE and peak[0] < NOFILE, (descriptors, peak[0])
        metrics = _metrics_text(broker)
        assert "# TYPE strata_segment_files_open gauge" in metrics
        files_open = _metric_sum(metrics, "strata_segment_files_open")
        assert 0 < files_open <= NOFILE, files_open
        assert _metric_sum(metrics, "strata_partitions_offline") == 0, "no partition hit EMFILE"
        _assert_no_emfile(broker)

        started = time.monotonic()
        assert broker.terminate(grace=300) == (0, True), "a clean stop (exit 0 on SIGTERM)"
        stopped = time.monotonic() - started
        started = time.monotonic()
        broker.start(timeout=600)
        phase("restart", started, "; the stop before it %.1f s" % stopped)
        assert _open_files_limit(broker) == NOFILE

        sample = sorted({round(i * (PARTITIONS - 1) / 199) for i in range(200)})
        assert len(sample) == 200
        started = time.monotonic()
        marks = ck_watermarks_each(broker.bootstrap, [_partition(n) for n in sample], timeout=30)
        phase("watermarks of 200", started)
        _assert_each(marks, {_partition(n): (0, 1) for n in sample}, "watermarks after restart")

        again = [_partition(125 + 250 * i) for i in range(100)]
        started = time.monotonic()
        delivered = ck_produce_each(broker.bootstrap, [(t, p, b"again", b"v") for t, p in again],
                                    timeout=120, tick=tick, **MANY_PARTITIONS_PRODUCER)
        _assert_each(delivered, {tp: [1] for tp in again}, "delivered offsets after restart")
        got = ck_consume_each(broker.bootstrap, [(t, p, OFFSET_BEGINNING) for t, p in again],
                              200, timeout=120, settle=2.0, tick=tick, **MANY_PARTITIONS_CONSUMER)
        _assert_each(got, {tp: [(0, key[tp], b"v"), (1, b"again", b"v")] for tp in again},
                     "records read after restart")
        phase("produce + consume 100", started)
        descriptors = _open_files(broker)
        assert descriptors < NOFILE and peak[0] < NOFILE, (descriptors, peak[0])
        _assert_no_emfile(broker)
        assert broker.terminate(grace=300) == (0, True)
        # 25,000 partition directories: not kept after a pass (tmp_path keeps the last run's).
        shutil.rmtree(broker.data_dir, ignore_errors=True)
    finally:
        broker.kill()
