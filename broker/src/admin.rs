//! The admin HTTP endpoint (shard 0): `/health` and `/metrics` (Prometheus text format 0.0.4),
//! and everything else to the web console (`console`, unless `console.enabled=false`):
//! every shard's counters and histograms (asked over the mesh, `services::stats`), topic
//! traffic, consumer lag and log offsets. Label values are escaped as the format requires
//! (backslash, double quote, line feed), since group ids may hold any character.

use crate::console::{http, Console};
use crate::node::Node;
use crate::services::stats::StatsReport;
use futures_lite::AsyncWriteExt;
use shard::io::Storage;
use shard::runtime::net::{TcpListener, TcpStream};
use std::borrow::Cow;
use std::rc::Rc;

/// Most admin connections open at once (scrapes, health checks, console pages); past it a
/// new connection is closed at once.
pub const ADMIN_CONNECTIONS_MAX: usize = 64;

pub async fn serve<S: Storage>(node: Rc<Node<S>>, listener: TcpListener) {
    let console = node.config.console.enabled.then(|| Rc::new(Console::new(node.clone())));
    if let Some(console) = &console {
        shard::runtime::spawn(console.clone().sample_forever()).detach();
        let loopback = node.config.admin_listen.ip().is_loopback();
        if !loopback && !crate::console::session::login_required(&node) {
            tracing::warn!(admin = %node.config.admin_listen,
                "the console is open to anyone who reaches the admin listener: no listener asks for a SASL login");
        }
    }
    let open = Rc::new(std::cell::Cell::new(0usize));
    loop {
        match listener.accept().await {
            Ok(stream) if open.get() >= ADMIN_CONNECTIONS_MAX => drop(stream),
            Ok(stream) => {
                open.set(open.get() + 1);
                let (node, console, open) = (node.clone(), console.clone(), open.clone());
                shard::runtime::spawn(async move {
                    answer(node, console, stream).await;
                    open.set(open.get().saturating_sub(1));
                })
                .detach();
            }
            Err(error) => tracing::warn!(%error, "admin accept failed"),
        }
    }
}

async fn answer<S: Storage>(
    node: Rc<Node<S>>,
    console: Option<Rc<Console<S>>>,
    mut stream: TcpStream,
) {
    let response = match http::read_request(&mut stream).await {
        Err(http::ReadError::Closed) => return,
        Err(http::ReadError::Status(status, why)) => http::Response::text(status, why),
        Ok(request) => {
            const TEXT: &str = "text/plain; version=0.0.4";
            let text = |status, body: String| http::Response {
                status,
                content_type: TEXT,
                headers: Vec::new(),
                body: Cow::Owned(body.into_bytes()),
            };
            match (request.method.as_str(), request.path.as_str(), &console) {
                ("GET", "/health", _) => {
                    let (status, body) = health(&node).await;
                    text(status, body)
                }
                ("GET", "/metrics", _) => text("200 OK", metrics(&node).await),
                ("GET", "/v1/cluster/health_overview", _) => {
                    let mut response = text("200 OK", health_overview(&node).await);
                    response.content_type = "application/json";
                    response
                }
                (_, _, Some(console)) => {
                    let peer = stream.peer_addr().unwrap_or_else(|_| ([127, 0, 0, 1], 0).into());
                    let mut response = console.answer(&request, peer).await;
                    let bytes = response.to_bytes(true);
                    response.body = Cow::Owned(Vec::new());
                    let _ = stream.write_all(&bytes).await;
                    return;
                }
                (_, _, None) => text("404 Not Found", "not found\n".to_string()),
            }
        }
    };
    let _ = stream.write_all(&response.to_bytes(false)).await;
}

/// Histogram bucket bounds (seconds) for latency metrics.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A label value escaped for the Prometheus text format: `\\`, `\"` and `\n`.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out
}

/// The API's name from the API table (`api::name`); a key strata does not serve by number.
fn api_name(key: i16) -> String {
    crate::api::name(key).map_or_else(|| key.to_string(), str::to_string)
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

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Services whose cross-core calls `strata_routed_requests_*` counts (client data and group
/// requests; not the control traffic of metadata publication and stats).
const ROUTED_SERVICES: &[&str] = &["partitions", "partition_waits", "groups"];

type Counter = fn(&StatsReport) -> u64;

fn routed(counts: &std::collections::BTreeMap<&'static str, u64>) -> u64 {
    ROUTED_SERVICES.iter().map(|service| counts.get(service).copied().unwrap_or(0)).sum()
}

const SHARD_COUNTERS: [(&str, &str, &str, Counter); 62] = [
    (
        "strata_share_partitions",
        "gauge",
        "Share partitions held in memory by this broker's partition leaders (an idle one is dropped after group.share.partition.idle.ms).",
        |r| r.counters.share_partitions,
    ),
    (
        "strata_share_dead_letters_total",
        "counter",
        "Records written to share groups' dead-letter topics (KIP-1191).",
        |r| r.counters.share_dead_letters,
    ),
    (
        "strata_share_dead_letters_failed_total",
        "counter",
        "Records archived for a dead-letter topic but not written to it (refused or failed).",
        |r| r.counters.share_dead_letters_failed,
    ),
    (
        "strata_share_group_rebalances_total",
        "counter",
        "Group epoch bumps of KIP-932 share groups.",
        |r| r.counters.share_rebalances,
    ),
    (
        "strata_share_records_acquired_total",
        "counter",
        "Records share consumers acquired (every delivery, redeliveries included).",
        |r| r.counters.share_acquired,
    ),
    (
        "strata_share_records_redelivered_total",
        "counter",
        "Records acquired again after a release or a lock timeout.",
        |r| r.counters.share_redelivered,
    ),
    (
        "strata_share_records_accepted_total",
        "counter",
        "Records share consumers accepted.",
        |r| r.counters.share_accepted,
    ),
    (
        "strata_share_records_released_total",
        "counter",
        "Records share consumers released, or whose member's session ended, for another delivery.",
        |r| r.counters.share_released,
    ),
    (
        "strata_share_records_rejected_total",
        "counter",
        "Records share consumers rejected (archived, never delivered again).",
        |r| r.counters.share_rejected,
    ),
    (
        "strata_share_records_archived_at_limit_total",
        "counter",
        "Records archived because they reached the delivery count limit.",
        |r| r.counters.share_archived_at_limit,
    ),
    (
        "strata_share_lock_timeouts_total",
        "counter",
        "Acquired share records whose acquisition lock timed out.",
        |r| r.counters.share_lock_timeouts,
    ),
    (
        "strata_classic_group_rebalances_total",
        "counter",
        "Generations of classic-protocol groups stored (each one a rebalance).",
        |r| r.counters.classic_rebalances,
    ),
    (
        "strata_classic_group_rebalance_microseconds_total",
        "counter",
        "Summed duration of classic rebalances, from the join that started one to Stable.",
        |r| r.counters.classic_rebalance_us_total,
    ),
    (
        "strata_consumer_group_rebalances_total",
        "counter",
        "Group epoch bumps of KIP-848 consumer groups (each one starts a rebalance).",
        |r| r.counters.consumer_rebalances,
    ),
    (
        "strata_consumer_group_rebalances_completed_total",
        "counter",
        "KIP-848 consumer group rebalances that reached Stable.",
        |r| r.counters.consumer_rebalances_completed,
    ),
    (
        "strata_consumer_group_rebalance_microseconds_total",
        "counter",
        "Summed duration of completed KIP-848 rebalances, from the epoch bump to Stable.",
        |r| r.counters.consumer_rebalance_us_total,
    ),
    (
        "strata_consumer_group_assignments_total",
        "counter",
        "Heartbeats that computed a new target assignment with the group's server assignor.",
        |r| r.counters.consumer_assignments,
    ),
    (
        "strata_consumer_group_assignment_microseconds_total",
        "counter",
        "Summed time of those heartbeats' steps on the coordinator's shard (assignor included).",
        |r| r.counters.consumer_assignment_us_total,
    ),
    (
        "strata_consumer_group_assignment_microseconds_max",
        "gauge",
        "The longest such step since the broker started (the shard does nothing else meanwhile).",
        |r| r.counters.consumer_assignment_us_max,
    ),
    (
        "strata_partitions_under_replicated",
        "gauge",
        "Partitions this shard leads whose ISR is smaller than their replica set.",
        |r| r.under_replicated,
    ),
    (
        "strata_partitions_under_min_isr",
        "gauge",
        "Partitions this shard leads whose ISR is smaller than min.insync.replicas (acks=all refused).",
        |r| r.under_min_isr,
    ),
    (
        "strata_partitions_offline",
        "gauge",
        "Partitions offline after a write failure (ENOSPC, EMFILE, EIO), retried with back-off.",
        |r| r.offline.len() as u64,
    ),
    (
        "strata_partition_recoveries_total",
        "counter",
        "Offline partitions reopened and back online without a restart.",
        |r| r.counters.partition_recoveries,
    ),
    (
        "strata_damaged_batches_total",
        "counter",
        "Damaged batches met reading the log from disk (logged once each; readers get \
         CORRUPT_MESSAGE there).",
        |r| r.counters.damaged_batches,
    ),
    (
        "strata_offsets_replay_skipped_total",
        "counter",
        "__consumer_offsets batches that replay could not read and skipped (logged).",
        |r| r.counters.offsets_replay_skipped,
    ),
    (
        "strata_routed_requests_out_total",
        "counter",
        "Mesh requests sent to another shard (partition, group, coordinator and other \
         services; connections handed over).",
        |r| routed(&r.mesh.routed_out),
    ),
    (
        "strata_routed_requests_in_total",
        "counter",
        "Mesh requests handled for another shard (partition, group, coordinator and other \
         services; connections taken over).",
        |r| routed(&r.mesh.routed_in),
    ),
    ("strata_bytes_in_total", "counter", "Request bytes received.", |r| r.counters.bytes_in),
    ("strata_bytes_out_total", "counter", "Response bytes sent.", |r| r.counters.bytes_out),
    (
        "strata_connections_closed_on_error_total",
        "counter",
        "Connections closed because of bad input.",
        |r| r.counters.connections_closed_on_error,
    ),
    ("strata_connections_open", "gauge", "Client connections open.", |r| {
        r.counters.connections_open
    }),
    ("strata_router_queue_depth", "gauge", "Cross-core calls this shard is waiting on.", |r| {
        r.pending_calls
    }),
    ("strata_shard_partitions", "gauge", "Partitions owned by the shard.", |r| {
        r.offsets.len() as u64
    }),
    (
        "strata_isr_changes_total",
        "counter",
        "ISR shrinks and expands made by this broker's partition leaders.",
        |r| r.counters.isr_changes,
    ),
    (
        "strata_fetch_sessions",
        "gauge",
        "Incremental fetch sessions open (KIP-227; Kafka's NumIncrementalFetchSessions).",
        |r| r.fetch_sessions.0,
    ),
    (
        "strata_fetch_session_partitions",
        "gauge",
        "Partitions held by the open fetch sessions (NumIncrementalFetchPartitionsCached).",
        |r| r.fetch_sessions.1,
    ),
    (
        "strata_fetch_session_evictions_total",
        "counter",
        "Fetch sessions evicted to make room for a new one.",
        |r| r.fetch_sessions.2,
    ),
    (
        "strata_transactions_open",
        "gauge",
        "Transactions open (Ongoing or being committed or aborted) on this broker's coordinators.",
        |r| r.open_transactions,
    ),
    (
        "strata_transactions_committed_total",
        "counter",
        "Transactions this broker's coordinators committed (markers written everywhere).",
        |r| r.counters.txn_commits,
    ),
    (
        "strata_transactions_aborted_total",
        "counter",
        "Transactions this broker's coordinators aborted (by the producer, fencing or timeout).",
        |r| r.counters.txn_aborts,
    ),
    (
        "strata_authentication_failures_total",
        "counter",
        "SASL authentications that failed (wrong password, unknown user or mechanism).",
        |r| r.counters.authentication_failures,
    ),
    (
        "strata_authorization_denials_total",
        "counter",
        "Operations the authorizer refused (a principal without the ACL, or a DENY).",
        |r| r.counters.authorization_denials,
    ),
    (
        "strata_reauthentications_total",
        "counter",
        "SASL re-authentications (KIP-368) on open connections that succeeded.",
        |r| r.counters.reauthentications,
    ),
    (
        "strata_txn_verifications_total",
        "counter",
        "First transactional batches on a partition verified with their transaction coordinator (KIP-890).",
        |r| r.counters.txn_verifications,
    ),
    (
        "strata_txn_verifications_refused_total",
        "counter",
        "Transactional batches refused by partition verification (not in an ongoing transaction, fenced, or the coordinator unavailable).",
        |r| r.counters.txn_verifications_refused,
    ),
    (
        "strata_produce_duplicate_batches_total",
        "counter",
        "Idempotent producers' retried batches answered with their original offsets.",
        |r| r.counters.duplicate_batches,
    ),
    (
        "strata_compaction_runs_total",
        "counter",
        "Log compaction runs that rewrote at least one segment.",
        |r| r.counters.compaction_runs,
    ),
    ("strata_compacted_records_total", "counter", "Records removed by log compaction.", |r| {
        r.counters.compacted_records
    }),
    (
        "strata_queued_request_bytes",
        "gauge",
        "Bytes of requests read and not yet answered (queued.max.request.bytes bounds them).",
        |r| r.counters.queued_request_bytes,
    ),
    (
        "strata_queued_request_bytes_peak",
        "gauge",
        "The most request bytes held at once since start.",
        |r| r.counters.queued_request_bytes_peak,
    ),
    (
        "strata_write_buffer_bytes",
        "gauge",
        "Bytes of write-behind buffers (partition tails and chunk writes in flight) held against \
         the shard's budget.",
        |r| r.budgets.write.bytes_held,
    ),
    (
        "strata_write_buffer_bytes_max",
        "gauge",
        "The shard's write-buffer budget (log.write.buffer.bytes).",
        |r| r.budgets.write.bytes_max,
    ),
    (
        "strata_write_buffer_partitions",
        "gauge",
        "Partitions holding a write buffer (an idle one gives it back).",
        |r| r.budgets.write.tails,
    ),
    (
        "strata_write_buffer_waits_total",
        "counter",
        "Appends that waited for the write-buffer budget (back-pressure).",
        |r| r.budgets.write.waits,
    ),
    (
        "strata_shared_syncs_total",
        "counter",
        "syncfs calls that stood for many partitions' fdatasyncs at once (the shard's shared \
         commit, used while several of its partitions sync together).",
        |r| r.budgets.shared_syncs.syncs,
    ),
    (
        "strata_shared_sync_partitions_total",
        "counter",
        "Partition syncs that a shared syncfs stood for.",
        |r| r.budgets.shared_syncs.log_syncs,
    ),
    (
        "strata_partition_fdatasyncs_total",
        "counter",
        "Partition syncs that synced their own segment file (fdatasync).",
        |r| r.budgets.shared_syncs.own_syncs,
    ),
    (
        "strata_segment_files_open",
        "gauge",
        "Segment files the shard holds open (its descriptor cache).",
        |r| r.budgets.files.open,
    ),
    (
        "strata_segment_files_open_max",
        "gauge",
        "The shard's descriptor cache limit (from the open-files limit at start).",
        |r| r.budgets.files.limit,
    ),
    (
        "strata_segment_files_closed_total",
        "counter",
        "Segment files closed to stay under the descriptor cache's limit.",
        |r| r.budgets.files.closed_total,
    ),
    (
        "strata_segment_files_reopened_total",
        "counter",
        "Segment files the descriptor cache closed that were opened again on demand.",
        |r| r.budgets.files.reopened_total,
    ),
    (
        "strata_preallocated_bytes",
        "gauge",
        "Disk reserved ahead of the active segments' ends (grows with each partition's write rate).",
        |r| r.budgets.preallocated_bytes,
    ),
];

/// `/health`: 200 `ok` when every partition is online, else 503 naming the offline ones.
async fn health<S: Storage>(node: &Rc<Node<S>>) -> (&'static str, String) {
    let mut offline: Vec<String> = Vec::new();
    for (_, report) in node.stats_all().await {
        offline.extend(report.offline.iter().map(ToString::to_string));
    }
    if offline.is_empty() {
        return ("200 OK", "ok\n".to_string());
    }
    offline.sort();
    let mut body = format!("offline partitions: {}\n", offline.len());
    for partition in offline {
        body.push_str(&partition);
        body.push('\n');
    }
    ("503 Service Unavailable", body)
}

/// `/v1/cluster/health_overview` (Redpanda's shape): the cluster as this node's metadata image
/// has it (the controller, brokers down, leaderless and under-replicated partitions), and this
/// node's own part (fenced, partitions offline here, partitions it leads below
/// `min.insync.replicas`). Always 200: `is_healthy` is the verdict; `/health` stays "this
/// process serves", what a load balancer asks.
async fn health_overview<S: Storage>(node: &Rc<Node<S>>) -> String {
    let image = node.metadata();
    let view = cluster_view(node, &image);
    let me = node.node_id();
    let mut leaderless = Vec::new();
    let mut under_replicated = Vec::new();
    let mut below_min_isr = Vec::new();
    for topic in image.topics.values() {
        let min_isr = crate::metadata::topic_config::effective_config(
            &image,
            me.0,
            topic,
            "min.insync.replicas",
        )
        .0
        .and_then(|value| value.parse::<usize>().ok())
        .unwrap_or(1);
        for (index, placement) in topic.partitions.iter().enumerate() {
            let name = format!("{}-{index}", topic.name);
            if placement.leader == crate::metadata::elect::NO_LEADER {
                leaderless.push(name.clone());
            }
            if placement.isr.len() < placement.replicas.len() {
                under_replicated.push(name.clone());
            }
            if placement.leader == me && placement.isr.len() < min_isr {
                below_min_isr.push(name);
            }
        }
    }
    let nodes_down: Vec<i32> =
        image.brokers.values().filter(|b| b.fenced).map(|b| b.registration.node.0).collect();
    let mut offline_here: Vec<String> = Vec::new();
    for (_, report) in node.stats_all().await {
        offline_here.extend(report.offline.iter().map(ToString::to_string));
    }
    let mut reasons = Vec::new();
    if view.leader < 0 {
        reasons.push("no_elected_controller");
    }
    if !nodes_down.is_empty() {
        reasons.push("nodes_down");
    }
    if !leaderless.is_empty() {
        reasons.push("leaderless_partitions");
    }
    if !under_replicated.is_empty() {
        reasons.push("under_replicated_partitions");
    }
    let fenced_here = image.brokers.get(&me).is_some_and(|b| b.fenced);
    let overview = serde_json::json!({
        "is_healthy": reasons.is_empty(),
        "unhealthy_reasons": reasons,
        "controller_id": view.leader,
        "all_nodes": image.brokers.keys().map(|id| id.0).collect::<Vec<_>>(),
        "nodes_down": nodes_down,
        "leaderless_count": leaderless.len(),
        "leaderless_partitions": leaderless,
        "under_replicated_count": under_replicated.len(),
        "under_replicated_partitions": under_replicated,
        "this_node": {
            "id": me.0,
            "fenced": fenced_here,
            "offline_partitions": offline_here,
            "leads_below_min_insync_replicas": below_min_isr,
        },
    });
    format!("{overview}\n")
}

/// Cluster-wide partition gauges from this node's metadata image: (name, help, which
/// partitions count).
type Counted = fn(&crate::metadata::Placement) -> bool;
const PARTITION_GAUGES: &[(&str, &str, Counted)] = &[
    (
        "strata_partitions_leaderless",
        "Partitions with no leader (no live in-sync replica): Kafka's OfflinePartitionsCount.",
        |placement| placement.leader == crate::metadata::elect::NO_LEADER,
    ),
    (
        "strata_partitions_reassigning",
        "Partitions whose replicas are being moved (AlterPartitionReassignments).",
        crate::metadata::Placement::reassigning,
    ),
];

async fn metrics<S: Storage>(node: &Rc<Node<S>>) -> String {
    let image = node.metadata();
    let reports = node.stats_all().await;
    let mut out = String::new();
    family(&mut out, "strata_topics", "gauge", "Topics in the cluster.");
    out.push_str(&format!("strata_topics {}\n", image.topics.len()));
    family(&mut out, "strata_partitions", "gauge", "Partitions in the cluster.");
    out.push_str(&format!("strata_partitions {}\n", image.partition_count()));
    for (name, help, counted) in PARTITION_GAUGES {
        let count = image
            .topics
            .values()
            .flat_map(|topic| topic.partitions.iter())
            .filter(|placement| counted(placement))
            .count();
        family(&mut out, name, "gauge", help);
        out.push_str(&format!("{name} {count}\n"));
    }
    for (name, kind, help, value) in SHARD_COUNTERS {
        family(&mut out, name, kind, help);
        for (shard, report) in &reports {
            out.push_str(&format!("{name}{{shard=\"{}\"}} {}\n", shard.0, value(report)));
        }
    }
    family(
        &mut out,
        "strata_log_lines_dropped_total",
        "counter",
        "Log lines the broker could not write (its log output failed: a full disk, a closed pipe).",
    );
    out.push_str(&format!(
        "strata_log_lines_dropped_total {}\n",
        crate::log_output::dropped_lines()
    ));
    write_connection_counters(&mut out, &reports);
    write_cluster(&mut out, node, &image);
    write_requests(&mut out, &reports);
    write_traffic(&mut out, &reports);
    write_offsets(&mut out, &reports);
    out
}

/// What `/metrics` says of the controller quorum and the brokers.
struct ClusterView {
    leader: i64,
    leads: bool,
    term: u64,
    applied: i64,
    voter_lag: std::collections::BTreeMap<u64, u64>,
    live: usize,
    fenced: usize,
}

/// The controller quorum and the brokers' states; a single node is a quorum of itself (it
/// leads, term 0, its metadata version as the applied index, one live broker).
fn cluster_view<S: Storage>(
    node: &Rc<Node<S>>,
    image: &crate::metadata::MetadataImage,
) -> ClusterView {
    let Some(cluster) = &node.cluster else {
        let me = i64::from(node.node_id().0);
        return ClusterView {
            leader: me,
            leads: true,
            term: 0,
            applied: i64::try_from(image.version).unwrap_or(i64::MAX),
            voter_lag: [(u64::try_from(me).unwrap_or(0), 0)].into_iter().collect(),
            live: 1,
            fenced: 0,
        };
    };
    let status = &cluster.status;
    let fenced = image.brokers.values().filter(|broker| broker.fenced).count();
    ClusterView {
        leader: status.leader().and_then(|id| i64::try_from(id).ok()).unwrap_or(-1),
        leads: status.leads(),
        term: status.term(),
        applied: status.applied_index().and_then(|i| i64::try_from(i).ok()).unwrap_or(-1),
        voter_lag: status.voter_lag(),
        live: image.brokers.len() - fenced,
        fenced,
    }
}

fn write_cluster<S: Storage>(
    out: &mut String,
    node: &Rc<Node<S>>,
    image: &crate::metadata::MetadataImage,
) {
    use std::fmt::Write;
    let view = cluster_view(node, image);
    family(
        out,
        "strata_controller_leader",
        "gauge",
        "The controller leader's node id, -1 when none.",
    );
    let _ = writeln!(out, "strata_controller_leader {}", view.leader);
    family(out, "strata_controller_is_leader", "gauge", "1 when this node's controller leads.");
    let _ = writeln!(out, "strata_controller_is_leader {}", u8::from(view.leads));
    family(out, "strata_controller_term", "gauge", "The controller quorum's Raft term.");
    let _ = writeln!(out, "strata_controller_term {}", view.term);
    family(
        out,
        "strata_controller_applied_index",
        "gauge",
        "The last metadata log index applied on this node (-1 before any).",
    );
    let _ = writeln!(out, "strata_controller_applied_index {}", view.applied);
    family(
        out,
        "strata_controller_voter_lag",
        "gauge",
        "Metadata log entries each voter is behind the leader (exported by the leader only).",
    );
    for (voter, lag) in view.voter_lag {
        let _ = writeln!(out, "strata_controller_voter_lag{{voter=\"{voter}\"}} {lag}");
    }
    family(out, "strata_cluster_brokers", "gauge", "Registered brokers by state (live, fenced).");
    let _ = writeln!(out, "strata_cluster_brokers{{state=\"live\"}} {}", view.live);
    let _ = writeln!(out, "strata_cluster_brokers{{state=\"fenced\"}} {}", view.fenced);
}

fn write_connection_counters(
    out: &mut String,
    reports: &[(shard::runtime::ShardId, Box<StatsReport>)],
) {
    family(
        out,
        "strata_connections_refused_total",
        "counter",
        "Connections refused: per_ip (closed at once, max.connections.per.ip) or \
         max_connections (left waiting to be accepted).",
    );
    for (shard, report) in reports {
        for (reason, count) in &report.counters.connections_refused {
            out.push_str(&format!(
                "strata_connections_refused_total{{shard=\"{}\",reason=\"{}\"}} {count}\n",
                shard.0,
                reason.label()
            ));
        }
    }
    family(
        out,
        "strata_connections_closed_total",
        "counter",
        "Connections the broker closed: idle (connections.max.idle.ms) or frame_deadline (a \
         request that did not finish arriving).",
    );
    for (shard, report) in reports {
        for (reason, count) in &report.counters.connections_closed {
            out.push_str(&format!(
                "strata_connections_closed_total{{shard=\"{}\",reason=\"{}\"}} {count}\n",
                shard.0,
                reason.label()
            ));
        }
    }
    family(out, "strata_mesh_calls_total", "counter", "Cross-core calls by service and direction.");
    for (shard, report) in reports {
        for (direction, counts) in
            [("out", &report.mesh.routed_out), ("in", &report.mesh.routed_in)]
        {
            for (service, count) in counts {
                out.push_str(&format!(
                    "strata_mesh_calls_total{{shard=\"{}\",service=\"{service}\",direction=\"{direction}\"}} {count}\n",
                    shard.0
                ));
            }
        }
    }
}

fn write_requests(out: &mut String, reports: &[(shard::runtime::ShardId, Box<StatsReport>)]) {
    family(out, "strata_requests_total", "counter", "Requests served, by API.");
    for (shard, report) in reports {
        for (api, count) in &report.counters.requests_by_api {
            out.push_str(&format!(
                "strata_requests_total{{shard=\"{}\",api=\"{}\"}} {count}\n",
                shard.0,
                api_name(*api)
            ));
        }
    }
    family(
        out,
        "strata_request_latency_seconds",
        "histogram",
        "Request latency from decode to response written, by API and shard.",
    );
    for (shard, report) in reports {
        for (api, histogram) in &report.counters.request_latency_us {
            let labels = format!("shard=\"{}\",api=\"{}\"", shard.0, api_name(*api));
            write_histogram(out, "strata_request_latency_seconds", &labels, histogram);
        }
    }
    write_replication(out, reports);
    write_transactions(out, reports);
    family(
        out,
        "strata_fsync_latency_seconds",
        "histogram",
        "fdatasync latency of group commits, by shard.",
    );
    for (shard, report) in reports {
        let labels = format!("shard=\"{}\"", shard.0);
        write_histogram(out, "strata_fsync_latency_seconds", &labels, &report.fsync_latency_us);
    }
    family(
        out,
        "strata_request_errors_total",
        "counter",
        "Partition-level errors returned, by Kafka error code.",
    );
    for (shard, report) in reports {
        for (code, count) in &report.counters.errors_by_code {
            out.push_str(&format!(
                "strata_request_errors_total{{shard=\"{}\",code=\"{code}\"}} {count}\n",
                shard.0
            ));
        }
    }
}

/// Replication: follower fetch round trips, and how far each follower of a partition this
/// broker leads is behind.
fn write_replication(out: &mut String, reports: &[(shard::runtime::ShardId, Box<StatsReport>)]) {
    family(
        out,
        "strata_replica_fetch_round_trip_seconds",
        "histogram",
        "Round trips of follower fetches to their leaders (peer streams), by shard.",
    );
    for (shard, report) in reports {
        let labels = format!("shard=\"{}\"", shard.0);
        write_histogram(
            out,
            "strata_replica_fetch_round_trip_seconds",
            &labels,
            &report.peer_round_trip_us,
        );
    }
    family(
        out,
        "strata_follower_lag_offsets",
        "gauge",
        "How far each follower is behind its leader's log end, per partition this broker leads.",
    );
    for (_, report) in reports {
        for (partition, behind, follower, _) in &report.follower_lags {
            out.push_str(&format!(
                "strata_follower_lag_offsets{{topic=\"{}\",partition=\"{}\",follower=\"{}\"}} {behind}\n",
                partition.topic, partition.partition.0, follower.0
            ));
        }
    }
    family(
        out,
        "strata_follower_lag_seconds",
        "gauge",
        "Time since each follower last caught up with its leader, per partition this broker leads.",
    );
    for (_, report) in reports {
        for (partition, _, follower, ms) in &report.follower_lags {
            out.push_str(&format!(
                "strata_follower_lag_seconds{{topic=\"{}\",partition=\"{}\",follower=\"{}\"}} {:.3}\n",
                partition.topic,
                partition.partition.0,
                follower.0,
                (*ms).max(0) as f64 / 1000.0
            ));
        }
    }
}

/// Transactions: how long they were open, and how far they hold the last stable offset back.
fn write_transactions(out: &mut String, reports: &[(shard::runtime::ShardId, Box<StatsReport>)]) {
    family(
        out,
        "strata_transaction_duration_seconds",
        "histogram",
        "How long completed transactions were open (first partition added to completion), by shard.",
    );
    for (shard, report) in reports {
        let labels = format!("shard=\"{}\"", shard.0);
        write_histogram(
            out,
            "strata_transaction_duration_seconds",
            &labels,
            &report.txn_duration_us,
        );
    }
    family(
        out,
        "strata_last_stable_offset_lag",
        "gauge",
        "High watermark minus last stable offset, per partition an open transaction holds back.",
    );
    for (_, report) in reports {
        for (partition, lag) in &report.lso_lags {
            out.push_str(&format!(
                "strata_last_stable_offset_lag{{topic=\"{}\",partition=\"{}\"}} {lag}\n",
                partition.topic, partition.partition.0
            ));
        }
    }
}

fn write_traffic(out: &mut String, reports: &[(shard::runtime::ShardId, Box<StatsReport>)]) {
    let traffic: [(&str, &str, usize); 4] = [
        ("strata_topic_messages_in_total", "Records appended, by topic.", 0),
        ("strata_topic_bytes_in_total", "Batch bytes appended, by topic.", 1),
        ("strata_topic_messages_out_total", "Records fetched, by topic.", 2),
        ("strata_topic_bytes_out_total", "Batch bytes fetched, by topic.", 3),
    ];
    for (name, help, index) in traffic {
        family(out, name, "counter", help);
        let mut totals: std::collections::BTreeMap<&str, u64> = Default::default();
        for (_, report) in reports {
            for (topic, values) in &report.counters.topic_traffic {
                *totals.entry(topic.as_str()).or_default() +=
                    values.get(index).copied().unwrap_or(0);
            }
        }
        for (topic, value) in totals {
            out.push_str(&format!("{name}{{topic=\"{}\"}} {value}\n", escape_label(topic)));
        }
    }
}

fn write_offsets(out: &mut String, reports: &[(shard::runtime::ShardId, Box<StatsReport>)]) {
    family(
        out,
        "strata_consumer_group_lag",
        "gauge",
        "Log end offset minus committed offset, per group and partition.",
    );
    let ends: std::collections::HashMap<&wire::ids::TopicPartition, i64> = reports
        .iter()
        .flat_map(|(_, report)| report.offsets.iter().map(|(key, _, end)| (key, *end)))
        .collect();
    for (_, report) in reports {
        for (group, key, committed) in &report.committed {
            if let Some(end) = ends.get(key) {
                let lag = (end - committed).max(0);
                out.push_str(&format!(
                    "strata_consumer_group_lag{{group=\"{}\",topic=\"{}\",partition=\"{}\"}} {lag}\n",
                    escape_label(group),
                    escape_label(&key.topic),
                    key.partition.0
                ));
            }
        }
    }
    type Pick = fn(&(wire::ids::TopicPartition, i64, i64)) -> i64;
    let series: [(&str, &str, Pick); 2] = [
        ("strata_log_end_offset", "Log end offset per partition.", |(_, _, end)| *end),
        ("strata_log_start_offset", "Log start offset per partition.", |(_, start, _)| *start),
    ];
    for (name, help, pick) in series {
        family(out, name, "gauge", help);
        for (shard, report) in reports {
            for offsets in &report.offsets {
                let key = &offsets.0;
                out.push_str(&format!(
                    "{name}{{shard=\"{}\",topic=\"{}\",partition=\"{}\"}} {}\n",
                    shard.0,
                    escape_label(&key.topic),
                    key.partition.0,
                    pick(offsets)
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_as_the_text_format_requires() {
        assert_eq!(escape_label("plain-group"), "plain-group");
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
