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
