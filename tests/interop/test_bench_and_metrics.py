"""strata-bench against the real broker (every Kafka mode, JSON summary sanity) and /metrics
parsed with the Prometheus text-format parser after traffic (issue #4 acceptance 1 and 2)."""
import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clients import ck_produce, make_messages

ROOT = Path(__file__).resolve().parents[2]


def bench_bin():
    path = Path(os.environ.get("STRATA_BENCH_BIN", "target/debug/strata-bench"))
    path = path if path.is_absolute() else ROOT / path
    if not path.exists():
        pytest.fail("strata-bench not found at %s: build it (cargo build -p bench)" % path)
    return str(path)


def bench(broker, mode, *args):
    out = subprocess.run([bench_bin(), mode, "--bootstrap", broker.bootstrap, "--json", "--quiet",
                          "--cores", "1", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_bench_produce_consume_and_e2e_report_consistent_counts(shared_broker, topic_name):
    produced = bench(shared_broker, "produce", "--topic", topic_name, "--partitions", "4",
                     "--producers", "2", "--message-size", "200", "--duration", "2", "--acks", "1")
    assert produced["errors"] == 0 and produced["first_error"] is None
    n = produced["produced_messages"]
    assert n > 1000
    assert produced["produced_bytes"] == n * 200
    assert produced["latency_us"]["count"] == n, "every acknowledged message has a latency"
    assert 0 < produced["latency_us"]["p50"] <= produced["latency_us"]["p99"] <= produced["latency_us"]["max"]
    # The percentile ladder the plots draw: p50 to p99.99, non-decreasing, matching the summary.
    ladder = produced["percentiles"]
    assert [q for q, _ in ladder][0] == 0.5 and ladder[-1][0] == 0.9999
    assert all(a[1] <= b[1] for a, b in zip(ladder, ladder[1:])), ladder
    assert dict((q, v) for q, v in ladder)[0.99] == produced["latency_us"]["p99"]

    consumed = bench(shared_broker, "consume", "--topic", topic_name, "--consumers", "2",
                     "--messages", str(n), "--duration", "30")
    assert consumed["errors"] == 0
    assert consumed["consumed_messages"] == n, "consume mode reads back exactly what was produced"

    e2e = bench(shared_broker, "e2e", "--topic", topic_name + "-e2e", "--partitions", "2",
                "--rate", "2000", "--duration", "2", "--message-size", "100")
    assert e2e["errors"] == 0
    assert 3000 <= e2e["produced_messages"] <= 4400, "open loop holds the requested rate"
    assert e2e["consumed_messages"] == e2e["produced_messages"]
    assert e2e["latency_us"]["count"] == e2e["consumed_messages"]
    assert e2e["latency_us"]["p50"] > 0


def scrape(broker):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % broker.admin_port, timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def test_metrics_parse_and_latency_histograms_fill_after_traffic(shared_broker, topic_name):
    msgs = make_messages(500, prefix="metrics")
    ck_produce(shared_broker.bootstrap, topic_name, msgs, acks="all")
    text = scrape(shared_broker)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    latency = families["strata_request_latency_seconds"]
    assert latency.type == "histogram"
    counts = {}
    for sample in latency.samples:
        if sample.name.endswith("_count"):
            api = sample.labels["api"]
            counts[api] = counts.get(api, 0) + sample.value
    assert counts.get("Produce", 0) > 0 and counts.get("Metadata", 0) > 0, counts
    buckets = [s for s in latency.samples if s.name.endswith("_bucket") and s.labels["api"] == "Produce"]
    assert any(s.labels["le"] == "+Inf" and s.value > 0 for s in buckets)
    fsync = families["strata_fsync_latency_seconds"]
    assert sum(s.value for s in fsync.samples if s.name.endswith("_count")) > 0, "acks=all synced"
    messages_in = {s.labels["topic"]: s.value for s in families["strata_topic_messages_in"].samples}
    assert messages_in.get(topic_name) == 500
    ends = [s for s in families["strata_log_end_offset"].samples if s.labels["topic"] == topic_name]
    assert sum(s.value for s in ends) == 500
    assert urllib.request.urlopen("http://127.0.0.1:%d/health" % shared_broker.admin_port,
                                  timeout=10).read() == b"ok\n"
