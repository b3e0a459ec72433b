#!/usr/bin/env python3
"""Before/after figures for a hot-path change: the same strata-bench scenarios against two
builds of strata, alternated round by round (A B A B ...) so that drift of this shared
machine falls on both, with fio measured in the same run. Prints one line per scenario with
each round's figure and the medians, and their ratio.

Usage: bench/compare.py BEFORE_DIR AFTER_DIR [--rounds 3] [--dir SCRATCH]
  each DIR holds a release `strata` and `strata-bench` (e.g. target/release of two commits).
Scenarios (issue: "strata-bench figures before and after"): produce 100 B acks=1 (1 partition,
64 KiB batches), 1 KiB acks=1 (~1 MB batches), 1 KiB acks=all (16 partitions, 8 producers,
128 KiB batches), and consume 1 KiB from the start of the log (the disk read path)."""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_report import fio_write_mib_s  # noqa: E402

SCENARIOS = [
    ("produce 100 B acks=1", "messages_per_second", "msgs/s",
     ["produce", "--topic", "p100", "--partitions", "1", "--message-size", "100",
      "--batch-bytes", "65536", "--acks", "1", "--duration", "6", "--warmup", "1"]),
    ("produce 1 KiB acks=1", "megabytes_per_second", "MB/s",
     ["produce", "--topic", "p1k", "--partitions", "1", "--message-size", "1024",
      "--batch-bytes", "1000000", "--acks", "1", "--duration", "6", "--warmup", "1"]),
    ("produce 1 KiB acks=all", "megabytes_per_second", "MB/s",
     ["produce", "--topic", "pall", "--partitions", "16", "--producers", "8", "--message-size",
      "1024", "--batch-bytes", "131072", "--acks", "all", "--duration", "6", "--warmup", "1"]),
    ("consume 1 KiB from the start", "megabytes_per_second", "MB/s",
     ["consume", "--topic", "p1k", "--from", "beginning", "--duration", "5"]),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_build(build, scratch):
    """Every scenario once against a fresh broker of `build`; {scenario: figure}."""
    data = os.path.join(scratch, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    port, admin = free_port(), free_port()
    log = open(os.path.join(scratch, "broker.log"), "w")
    # A cache too small to hold the produced log, so the consume scenario reads from disk.
    broker = subprocess.Popen([os.path.join(build, "strata"), "serve", "--data-dir", data,
                               "--listen", "127.0.0.1:%d" % port, "--admin-listen",
                               "127.0.0.1:%d" % admin, "--set", "log.cache.bytes=16777216"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while "ready" not in open(log.name).read():
            if time.time() > deadline or broker.poll() is not None:
                raise RuntimeError("broker did not start: " + open(log.name).read()[-2000:])
            time.sleep(0.1)
        figures = {}
        for name, field, _, args in SCENARIOS:
            out = subprocess.run([os.path.join(build, "strata-bench"), args[0], "--bootstrap",
                                  "127.0.0.1:%d" % port, "--json", "--quiet", *args[1:]],
                                 capture_output=True, text=True, timeout=300)
            if out.returncode != 0:
                raise RuntimeError("%s: %s" % (name, out.stderr[-1000:]))
            figures[name] = json.loads(out.stdout.strip().splitlines()[-1])[field]
        return figures
    finally:
        broker.send_signal(signal.SIGKILL)
        broker.wait()
        shutil.rmtree(data, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=os.path.join(os.getcwd(), "target", "bench-compare"))
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    fio = fio_write_mib_s(os.path.join(args.dir, "fio")) * 1.048576
    results = {"before": [], "after": []}
    for _ in range(args.rounds):
        for label in ("before", "after"):
            results[label].append(run_build(getattr(args, label), args.dir))
    print("fio O_DIRECT sequential write, same run: %.0f MB/s" % fio)
    for name, _, unit, _ in SCENARIOS:
        before = [r[name] for r in results["before"]]
        after = [r[name] for r in results["after"]]
        b, a = statistics.median(before), statistics.median(after)
        print("%-30s before %s, after %s %s; medians %.0f -> %.0f (%.2fx)" % (
            name, " / ".join("%.0f" % x for x in before), " / ".join("%.0f" % x for x in after),
            unit, b, a, a / b if b else float("nan")))


if __name__ == "__main__":
    main()
