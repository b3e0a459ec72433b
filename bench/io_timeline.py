#!/usr/bin/env python3
"""Where a produce load's disk time goes: records io_uring, block-layer and socket tracepoints
machine-wide for a few seconds (perf, as root) while a load runs, and prints how much of that
window the disk was busy, how many requests it held, how long the log's writes and fdatasyncs
took from submission to completion, and the bytes the shards read from their sockets.

Usage: bench/io_timeline.py [--seconds 1.5] [--trace FILE]
  Run it while a load runs (bench/run.sh's scenarios, strata-bench, rdkafka_performance), or
  give --trace a `perf script` text dump to analyse it again. Needs `perf` (linux-perf).

Reading it: the log's direct-I/O writes are the io_uring WRITE operations that complete with a
multiple of 4 KiB (socket writes are counted apart); "in flight" is the share of the window
with at least one submitted and not completed. A write that takes much longer from submission
to completion than the disk takes per request waited before reaching the disk (a write that
grows a file runs on an io_uring worker under the file's exclusive inode lock, so one file's
such writes run one at a time: "punted to io-wq" counts them)."""
import argparse
import re
import subprocess
import sys
import tempfile

EVENTS = ",".join([
    "io_uring:io_uring_submit_req", "io_uring:io_uring_complete", "io_uring:io_uring_queue_async_work",
    "block:block_rq_issue", "block:block_rq_complete", "syscalls:sys_exit_recvfrom",
])
LINE = re.compile(r"^\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)$")


def record(seconds):
    with tempfile.TemporaryDirectory() as scratch:
        data = scratch + "/perf.data"
        subprocess.run(["perf", "record", "-a", "-o", data, "-e", EVENTS, "--", "sleep", str(seconds)],
                       check=True, capture_output=True)
        return subprocess.run(["perf", "script", "-i", data], check=True, capture_output=True,
                              text=True).stdout.splitlines()


def occupancy(intervals, start, length):
    """(share of the window with at least one interval open, mean number open)."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    open_now, last, busy, area = 0, start, 0.0, 0.0
    for at, step in points:
        if open_now > 0:
            busy += at - last
        area += open_now * (at - last)
        open_now += step
        last = at
    return busy / length, area / length


def mean_ms(intervals):
    return 1000 * sum(e - s for s, e in intervals) / max(len(intervals), 1)


def analyse(lines):
    events = []
    for line in lines:
        match = LINE.match(line)
        if match:
            events.append((float(match.group(3)), match.group(1), match.group(4), match.group(5)))
    if not events:
        sys.exit("no events recorded: nothing did I/O in the window, or perf may not trace here (run as root)")
    events.sort()
    start, length = events[0][0], max(events[-1][0] - events[0][0], 1e-9)
    issued, disk, submitted = {}, [], {}
    writes, socket_writes, syncs = [], 0, []
    punted, received = 0, 0
    for at, comm, name, fields in events:
        if name == "block:block_rq_issue":
            sector = re.search(r"(\d+) \+ \d+", fields)
            if sector:
                issued[sector.group(1)] = at
        elif name == "block:block_rq_complete":
            sector = re.search(r"(\d+) \+ \d+", fields)
            if sector and sector.group(1) in issued:
                disk.append((issued.pop(sector.group(1)), at))
        elif name == "io_uring:io_uring_submit_req":
            req, op = re.search(r"req (\S+),", fields), re.search(r"opcode (\S+),", fields)
            if req and op:
                submitted[req.group(1)] = (at, op.group(1))
        elif name == "io_uring:io_uring_queue_async_work":
            punted += 1
        elif name == "io_uring:io_uring_complete":
            req, result = re.search(r"req (\S+),", fields), re.search(r"result (-?\d+)", fields)
            if not (req and result) or req.group(1) not in submitted:
                continue
            since, op = submitted.pop(req.group(1))
            bytes_done = int(result.group(1))
            if op.startswith("WRITE") and bytes_done >= 4096 and bytes_done % 4096 == 0:
                writes.append((since, at))
            elif op.startswith("WRITE") or op.startswith("SEND"):
                socket_writes += 1
            elif op == "FSYNC":
                syncs.append((since, at))
        elif name == "syscalls:sys_exit_recvfrom" and comm.startswith("shard"):
            value = re.search(r"(0x[0-9a-f]+|-?\d+)\s*$", fields)
            count = int(value.group(1), 0) if value else 0
            if 0 < count < 1 << 40:
                received += count
    busy, depth = occupancy(disk, start, length)
    print("window %.2f s" % length)
    print("disk: busy %.0f%% of the window, %.2f requests in flight on average, %d requests, %.2f ms each"
          % (100 * busy, depth, len(disk), mean_ms(disk)))
    busy, depth = occupancy(writes, start, length)
    print("log writes: in flight %.0f%% of the window, %.2f on average; %d writes, %.2f ms from submission "
          "to completion; %d io_uring operations punted to io-wq" % (100 * busy, depth, len(writes),
                                                                     mean_ms(writes), punted))
    busy, _ = occupancy(syncs, start, length)
    print("fdatasync: in flight %.0f%% of the window; %d, %.2f ms each" % (100 * busy, len(syncs), mean_ms(syncs)))
    busy, _ = occupancy(writes + syncs, start, length)
    print("a log write or an fdatasync in flight: %.0f%% of the window" % (100 * busy))
    print("socket writes (responses): %d; shards read %.0f MB from sockets: %.0f MB/s"
          % (socket_writes, received / 1e6, received / 1e6 / length))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--trace", help="a `perf script` text dump to analyse instead of recording")
    args = parser.parse_args()
    if args.trace:
        with open(args.trace) as f:
            analyse(f.read().splitlines())
    else:
        analyse(record(args.seconds))


if __name__ == "__main__":
    main()
