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
