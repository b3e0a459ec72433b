"""Issue #6 acceptance 1 and 2: the idempotent producer never duplicates or reorders.

confluent-kafka (librdkafka) with enable.idempotence=true produces 200,000 numbered messages
(value = the number, 6 digits; partition = number % 4) to a 4-partition topic through
FaultyProxy (faulty_proxy.py), which drops Produce responses, resets connections, and
stalls live connections (no response goes back on them any more) so requests time out. The broker advertises the proxy's
address, so every client connection goes through it.

1. Faults only: every message is acknowledged without a delivery or fatal error, and the log
   holds each number exactly once: partition p holds exactly the numbers = p (mod 4), strictly
   increasing, at contiguous offsets from 0, and each number sits at the offset its delivery
   report gave.
2. The same run with the broker SIGKILLed and restarted twice mid-stream (behind the same
   proxy, on the same data dir and port): no number is in the log twice, every acknowledged
   number is in the log (at its acknowledged offset), per-partition order holds, and, as
   message.timeout.ms is long and the producer retries, all 200,000 end up acknowledged.

Both also check that the proxy injected every kind of fault, so neither can pass without
them. The proxy's seed is printed (set STRATA_PROXY_SEED to replay a fault schedule; thread
timing still varies; STRATA_RDKAFKA_DEBUG=eos,msg,protocol turns on librdkafka's debug log).
The log is read back through the proxy with faults switched off, and it is checked before the
producer's own errors are, so a failure shows what reached the log.
"""
import collections
import os
import random
import time

import confluent_kafka as ck
import pytest

from clients import ck_consumer
from conftest import Broker, _stop, strata_bin
from faulty_proxy import DROP, DROP_RESET, RESET, FaultyProxy
from test_acceptance import create_topic

N = 200_000
PARTITIONS = 4
MAX_OUTSTANDING = 20_000  # produced but not yet reported: keeps the stream going mid-kill
PRODUCE_DEADLINE_S = 75
# Produce responses between faults; a run has about 400-600 of them (~500-message batches).
FAULT_GAP = (4, 12)
MAX_DROPS = 2  # each costs REQUEST_TIMEOUT_MS (plus up to 1 s: librdkafka scans once a second)
REQUEST_TIMEOUT_MS = 3000


class ProxiedBroker(Broker):
    """A broker that advertises the proxy's address instead of its own."""

    advertise_port = None

    def command(self):
        cmd = super().command()
        cmd[cmd.index("--advertise") + 1] = "127.0.0.1:%d" % self.advertise_port
        return cmd


@pytest.fixture
def broker(tmp_path):
    """Named like conftest's fixture so a failure report carries the broker log tail."""
    seed = int(os.environ.get("STRATA_PROXY_SEED", random.randrange(1 << 32)))
    print("faulty proxy seed: %d" % seed)
    b = ProxiedBroker(strata_bin(), tmp_path / "broker")
    proxy = FaultyProxy(b.port, seed, gap=FAULT_GAP, max_drops=MAX_DROPS,
                        drop_quiet=REQUEST_TIMEOUT_MS / 1000 + 1.5)
    proxy.faults_enabled = False  # until the producer starts
    b.advertise_port = proxy.port
    b.proxy = proxy
    try:
        b.start()
        yield b
    finally:
        _stop(b)
        proxy.stop()


def produce_numbers(broker, topic, restart_at=()):
    """Produce 0..N-1 through the proxy; SIGKILL + restart the broker once the acknowledged
    count passes each value in restart_at. Returns (acked {number: (partition, offset)},
    stats, problems): the caller checks the log before failing on the producer's problems."""
    proxy = broker.proxy
    acked = {}
    twice = []
    failed = []
    fatal = []
    transient = collections.Counter()

    def on_error(err):
        if err.fatal():
            fatal.append(err)
        else:
            transient[err.name()] += 1

    def on_delivery(err, m):
        i = int(m.value())
        if err is not None:
            failed.append((i, err))
        elif i in acked:
            twice.append(i)
        else:
            acked[i] = (m.partition(), m.offset())

    p = ck.Producer({
        "bootstrap.servers": "127.0.0.1:%d" % proxy.port,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 500,
        "message.timeout.ms": 120_000,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "socket.timeout.ms": REQUEST_TIMEOUT_MS,  # librdkafka times in-flight requests out by this
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 1000,
        "queue.buffering.max.messages": 2 * MAX_OUTSTANDING,
        "error_cb": on_error,
        **({"debug": os.environ["STRATA_RDKAFKA_DEBUG"]} if os.environ.get("STRATA_RDKAFKA_DEBUG") else {}),
    })
    pending_restarts = sorted(restart_at)
    restarts = []  # (acknowledged, produced) at each SIGKILL
    pauses = random.Random(proxy.seed + 1)

    def maybe_restart():
        # In this thread: the broker runs under `setpriv --pdeathsig KILL`, which fires when
        # the *thread* that started it exits. librdkafka keeps working meanwhile.
        if pending_restarts and len(acked) >= pending_restarts[0]:
            pending_restarts.pop(0)
            restarts.append((len(acked), i))
            broker.kill()
            time.sleep(pauses.uniform(0.2, 1.0))  # down: the proxy resets new connections
            broker.start()

    started = time.monotonic()
    deadline = started + PRODUCE_DEADLINE_S
    stuck = None
    proxy.faults_enabled = True
    try:
        for i in range(N):
            while len(p) >= MAX_OUTSTANDING and not fatal and stuck is None:
                if time.monotonic() > deadline:
                    stuck = "stuck at %d produced, %d acknowledged" % (i, len(acked))
                p.poll(0.05)
                maybe_restart()
            if fatal or stuck:
                break
            p.produce(topic, value=b"%06d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
            if i % 500 == 0:
                p.poll(0)
                maybe_restart()
        while pending_restarts and not (fatal or stuck) and time.monotonic() < deadline:
            p.poll(0.05)  # the stream ended before a restart point
            maybe_restart()
        left = p.flush(max(1.0, deadline - time.monotonic()))
    finally:
        proxy.faults_enabled = False
    stats = dict(seed=proxy.seed, seconds=round(time.monotonic() - started, 1),
                 faults=dict(proxy.counts), produce_responses=proxy.produce_responses,
                 connections=proxy.connections, refused=proxy.refused,
                 restarts_at=restarts, acked=len(acked),
                 acked_without_offset=sum(1 for _p, o in acked.values() if o < 0),
                 transient_errors=dict(transient))
    print("produce stats: %r" % stats)
    problems = []
    if stuck:
        problems.append(stuck)
    if pending_restarts:
        problems.append("restarts not done: %r" % pending_restarts)
    if fatal:
        problems.append("fatal producer errors: %r" % fatal)
    if failed:
        problems.append("%d delivery errors, first: %r" % (len(failed), failed[:5]))
    if twice:
        problems.append("%d numbers reported delivered twice, first: %r" % (len(twice), twice[:5]))
    if left:
        problems.append("%d messages not delivered by the deadline" % left)
    return acked, stats, problems


def read_log(broker, topic, timeout=60):
    """{partition: [(offset, number)]} for offsets [low, high) of each partition, read through
    the proxy with faults off."""
    assert not broker.proxy.faults_enabled
    bootstrap = "127.0.0.1:%d" % broker.proxy.port
    c = ck_consumer(bootstrap, **{"fetch.max.bytes": 8 << 20,
                                  "max.partition.fetch.bytes": 4 << 20})
    try:
        marks = {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10, cached=False)
                 for p in range(PARTITIONS)}
        for p, (low, _high) in marks.items():
            assert low == 0, "partition %d starts at %d" % (p, low)
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = {p: [] for p in range(PARTITIONS)}
        todo = {p for p, (_low, high) in marks.items() if high > 0}
        deadline = time.monotonic() + timeout
        while todo:
            assert time.monotonic() < deadline, \
                "read %r of watermarks %r" % ({p: len(v) for p, v in got.items()}, marks)
            for m in c.consume(num_messages=10000, timeout=0.5):
                if m.error() is not None:
                    raise ck.KafkaException(m.error())
                p = m.partition()
                got[p].append((m.offset(), int(m.value())))
                if m.offset() + 1 >= marks[p][1]:
                    todo.discard(p)
        return got, marks
    finally:
        c.close()


def check_log(got, marks, acked, expect_all):
    where = {}  # number -> (partition, offset)
    dups = []
    for p, records in got.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(marks[p][1])), \
            "partition %d: offsets not contiguous from 0 to %d" % (p, marks[p][1])
        numbers = [n for _, n in records]
        wrong = [n for n in numbers if n % PARTITIONS != p]
        assert not wrong, "partition %d holds numbers of other partitions: %r" % (p, wrong[:5])
        for o, n in records:
            if n in where:
                dups.append((n, where[n], (p, o)))
            else:
                where[n] = (p, o)
        disorder = [(a, b) for a, b in zip(numbers, numbers[1:]) if b <= a]
        assert not disorder, "partition %d out of order at %d places, first: %r" \
            % (p, len(disorder), disorder[:10])
    assert not dups, "%d numbers in the log twice, first (n, first at, again at): %r" \
        % (len(dups), dups[:10])
    missing = sorted(set(acked) - set(where))
    assert not missing, "%d acknowledged numbers missing from the log, first: %r" \
        % (len(missing), missing[:10])
    moved = [(n, off, where[n]) for n, off in acked.items() if off[1] >= 0 and off != where[n]]
    assert not moved, "%d numbers not at their acknowledged (partition, offset), first " \
        "(n, acked, log): %r" % (len(moved), moved[:10])
    if expect_all:
        assert len(acked) == N, "only %d of %d acknowledged" % (len(acked), N)
        assert sorted(where) == list(range(N)), \
            "log holds %d numbers, %d unacknowledged" % (len(where), len(set(where) - set(acked)))
    return where


def check_producer(stats, problems):
    assert not problems, "producer: %s (%r)" % ("; ".join(problems), stats)
    assert stats["acked_without_offset"] == 0, \
        "acknowledged without an offset (a retry's original offset not returned?): %r" % stats
    f = stats["faults"]
    assert f[DROP_RESET] >= 3 and f[RESET] >= 3 and f[DROP] == MAX_DROPS, \
        "too few faults injected: %r" % stats


@pytest.mark.timeout(180)
def test_idempotent_producer_through_faulty_proxy_writes_each_number_once(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    acked, stats, problems = produce_numbers(broker, topic_name)
    got, marks = read_log(broker, topic_name)
    check_log(got, marks, acked, expect_all=not problems)
    check_producer(stats, problems)


@pytest.mark.timeout(180)
def test_idempotent_producer_survives_sigkill_mid_stream(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    acked, stats, problems = produce_numbers(broker, topic_name, restart_at=(70_000, 140_000))
    got, marks = read_log(broker, topic_name)
    # first: no duplicates, no acknowledged number missing, order per partition
    check_log(got, marks, acked, expect_all=not problems)
    # then: all 200,000 acknowledged, both restarts done, every kind of fault injected
    check_producer(stats, problems)
    assert len(stats["restarts_at"]) == 2
