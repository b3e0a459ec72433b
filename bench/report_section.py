"""Rewrites one generated section of BENCHMARKS.md (between its begin/end markers), or appends
it under `heading` the first time."""
import os


def write_section(path, begin, end, section, heading):
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + section + tail
    else:
        text = text.rstrip() + "\n\n" + heading + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)
