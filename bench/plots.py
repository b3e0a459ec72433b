#!/usr/bin/env python3
"""Draws the benchmark plots shown in BENCHMARKS.md (issue #40) from the figures the last run
kept in `benchmarks/data/` (`broker.json` from bench/run_report.py, `replication.json` from
bench/replication.py), and rewrites the plots section of BENCHMARKS.md (between its markers)
to show them:
- `benchmarks/latency_percentiles.png`: latency by percentile, p50 to p99.99, both axes log
  (HDR style): acks=1, acks=all and e2e from the broker run, RF=1 and RF=3 at the fixed rate
  from the replication run;
- `benchmarks/throughput.png`: MB/s of every broker scenario against fio write and read
  measured in the same run;
- `benchmarks/replication.png`: RF=1 against RF=3, peak MB/s against fio, and p50 / p99 / p99.9
  at the fixed rate.

matplotlib comes from the bench's own environment (bench/requirements.txt, target/bench-venv,
built by bench/run.sh); this module imports it only when it draws, so the benchmark scripts can
import it where matplotlib is missing and carry on without plots.

Usage: bench/plots.py               redraw from benchmarks/data/*.json and rewrite BENCHMARKS.md
       bench/plots.py --self-test   draw synthetic data into a temporary directory and check it"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import sys
import tempfile

BEGIN = "<!-- plots:begin -->"
END = "<!-- plots:end -->"
HEADING = "## Plots (`bench/run.sh`)"
DPI = 110
# The percentiles a curve's x axis is labelled with, as 1 / (1 - q).
TICKS = ((0.5, "50%"), (0.9, "90%"), (0.99, "99%"), (0.999, "99.9%"), (0.9999, "99.99%"))
# What an old strata-bench (before `percentiles`) still reports in `latency_us`.
FALLBACK_QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))
LATENCY_PNG = "latency_percentiles.png"
THROUGHPUT_PNG = "throughput.png"
REPLICATION_PNG = "replication.png"


# ---- figures out of strata-bench's JSON (no matplotlib needed) ----

def ladder(result):
    """A strata-bench result's [quantile, microseconds] pairs: its `percentiles`, or, from a
    binary that predates them, the few quantiles of `latency_us`; [] when it has neither (it
    never raises: a benchmark calls it mid-run)."""
    try:
        return _ladder(result)
    except (AttributeError, KeyError, TypeError, ValueError):
        return []


def _ladder(result):
    if result.get("percentiles"):
        return [[float(q), round(float(us), 1)] for q, us in result["percentiles"]]
    latency = result.get("latency_us", {})
    return [[q, float(latency[key])] for key, q in FALLBACK_QUANTILES if key in latency]


def median_ladder(results):
    """Quantile by quantile, the median over several runs' ladders (the quantiles all share)."""
    ladders = [dict((q, us) for q, us in ladder(r)) for r in results]
    if not ladders:
        return []
    shared = set(ladders[0]).intersection(*ladders[1:])
    return [[q, round(statistics.median(l[q] for l in ladders), 1)] for q in sorted(shared)]


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def write_data(root, name, data):
    """Writes `benchmarks/data/<name>.json` under `root` (the directory of BENCHMARKS.md)."""
    directory = os.path.join(root, "benchmarks", "data")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name + ".json"), "w") as f:
        text = json.dumps(data, indent=1, sort_keys=True)
        # one [quantile, microseconds] pair a line
        f.write(re.sub(r"\[\s+([-+.\deE]+),\s+([-+.\deE]+)\s+\]", r"[\1, \2]", text) + "\n")


def read_data(root, name):
    path = os.path.join(root, "benchmarks", "data", name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


# ---- drawing ----

def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None}, bbox_inches="tight")
    fig.clf()
    _pyplot().close(fig)


def latency_percentiles(curves, path):
    """One line per curve, `curves` a list of {"label", "percentiles": [[q, us], ...]}: x is
    1 / (1 - q) on a log axis labelled as percentiles, y the latency in ms on a log axis."""
    plt = _pyplot()
    from matplotlib.ticker import FixedLocator, FixedFormatter, FuncFormatter, NullLocator
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for curve in curves:
        points = [(q, us) for q, us in curve["percentiles"] if 0 < q < 1 and us > 0]
        if not points:
            continue
        ax.plot([1 / (1 - q) for q, _ in points], [us / 1000.0 for _, us in points],
                marker="o", markersize=3.5, linewidth=1.6, label=curve["label"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1.6, 1.6e4)
    ax.xaxis.set_major_locator(FixedLocator([1 / (1 - q) for q, _ in TICKS]))
    ax.xaxis.set_major_formatter(FixedFormatter([label for _, label in TICKS]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: "%g" % value))
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title("Latency by percentile")
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", axis="y", alpha=0.15)
    ax.legend(loc="upper left", fontsize=8.5)
    _save(fig, path)


def throughput_bars(bars, fio_write, fio_read, path):
    """Horizontal bars, `bars` a list of {"label", "mb_s", "kind": "write" | "read"}, with fio's
    sequential write and read (MB/s, the same run) as vertical lines."""
    plt = _pyplot()
    bars = [bar for bar in bars if bar.get("mb_s") is not None]
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.36 * max(len(bars), 1)))
    colours = {"write": "tab:blue", "read": "tab:green"}
    positions = list(range(len(bars)))[::-1]
    ax.barh(positions, [bar["mb_s"] for bar in bars], height=0.65,
            color=[colours.get(bar.get("kind"), "tab:blue") for bar in bars])
    for y, bar in zip(positions, bars):
        ax.text(bar["mb_s"], y, " %.0f" % bar["mb_s"], va="center", fontsize=8)
    ax.set_yticks(positions)
    ax.set_yticklabels([bar["label"] for bar in bars], fontsize=8.5)
    if fio_write:
        ax.axvline(fio_write, color="tab:red", linestyle="--", label="fio write %.0f MB/s" % fio_write)
    if fio_read:
        ax.axvline(fio_read, color="tab:purple", linestyle=":", label="fio read %.0f MB/s" % fio_read)
    from matplotlib.patches import Patch
    handles, _ = ax.get_legend_handles_labels()
    handles += [Patch(color=colours["write"], label="produce"), Patch(color=colours["read"], label="consume")]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    top = max([bar["mb_s"] for bar in bars] + [fio_write or 0, fio_read or 0] + [1])
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel("MB/s (10^6 bytes)")
    ax.set_title("Throughput against fio measured in the same run")
    ax.grid(True, axis="x", alpha=0.3)
    _save(fig, path)


def rf_compare(results, path):
    """RF=1 against RF=3 from replication.json: peak MB/s (strata-bench and librdkafka) against
    fio and fio/3, and p50 / p99 / p99.9 at the fixed rate."""
    plt = _pyplot()
    rf = results["rf"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.8))
    width = 0.38
    colours = {"1": "tab:blue", "3": "tab:orange"}
    groups = [("strata-bench\npeak", "peak_mb_s"), ("librdkafka\ndefaults", "rdkafka_mb_s"),
              ("strata-bench,\n3 leaders", "spread_mb_s"), ("librdkafka,\n3 leaders", "spread_rdkafka_mb_s")]
    for offset, key in ((-width / 2, "1"), (width / 2, "3")):
        values = [rf.get(key, {}).get(field) for _, field in groups]
        xs = [i + offset for i, v in enumerate(values) if v is not None]
        ys = [v for v in values if v is not None]
        left.bar(xs, ys, width, color=colours[key], label="RF=%s" % key)
        for x, y in zip(xs, ys):
            left.text(x, y, "%.0f" % y, ha="center", va="bottom", fontsize=8)
    fio = results.get("fio_write_mb_s")
    if fio:
        left.axhline(fio, color="tab:red", linestyle="--", label="fio write %.0f MB/s" % fio)
        left.axhline(fio / 3, color="tab:red", linestyle=":", label="fio/3 %.0f MB/s" % (fio / 3))
    left.set_xticks(range(len(groups)))
    left.set_xticklabels([name for name, _ in groups])
    left.set_ylabel("MB/s (10^6 bytes), acks=all")
    left.set_title("Peak throughput")
    left.legend(loc="upper right", fontsize=8)
    left.grid(True, axis="y", alpha=0.3)
    quantiles = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))
    for offset, key in ((-width / 2, "1"), (width / 2, "3")):
        fixed = rf.get(key, {}).get("fixed_us", {})
        xs = [i + offset for i, (q, _) in enumerate(quantiles) if q in fixed]
        ys = [fixed[q] / 1000.0 for q, _ in quantiles if q in fixed]
        right.bar(xs, ys, width, color=colours[key], label="RF=%s" % key)
        for x, y in zip(xs, ys):
            right.text(x, y, "%.2f" % y, ha="center", va="bottom", fontsize=8)
    right.set_xticks(range(len(quantiles)))
    right.set_xticklabels([label for _, label in quantiles])
    right.set_ylabel("acknowledgement latency (ms)")
    rate = results.get("rate_msgs_s")
    right.set_title("At a fixed rate" + (" (%d msgs/s)" % rate if rate else ""))
    right.legend(fontsize=8)
    right.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Replication: RF=1 against RF=3 (three brokers, one disk)")
    fig.tight_layout()
    _save(fig, path)


# ---- BENCHMARKS.md ----

def section_text(broker, replication, images):
    """The plots section: which run the plots come from, then the images (paths relative to
    BENCHMARKS.md)."""
    runs = []
    if broker:
        runs.append("the broker run of %s (`bench/run.sh`)" % broker.get("date", "?"))
    if replication:
        runs.append("the replication run of %s (`bench/replication.py`)" % replication.get("date", "?"))
    lines = [BEGIN,
             "Drawn by `bench/plots.py` from `benchmarks/data/*.json`, written by %s, in the same "
             "run as the tables below." % " and ".join(runs or ["no run yet"]),
             ""]
    titles = {LATENCY_PNG: "Latency by percentile, p50 to p99.99",
              THROUGHPUT_PNG: "Throughput of every broker scenario against fio",
              REPLICATION_PNG: "RF=1 against RF=3"}
    for name in images:
        lines += ["![%s](benchmarks/%s)" % (titles[name], name), ""]
    lines.append(END)
    return "\n".join(lines)


def rewrite_section(path, section):
    """Replaces the plots section of `path`, or inserts it (under its heading) before the
    second-level heading that ends the intro."""
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + section + tail
    else:
        block = HEADING + "\n\n" + section + "\n\n"
        at = text.find("\n## ")
        if at < 0:
            text = text.rstrip() + "\n\n" + block
        else:
            text = text[:at + 1] + block + text[at + 1:]
    with open(path, "w") as f:
        f.write(text)


def redraw(root, out):
    """Draws every plot whose data is in `root`/benchmarks/data and rewrites the plots section
    of `out`. -> the images drawn."""
    broker, replication = read_data(root, "broker"), read_data(root, "replication")
    directory = os.path.join(root, "benchmarks")
    curves = (broker or {}).get("curves", []) + (replication or {}).get("curves", [])
    images = []
    if curves:
        latency_percentiles(curves, os.path.join(directory, LATENCY_PNG))
        images.append(LATENCY_PNG)
    if broker and broker.get("throughput"):
        throughput_bars(broker["throughput"], broker.get("fio_write_mb_s"), broker.get("fio_read_mb_s"),
                        os.path.join(directory, THROUGHPUT_PNG))
        images.append(THROUGHPUT_PNG)
    if replication and replication.get("rf"):
        rf_compare(replication, os.path.join(directory, REPLICATION_PNG))
        images.append(REPLICATION_PNG)
    rewrite_section(out, section_text(broker, replication, images))
    return images


def save_and_redraw(out, name, data):
    """What the benchmark scripts call at their end: writes `benchmarks/data/<name>.json` beside
    `out` (BENCHMARKS.md), then redraws every plot and the plots section. Never raises: plots
    never fail a benchmark."""
    try:
        write_data(os.path.dirname(os.path.abspath(out)), name, data)
    except Exception as e:  # noqa: BLE001
        print("warning: writing benchmarks/data/%s.json failed: %r" % (name, e), file=sys.stderr)
        return
    redraw_or_warn(out)


def redraw_or_warn(out):
    """Redraws the plots and the section from the data files, warning instead of failing."""
    try:
        images = redraw(os.path.dirname(os.path.abspath(out)), out)
        print("plots: drew %s" % ", ".join(images), file=sys.stderr)
    except ImportError as e:
        print("warning: no plots (%s); run under target/bench-venv (bench/run.sh builds it from "
              "bench/requirements.txt)" % e, file=sys.stderr)
    except Exception as e:  # noqa: BLE001 -- a plot must never fail the run
        print("warning: drawing the plots failed: %r" % e, file=sys.stderr)


# ---- self-test ----

def synthetic_ladder(p50_us, tail):
    qs = [0.5, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9975, 0.999, 0.9995, 0.99975, 0.9999]
    return {"percentiles": [[q, p50_us * (1 / (1 - q) / 2) ** tail] for q in qs]}


def self_test():
    when = utc_now()
    broker = {
        "date": when, "host": "self-test", "fio_write_mb_s": 480.0, "fio_read_mb_s": 1900.0,
        "curves": [
            {"label": "acks=1, 1 KiB in ~1 MB batches", "percentiles": ladder(synthetic_ladder(900, 0.35))},
            {"label": "acks=all, 1 KiB, 16 partitions", "percentiles": ladder(synthetic_ladder(2500, 0.3))},
            # an old binary: only latency_us
            {"label": "e2e at 50% of peak", "percentiles": ladder(
                {"latency_us": {"p50": 400, "p95": 900, "p99": 2100, "p999": 7000}})},
        ],
        "throughput": [
            {"label": "acks=1, 100 B, 1 partition", "mb_s": 210.0, "kind": "write"},
            {"label": "acks=1, 1 KiB in ~1 MB batches", "mb_s": 410.0, "kind": "write"},
            {"label": "acks=all, 1 KiB", "mb_s": 330.0, "kind": "write"},
            {"label": "librdkafka defaults, acks=all", "mb_s": None, "kind": "write"},
            {"label": "consume 8 GB log, strata-bench", "mb_s": 1500.0, "kind": "read"},
        ],
    }
    assert median_ladder([synthetic_ladder(1, 0), synthetic_ladder(3, 0), synthetic_ladder(2, 0)])[0] == [0.5, 2]
    replication = {
        "date": when, "host": "self-test", "fio_write_mb_s": 480.0, "rate_msgs_s": 90000,
        "rf": {"1": {"peak_mb_s": 300.0, "rdkafka_mb_s": 250.0,
                     "fixed_us": {"p50": 1500.0, "p99": 4000.0, "p999": 9000.0}},
               "3": {"peak_mb_s": 120.0, "rdkafka_mb_s": None, "spread_mb_s": 140.0,
                     "fixed_us": {"p50": 2500.0, "p99": 8000.0, "p999": 15000.0}}},
        "curves": [{"label": "RF=1 at 90000 msgs/s", "percentiles": ladder(synthetic_ladder(1500, 0.3))},
                   {"label": "RF=3 at 90000 msgs/s", "percentiles": ladder(synthetic_ladder(2500, 0.33))}],
    }
    keep = os.environ.get("PLOTS_SELF_TEST_KEEP")
    root = keep or tempfile.mkdtemp(prefix="strata-plots-")
    try:
        write_data(root, "broker", broker)
        write_data(root, "replication", replication)
        out = os.path.join(root, "BENCHMARKS.md")
        real = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "BENCHMARKS.md")
        if os.path.exists(real):
            shutil.copy(real, out)
        images = redraw(root, out)
        assert images == [LATENCY_PNG, THROUGHPUT_PNG, REPLICATION_PNG], images
        for name in images:
            with open(os.path.join(root, "benchmarks", name), "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
        first = open(out).read()
        assert first.count(BEGIN) == 1 and first.count(END) == 1
        if "## Broker" in first:  # inserted after the intro, above the tables
            assert first.index(BEGIN) < first.index("## Broker")
        redraw(root, out)
        assert open(out).read() == first, "rewriting the plots section is not idempotent"
        print("plots self-test: ok (%s)" % root)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(here, "BENCHMARKS.md"))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return
    images = redraw(os.path.dirname(os.path.abspath(args.out)), args.out)
    print("drew %s; rewrote the plots section of %s" % (", ".join(images) or "nothing", args.out))


if __name__ == "__main__":
    main()
