"""Issue #12 (hostile input, damaged files): each test is the attack as the issue describes it,
against the real binary, and each failed on the code before its fix (run with
STRATA_BIN=<an older build> to see it fail)."""

import os
import subprocess
import time

import pytest

import wire
from conftest import Broker, strata_bin


def _alive(broker):
    err, apis = wire.parse_api_versions_response(
        wire.roundtrip(broker.port, wire.api_versions_request(4242, 0)), 0)
    assert err == 0 and wire.API_VERSIONS in apis


@pytest.mark.timeout(60)
def test_a_second_broker_cannot_bind_the_port_of_a_running_one(tmp_path):
    """Item 5: every shard binds with SO_REUSEPORT, so a second broker (another data directory)
    used to start on the same port and take half of the connections."""
    first = Broker(strata_bin(), tmp_path / "first").start()
    try:
        second = Broker(strata_bin(), tmp_path / "second")
        second.port = first.port
        proc = subprocess.run(second.command(), capture_output=True, text=True, timeout=30)
        assert proc.returncode != 0, "the second broker started:\n" + proc.stderr[-2000:]
        assert "address already in use" in proc.stderr, proc.stderr[-2000:]
        assert " ready" not in proc.stderr
        for _ in range(20):
            _alive(first)  # every new connection still reaches the first broker
    finally:
        first.kill()


@pytest.mark.timeout(120)
def test_a_log_start_checkpoint_beyond_the_log_end_does_not_hide_the_records(tmp_path):
    """Item 10: a damaged log-start checkpoint past the end used to hide every record."""
    from clients import ck_consume, ck_produce, ck_watermarks, make_messages
    from test_bad_input import _create_topic
    broker = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        _create_topic(broker, "hidden")
        sent = make_messages(5000, with_nulls=False)
        ck_produce(broker.bootstrap, "hidden", sent, partition=0)
        code, _ = broker.terminate()
        assert code == 0
        checkpoint = broker.data_dir / "hidden-0" / "log-start-offset-checkpoint"
        checkpoint.write_text("0\n1\n0 999999999\n")
        broker.start()
        assert ck_watermarks(broker.bootstrap, "hidden") == (0, 5000)
        got = ck_consume(broker.bootstrap, "hidden", 5000)
        assert got == sent
        assert "log start checkpoint is beyond the log end" in broker.stderr_tail(400)
    finally:
        broker.kill()


@pytest.mark.timeout(120)
def test_a_partition_listed_2200_times_in_a_fetch_is_read_once(tmp_path):
    """Item 6: one partition listed 2,200 times with max_bytes=0 made the broker read the same
    data 2,200 times (a response of gigabytes, its frame length negative)."""
    from test_bad_input import _create_topic, _produce
    broker = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        _create_topic(broker, "amplified")
        batch = wire.record_batch([(b"k%d" % i, b"v" * 1000) for i in range(500)])
        assert _produce(broker, "amplified", batch)[0] == 0
        partition = wire.i32(0) + wire.i64(0) + wire.i32(1 << 20)
        topics = [wire.string("amplified") + wire.array([partition] * 2200)]
        body = (wire.i32(-1) + wire.i32(100) + wire.i32(1) + wire.i32(0) + wire.i8(0)
                + wire.array(topics))
        request = wire.frame(wire.request_header_v1(wire.FETCH, 4, 77) + body)
        assert len(request) < 40_000, "the attack is a small request"
        response = wire.roundtrip(broker.port, request, timeout=30)
        assert len(response) < 2 * len(batch), "answered %d bytes" % len(response)
        fetched = wire.parse_fetch_v4_response(response)
        assert list(fetched) == [("amplified", 0)]
        info = fetched[("amplified", 0)]
        assert info["error"] == 0 and info["high_watermark"] == 500
        assert info["records"] == batch[:12] + info["records"][12:], "the stored batch, once"
        assert len(info["records"]) == len(batch)
        _alive(broker)
    finally:
        broker.kill()


def _compressed_garbage_batch(codec_attribute=4, records=3, seed=7):
    """A batch with a valid CRC32C whose records section is random bytes under `codec`."""
    import random
    body = bytes(random.Random(seed).getrandbits(8) for _ in range(300))
    now = int(time.time() * 1000)
    after_crc = (wire.i16(codec_attribute) + wire.i32(records - 1) + wire.i64(now) + wire.i64(now)
                 + wire.i64(-1) + wire.i16(-1) + wire.i32(-1) + wire.i32(records) + body)
    import struct
    return (wire.i64(0) + wire.i32(4 + 1 + 4 + len(after_crc)) + wire.i32(0) + wire.i8(2)
            + struct.pack(">I", wire.crc32c(after_crc)) + after_crc)


@pytest.mark.timeout(120)
def test_internal_topics_refuse_client_produce_deletion_and_retention_changes(tmp_path):
    """Item 4: DeleteTopics on __consumer_offsets wiped every group's offsets, and a produced
    record with a forged key became a group's committed offset after a restart."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import ConfigResource, ResourceType
    from clients import ck_admin, ck_consumer
    from test_bad_input import _create_topic, _produce
    broker = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        _create_topic(broker, "data")
        consumer = ck_consumer(broker.bootstrap, **{"group.id": "keeper"})
        consumer.commit(offsets=[TopicPartition("data", 0, 42)], asynchronous=False)
        forged = wire.record_batch([(b"keeper\x00data\x000", struct_offset(7))])
        for partition in range(50):
            err = wire.parse_produce_v3_response(wire.roundtrip(broker.port, wire.produce_v3_request(
                5, "__consumer_offsets", partition, forged)))[("__consumer_offsets", partition)][0]
            assert err == 17, "a client batch into __consumer_offsets-%d answered %d" % (partition, err)
        admin = ck_admin(broker.bootstrap)
        future = admin.delete_topics(["__consumer_offsets"], request_timeout=10)["__consumer_offsets"]
        with pytest.raises(Exception):
            future.result(timeout=10)
        resource = ConfigResource(ResourceType.TOPIC, "__consumer_offsets",
                                  set_config={"retention.ms": "1000"})
        with pytest.raises(Exception):
            admin.alter_configs([resource], request_timeout=10)[resource].result(timeout=10)
        broker.restart()
        consumer = ck_consumer(broker.bootstrap, **{"group.id": "keeper"})
        committed = consumer.committed([TopicPartition("data", 0)], timeout=10)
        assert committed[0].offset == 42, "the group's offset survived (not forged, not wiped)"
        consumer.close()
    finally:
        broker.kill()


def struct_offset(offset):
    """strata's committed-offset record value: offset, commit time, metadata."""
    import struct
    return struct.pack(">qq", offset, int(time.time() * 1000))


@pytest.mark.timeout(120)
def test_an_undecodable_batch_in_consumer_offsets_does_not_keep_the_broker_from_starting(tmp_path):
    """Item 4: one undecodable batch in __consumer_offsets left the broker half-up on every
    later start (no ready). Replay now logs it, skips it, counts it, and starts."""
    broker = Broker(strata_bin(), tmp_path / "broker").start()
    try:
        code, _ = broker.terminate()
        assert code == 0
        partition_dir = broker.data_dir / "__consumer_offsets-0"
        segment = partition_dir / ("%020d.log" % 0)
        assert segment.stat().st_size == 0, "an empty partition"
        segment.write_bytes(_compressed_garbage_batch())
        (partition_dir / ".clean-shutdown").unlink()
        broker.start(timeout=30)
        _alive(broker)
        import urllib.request
        metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % broker.admin_port,
                                         timeout=10).read().decode()
        skipped = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                      if line.startswith("strata_offsets_replay_skipped_total{"))
        assert skipped >= 1, "the skipped batch is counted"
        assert "offsets replay skipped a batch" in broker.stderr_tail(400)
    finally:
        broker.kill()
