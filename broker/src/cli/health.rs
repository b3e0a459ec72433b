//! `strata cluster health` and `strata cluster partitions`: the cluster as its metadata says,
//! asked of any broker (DescribeCluster v2 with fenced brokers, Metadata of every topic), as
//! rpk's `cluster health` and `kafka-topics --describe --under-replicated-partitions` show it.
//! Healthy: a controller, no fenced broker, no partition without a leader, none with fewer
//! in-sync replicas than replicas.

use super::{check, Client};
use kafka_protocol::messages::*;
use serde_json::json;
use std::time::Duration;

/// A partition as Metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

impl PartitionState {
    pub fn leaderless(&self) -> bool {
        self.leader < 0
    }

    pub fn under_replicated(&self) -> bool {
        self.isr.len() < self.replicas.len()
    }

    fn name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

/// DescribeCluster v2 with fenced brokers (KIP-1073).
pub fn describe_cluster(client: &mut Client) -> Result<DescribeClusterResponse, String> {
    let mut request = DescribeClusterRequest::default();
    request.include_fenced_brokers = true;
    let cluster = match client.call(ApiKey::DescribeCluster, 2, request.into())? {
        ResponseKind::DescribeCluster(response) => response,
        _ => return Err("unexpected response to DescribeCluster".into()),
    };
    check(cluster.error_code, cluster.error_message.as_ref(), "describing the cluster")?;
    Ok(cluster)
}

/// What the cluster's metadata says now.
pub struct Snapshot {
    pub controller: i32,
    /// (broker id, `host:port`, fenced).
    pub brokers: Vec<(i32, String, bool)>,
    pub partitions: Vec<PartitionState>,
}

impl Snapshot {
    pub fn take(bootstrap: &str) -> Result<Snapshot, String> {
        let mut client = Client::connect(bootstrap)?;
        let cluster = describe_cluster(&mut client)?;
        let brokers = cluster
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, format!("{}:{}", b.host.as_str(), b.port), b.is_fenced))
            .collect();
        let mut request = MetadataRequest::default();
        request.topics = None;
        request.allow_auto_topic_creation = false;
        let metadata = match client.call(ApiKey::Metadata, 12, RequestKind::Metadata(request))? {
            ResponseKind::Metadata(response) => response,
            _ => return Err("unexpected response to Metadata".into()),
        };
        let mut partitions = Vec::new();
        for topic in metadata.topics {
            let name = topic.name.map(|n| n.0.to_string()).unwrap_or_default();
            for p in topic.partitions {
                partitions.push(PartitionState {
                    topic: name.clone(),
                    partition: p.partition_index,
                    leader: if p.error_code == 0 { p.leader_id.0 } else { -1 },
                    replicas: p.replica_nodes.iter().map(|n| n.0).collect(),
                    isr: p.isr_nodes.iter().map(|n| n.0).collect(),
                });
            }
        }
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(Snapshot { controller: cluster.controller_id.0, brokers, partitions })
    }

    pub fn fenced(&self) -> Vec<i32> {
        self.brokers.iter().filter(|(_, _, fenced)| *fenced).map(|(id, _, _)| *id).collect()
    }

    pub fn healthy(&self) -> bool {
        self.controller >= 0
            && self.fenced().is_empty()
            && !self.partitions.iter().any(|p| p.leaderless() || p.under_replicated())
    }

    /// Redpanda's `/v1/cluster/health_overview` shape, as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        let names = |keep: fn(&PartitionState) -> bool| -> Vec<String> {
            self.partitions.iter().filter(|p| keep(p)).map(PartitionState::name).collect()
        };
        let leaderless = names(PartitionState::leaderless);
        let under_replicated = names(PartitionState::under_replicated);
        let mut reasons = Vec::new();
        if self.controller < 0 {
            reasons.push("no_elected_controller");
        }
        if !self.fenced().is_empty() {
            reasons.push("nodes_down");
        }
        if !leaderless.is_empty() {
            reasons.push("leaderless_partitions");
        }
        if !under_replicated.is_empty() {
            reasons.push("under_replicated_partitions");
        }
        json!({
            "is_healthy": self.healthy(),
            "unhealthy_reasons": reasons,
            "controller_id": self.controller,
            "all_nodes": self.brokers.iter().map(|(id, _, _)| *id).collect::<Vec<_>>(),
            "nodes_down": self.fenced(),
            "leaderless_count": leaderless.len(),
            "leaderless_partitions": leaderless,
            "under_replicated_count": under_replicated.len(),
            "under_replicated_partitions": under_replicated,
        })
    }

    fn render_text(&self) -> String {
        let mut out = String::new();
        let verdict = if self.healthy() { "yes" } else { "no" };
        out.push_str(&format!("healthy:                     {verdict}\n"));
        let controller =
            if self.controller >= 0 { self.controller.to_string() } else { "none".into() };
        out.push_str(&format!("controller:                  {controller}\n"));
        let all: Vec<String> = self.brokers.iter().map(|(id, _, _)| id.to_string()).collect();
        out.push_str(&format!("brokers:                     [{}]\n", all.join(", ")));
        let down: Vec<String> = self.fenced().iter().map(i32::to_string).collect();
        out.push_str(&format!("brokers down (fenced):       [{}]\n", down.join(", ")));
        for (label, keep) in [
            ("leaderless partitions", PartitionState::leaderless as fn(&PartitionState) -> bool),
            ("under-replicated partitions", PartitionState::under_replicated),
        ] {
            let matching: Vec<&PartitionState> =
                self.partitions.iter().filter(|p| keep(p)).collect();
            out.push_str(&format!("{:<29}{}\n", format!("{label}:"), matching.len()));
            for p in matching {
                out.push_str(&format!(
                    "  {} leader {} replicas {:?} isr {:?}\n",
                    p.name(),
                    p.leader,
                    p.replicas,
                    p.isr
                ));
            }
        }
        out
    }
}

/// `strata cluster health`: exit 0 when healthy, 1 otherwise (`Err` carries no message then:
/// the report is the output). `--watch` prints again on every change, every `interval`;
/// with `exit_when_healthy` it returns as soon as the cluster is healthy.
pub fn health(
    bootstrap: &str,
    json_output: bool,
    watch: bool,
    exit_when_healthy: bool,
    interval: Duration,
) -> Result<bool, String> {
    let mut last = String::new();
    loop {
        let snapshot = Snapshot::take(bootstrap)?;
        let shown =
            if json_output { format!("{}\n", snapshot.to_json()) } else { snapshot.render_text() };
        if shown != last {
            if watch && !last.is_empty() && !json_output {
                println!("---");
            }
            print!("{shown}");
            last = shown;
        }
        let healthy = snapshot.healthy();
        if !watch || (exit_when_healthy && healthy) {
            return Ok(healthy);
        }
        std::thread::sleep(interval);
    }
}

/// `strata cluster partitions`: every partition with its leader, replicas and ISR, or only
/// the under-replicated or leaderless ones.
pub fn partitions(
    bootstrap: &str,
    topic: Option<&str>,
    under_replicated: bool,
    leaderless: bool,
    json_output: bool,
) -> Result<(), String> {
    let snapshot = Snapshot::take(bootstrap)?;
    let shown: Vec<&PartitionState> = snapshot
        .partitions
        .iter()
        .filter(|p| topic.is_none_or(|t| p.topic == t))
        .filter(|p| !under_replicated || p.under_replicated())
        .filter(|p| !leaderless || p.leaderless())
        .collect();
    if json_output {
        let rows: Vec<serde_json::Value> = shown
            .iter()
            .map(|p| {
                json!({"topic": p.topic, "partition": p.partition, "leader": p.leader,
                       "replicas": p.replicas, "isr": p.isr,
                       "under_replicated": p.under_replicated(), "leaderless": p.leaderless()})
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    println!(
        "{:<32} {:>9} {:>7} {:<16} {:<16} STATUS",
        "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"
    );
    for p in shown {
        let list = |nodes: &[i32]| nodes.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        let status = match (p.leaderless(), p.under_replicated()) {
            (true, _) => "leaderless",
            (false, true) => "under-replicated",
            (false, false) => "ok",
        };
        println!(
            "{:<32} {:>9} {:>7} {:<16} {:<16} {status}",
            p.topic,
            p.partition,
            p.leader,
            list(&p.replicas),
            list(&p.isr)
        );
    }
    Ok(())
}
