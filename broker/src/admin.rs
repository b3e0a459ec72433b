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
        "/metrics" => ("200 OK", metrics(&shard)),
        _ => ("404 Not Found", "not found\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

fn metrics(shard: &Shard) -> String {
    let snapshot = shard.snapshot();
    let partitions: i64 = snapshot.topics.values().map(|topic| i64::from(topic.partitions)).sum();
    let mut out = String::new();
    out.push_str("# HELP strata_topics Topics in the cluster.\n# TYPE strata_topics gauge\n");
    out.push_str(&format!("strata_topics {}\n", snapshot.topics.len()));
    out.push_str(
        "# HELP strata_partitions Partitions in the cluster.\n# TYPE strata_partitions gauge\n",
    );
    out.push_str(&format!("strata_partitions {partitions}\n"));
    out
}
