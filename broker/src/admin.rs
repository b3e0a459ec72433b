//! The admin HTTP endpoint (shard 0): `/health` and `/metrics` (Prometheus text). Issue #4
//! grows `/metrics` into the full set; today it reports partitions and log offsets of shard 0's
//! view.

use crate::state::Shard;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use shard::runtime::net::{TcpListener, TcpStream};
use std::rc::Rc;

/// Longest request head the admin endpoint reads.
pub const ADMIN_REQUEST_BYTES_MAX: usize = 8192;

pub async fn serve(shard: Rc<Shard>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                shard::runtime::spawn(answer(shard.clone(), stream)).detach();
            }
            Err(error) => tracing::warn!(%error, "admin accept failed"),
        }
    }
}

async fn answer(shard: Rc<Shard>, mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n")
        && head.len() < ADMIN_REQUEST_BYTES_MAX
    {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => head.extend_from_slice(buffer.get(..read).unwrap_or_default()),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let path = line.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = match path {
        "/health" => ("200 OK", "ok\n".to_string()),
        "/metrics" => ("200 OK", metrics(&shard).await),
        _ => ("404 Not Found", "not found\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

/// Histogram bucket bounds (seconds) for latency metrics.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key)
        .map(|api| format!("{api:?}"))
        .unwrap_or_else(|_| key.to_string())
}

/// Writes one Prometheus histogram series (buckets, sum, count) from an HDR histogram of
/// microseconds.
fn write_histogram(
    out: &mut String,
    name: &str,
    labels: &str,
    histogram: &hdrhistogram::Histogram<u64>,
) {
    use std::fmt::Write;
    let separator = if labels.is_empty() { "" } else { "," };
    for bound in LATENCY_BUCKETS_S {
        let micros = (bound * 1e6) as u64;
        let count = histogram.count_between(0, micros);
        let _ = writeln!(out, "{name}_bucket{{{labels}{separator}le=\"{bound}\"}} {count}");
    }
    let total = histogram.len();
    let _ = writeln!(out, "{name}_bucket{{{labels}{separator}le=\"+Inf\"}} {total}");
    let sum_seconds = histogram.mean() * total as f64 / 1e6;
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum_seconds}");
    let _ = writeln!(out, "{name}_count{{{labels}}} {total}");
}

async fn metrics(shard: &Rc<Shard>) -> String {
    use crate::router::{call, ShardRequest, ShardResponse};
    use std::fmt::Write;
    let snapshot = shard.snapshot();
    let partitions: i64 = snapshot.topics.values().map(|topic| i64::from(topic.partitions)).sum();
    let mut out = String::new();
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    family(&mut out, "strata_topics", "gauge", "Topics in the cluster.");
    let _ = writeln!(out, "strata_topics {}", snapshot.topics.len());
    family(&mut out, "strata_partitions", "gauge", "Partitions in the cluster.");
    let _ = writeln!(out, "strata_partitions {partitions}");
    let mut reports = Vec::new();
    for target in 0..shard.count {
        if let ShardResponse::Stats(report) = call(shard, target, ShardRequest::Stats).await {
            reports.push((target, report));
        }
    }
    type Counter = fn(&crate::router::StatsReport) -> u64;
    let counters: [(&str, &str, &str, Counter); 11] = [
        (
            "strata_routed_requests_out_total",
            "counter",
            "Partition requests sent to another shard.",
            |r| r.stats.routed_out,
        ),
        (
            "strata_routed_requests_in_total",
            "counter",
            "Partition requests handled for another shard.",
            |r| r.stats.routed_in,
        ),
        ("strata_bytes_in_total", "counter", "Request bytes received.", |r| r.stats.bytes_in),
        ("strata_bytes_out_total", "counter", "Response bytes sent.", |r| r.stats.bytes_out),
        (
            "strata_connections_closed_on_error_total",
            "counter",
            "Connections closed because of bad input.",
            |r| r.stats.connections_closed_on_error,
        ),
        ("strata_connections_open", "gauge", "Client connections open.", |r| {
            r.stats.connections_open
        }),
        (
            "strata_router_queue_depth",
            "gauge",
            "Cross-core requests this shard is waiting on.",
            |r| r.pending_requests,
        ),
        ("strata_shard_partitions", "gauge", "Partitions owned by the shard.", |r| {
            r.offsets.len() as u64
        }),
        (
            "strata_produce_duplicate_batches_total",
            "counter",
            "Idempotent producers' retried batches answered with their original offsets.",
            |r| r.stats.duplicate_batches,
        ),
        (
            "strata_compaction_runs_total",
            "counter",
            "Log compaction runs that rewrote at least one segment.",
            |r| r.stats.compaction_runs,
        ),
        ("strata_compacted_records_total", "counter", "Records removed by log compaction.", |r| {
            r.stats.compacted_records
        }),
    ];
    for (name, kind, help, value) in counters {
        family(&mut out, name, kind, help);
        for (target, report) in &reports {
            let _ = writeln!(out, "{name}{{shard=\"{target}\"}} {}", value(report));
        }
    }
    family(&mut out, "strata_requests_total", "counter", "Requests served, by API.");
    for (target, report) in &reports {
        for (api, count) in &report.stats.requests_by_api {
            let _ = writeln!(
                out,
                "strata_requests_total{{shard=\"{target}\",api=\"{}\"}} {count}",
                api_name(*api)
            );
        }
    }
    family(
        &mut out,
        "strata_request_latency_seconds",
        "histogram",
        "Request latency from decode to response written, by API and shard.",
    );
    for (target, report) in &reports {
        for (api, histogram) in &report.stats.request_latency_us {
            let labels = format!("shard=\"{target}\",api=\"{}\"", api_name(*api));
            write_histogram(&mut out, "strata_request_latency_seconds", &labels, histogram);
        }
    }
    family(
        &mut out,
        "strata_fsync_latency_seconds",
        "histogram",
        "fdatasync latency of group commits, by shard.",
    );
    for (target, report) in &reports {
        write_histogram(
            &mut out,
            "strata_fsync_latency_seconds",
            &format!("shard=\"{target}\""),
            &report.fsync_latency_us,
        );
    }
    family(
        &mut out,
        "strata_request_errors_total",
        "counter",
        "Partition-level errors returned, by Kafka error code.",
    );
    for (target, report) in &reports {
        for (code, count) in &report.stats.errors_by_code {
            let _ = writeln!(
                out,
                "strata_request_errors_total{{shard=\"{target}\",code=\"{code}\"}} {count}"
            );
        }
    }
    let traffic: [(&str, &str, usize); 4] = [
        ("strata_topic_messages_in_total", "Records appended, by topic.", 0),
        ("strata_topic_bytes_in_total", "Batch bytes appended, by topic.", 1),
        ("strata_topic_messages_out_total", "Records fetched, by topic.", 2),
        ("strata_topic_bytes_out_total", "Batch bytes fetched, by topic.", 3),
    ];
    for (name, help, index) in traffic {
        family(&mut out, name, "counter", help);
        let mut totals: std::collections::BTreeMap<&str, u64> = Default::default();
        for (_, report) in &reports {
            for (topic, values) in &report.stats.topic_traffic {
                *totals.entry(topic.as_str()).or_default() +=
                    values.get(index).copied().unwrap_or(0);
            }
        }
        for (topic, value) in totals {
            let _ = writeln!(out, "{name}{{topic=\"{topic}\"}} {value}");
        }
    }
    family(
        &mut out,
        "strata_consumer_group_lag",
        "gauge",
        "Log end offset minus committed offset, per group and partition.",
    );
    let ends: std::collections::HashMap<(&str, i32), i64> = reports
        .iter()
        .flat_map(|(_, report)| {
            report
                .offsets
                .iter()
                .map(|(topic, partition, _, end)| ((topic.as_str(), *partition), *end))
        })
        .collect();
    for (_, report) in &reports {
        for (group, topic, partition, committed) in &report.committed {
            if let Some(end) = ends.get(&(topic.as_str(), *partition)) {
                let lag = (end - committed).max(0);
                let _ = writeln!(out, "strata_consumer_group_lag{{group=\"{group}\",topic=\"{topic}\",partition=\"{partition}\"}} {lag}");
            }
        }
    }
    family(&mut out, "strata_log_end_offset", "gauge", "Log end offset per partition.");
    for (target, report) in &reports {
        for (topic, partition, _, end) in &report.offsets {
            let _ = writeln!(out, "strata_log_end_offset{{shard=\"{target}\",topic=\"{topic}\",partition=\"{partition}\"}} {end}");
        }
    }
    family(&mut out, "strata_log_start_offset", "gauge", "Log start offset per partition.");
    for (target, report) in &reports {
        for (topic, partition, start, _) in &report.offsets {
            let _ = writeln!(out, "strata_log_start_offset{{shard=\"{target}\",topic=\"{topic}\",partition=\"{partition}\"}} {start}");
        }
    }
    out
}
