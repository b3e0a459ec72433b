"""A Jepsen-style checker for a Kafka log under faults (issue #16).

A workload gives it:
- `acked`: value -> (partition, offset) for every write a producer had acknowledged;
- `attempted`: every value any producer tried to write (acknowledged, failed or unknown);
- `final`: partition -> [(offset, value)] read from the start to the end after the faults;
- `polls`: [(partition, offset, value)] in the order one consumer saw them during the run;
- `replicas`: partition -> [batches of each replica] (files after a clean stop).

`check` returns the anomalies, each a (kind, detail) pair; an empty list means the history
is consistent:
  lost          acknowledged but not in the final read;
  moved         acknowledged at one offset, read at another;
  duplicated    one value at two offsets;
  unexpected    a value no producer attempted;
  gap           the final read of a partition skips offsets it should have (below its end,
                for a topic without compaction or deletion);
  non-monotonic a consumer saw an offset of a partition at or before one it already saw,
                without seeking back;
  phantom       a consumer read a record during the run that the final log does not have
                there (it read past a high watermark, and the record was truncated later);
  divergent     two replicas hold different batches at the same position (one copy must be
                a prefix of the other)."""


def check(acked, attempted, final, polls=(), replicas=None):
    anomalies = []
    where = {}
    for partition, records in final.items():
        previous = None
        for offset, value in records:
            if previous is not None and offset != previous + 1:
                anomalies.append(("gap", "partition %d: offset %d after %d" % (partition, offset, previous)))
            previous = offset
            if value in where:
                anomalies.append(("duplicated", "%r at %r and %r" % (value, where[value], (partition, offset))))
                continue
            where[value] = (partition, offset)
            if value not in attempted:
                anomalies.append(("unexpected", "%r at %r" % (value, (partition, offset))))
    for value, place in acked.items():
        if value not in where:
            anomalies.append(("lost", "%r acknowledged at %r" % (value, place)))
        elif where[value] != place:
            anomalies.append(("moved", "%r acknowledged at %r, read at %r" % (value, place, where[value])))
    at = {(p, o): v for p, records in final.items() for o, v in records}
    last_seen = {}
    for partition, offset, value in polls:
        if at.get((partition, offset)) != value:
            anomalies.append(("phantom", "%r read at %r, final log has %r" % (value, (partition, offset), at.get((partition, offset)))))
        if partition in last_seen and offset <= last_seen[partition]:
            anomalies.append(("non-monotonic", "partition %d: %d after %d" % (partition, offset, last_seen[partition])))
        last_seen[partition] = max(offset, last_seen.get(partition, -1))
    for partition, copies in (replicas or {}).items():
        longest = max(copies, key=len) if copies else []
        for index, copy in enumerate(copies):
            if copy != longest[:len(copy)]:
                anomalies.append(("divergent", "partition %d: replica %d is not a prefix of the longest" % (partition, index)))
    return anomalies


def summary(anomalies, limit=5):
    kinds = {}
    for kind, detail in anomalies:
        kinds.setdefault(kind, []).append(detail)
    return "; ".join("%s x%d (e.g. %s)" % (kind, len(details), " | ".join(details[:limit]))
                     for kind, details in kinds.items())
