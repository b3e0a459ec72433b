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

async fn metrics(shard: &Rc<Shard>) -> String {
    use crate::router::{call, ShardRequest, ShardResponse};
    use std::fmt::Write;
    let snapshot = shard.snapshot();
    let partitions: i64 = snapshot.topics.values().map(|topic| i64::from(topic.partitions)).sum();
    let mut out = String::new();
    let _ =
        writeln!(out, "# HELP strata_topics Topics in the cluster.\n# TYPE strata_topics gauge");
    let _ = writeln!(out, "strata_topics {}", snapshot.topics.len());
    let _ = writeln!(
        out,
        "# HELP strata_partitions Partitions in the cluster.\n# TYPE strata_partitions gauge"
    );
    let _ = writeln!(out, "strata_partitions {partitions}");
    let mut per_shard = Vec::new();
    for target in 0..shard.count {
        if let ShardResponse::Stats(stats, offsets) = call(shard, target, ShardRequest::Stats).await
        {
            per_shard.push((target, stats, offsets));
        }
    }
    type Counter = fn(&crate::state::ShardStats) -> u64;
    let families: [(&str, &str, Counter); 5] = [
        ("strata_routed_requests_out_total", "Partition requests sent to another shard.", |s| {
            s.routed_out
        }),
        ("strata_routed_requests_in_total", "Partition requests handled for another shard.", |s| {
            s.routed_in
        }),
        ("strata_bytes_in_total", "Request bytes received.", |s| s.bytes_in),
        ("strata_bytes_out_total", "Response bytes sent.", |s| s.bytes_out),
        (
            "strata_connections_closed_on_error_total",
            "Connections closed because of bad input.",
            |s| s.connections_closed_on_error,
        ),
    ];
    for (name, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (target, stats, _) in &per_shard {
            let _ = writeln!(out, "{name}{{shard=\"{target}\"}} {}", value(stats));
        }
    }
    let _ = writeln!(out, "# HELP strata_requests_total Requests served, by API key.\n# TYPE strata_requests_total counter");
    for (target, stats, _) in &per_shard {
        for (api, count) in &stats.requests_by_api {
            let _ = writeln!(
                out,
                "strata_requests_total{{shard=\"{target}\",api_key=\"{api}\"}} {count}"
            );
        }
    }
    let _ = writeln!(out, "# HELP strata_log_end_offset Log end offset per partition.\n# TYPE strata_log_end_offset gauge");
    for (target, _, offsets) in &per_shard {
        for (topic, partition, _, end) in offsets {
            let _ = writeln!(out, "strata_log_end_offset{{shard=\"{target}\",topic=\"{topic}\",partition=\"{partition}\"}} {end}");
        }
    }
    let _ = writeln!(out, "# HELP strata_log_start_offset Log start offset per partition.\n# TYPE strata_log_start_offset gauge");
    for (target, _, offsets) in &per_shard {
        for (topic, partition, start, _) in offsets {
            let _ = writeln!(out, "strata_log_start_offset{{shard=\"{target}\",topic=\"{topic}\",partition=\"{partition}\"}} {start}");
        }
    }
    out
}
