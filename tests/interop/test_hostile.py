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
