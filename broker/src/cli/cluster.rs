//! `strata cluster status` (the brokers, fenced or not, the controller leader and each
//! voter's lag, from DescribeCluster v2 and DescribeQuorum v2 asked of any broker) and
//! `strata cluster local` (a cluster of N nodes on loopback ports, for trying it: this binary
//! started N times as `serve`, each a `broker,controller` voter with one shard and no CPU
//! pinning; a node that exits is reported and the others keep running; Ctrl-C or SIGTERM
//! stops them all, each with its controlled shutdown).

use super::{check, Client};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn status(bootstrap: &str, json_output: bool) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let cluster = super::health::describe_cluster(&mut client)?;
    let mut text = String::new();
    text.push_str(&format!("cluster {}\n", cluster.cluster_id.as_str()));
    let brokers_json = write_brokers(&mut text, &cluster);
    let log = describe_metadata_log(&mut client)?;
    text.push_str(&format!(
        "controller leader {} term {} committed offset {}\n",
        log.leader_id.0, log.leader_epoch, log.high_watermark
    ));
    let voters_json = write_voters(&mut text, &log);
    if json_output {
        let status = serde_json::json!({"cluster_id": cluster.cluster_id.as_str(),
            "controller": {"leader": log.leader_id.0, "term": log.leader_epoch,
                           "committed_offset": log.high_watermark},
            "brokers": brokers_json, "voters": voters_json});
        println!("{status}");
    } else {
        print!("{text}");
    }
    Ok(())
}

/// The brokers' table of `status`, written to `text`; returned as JSON values too.
fn write_brokers(text: &mut String, cluster: &DescribeClusterResponse) -> Vec<serde_json::Value> {
    let mut brokers_json = Vec::new();
    text.push_str(&format!("{:<6} {:<28} {:<12} {:<8}\n", "BROKER", "ENDPOINT", "RACK", "STATE"));
    for broker in &cluster.brokers {
        let state = if broker.is_fenced { "fenced" } else { "live" };
        let is_controller = broker.broker_id == cluster.controller_id;
        let controller = if is_controller { " (controller)" } else { "" };
        let endpoint = format!("{}:{}", broker.host.as_str(), broker.port);
        let rack = broker.rack.as_ref().map(|rack| rack.to_string());
        text.push_str(&format!(
            "{:<6} {:<28} {:<12} {state}{controller}\n",
            broker.broker_id.0,
            endpoint,
            rack.as_deref().unwrap_or("-"),
        ));
        brokers_json.push(serde_json::json!({"id": broker.broker_id.0, "endpoint": endpoint,
            "rack": rack, "state": state, "controller": is_controller}));
    }
    brokers_json
}

/// The metadata log's partition as DescribeQuorum v2 describes it.
fn describe_metadata_log(
    client: &mut Client,
) -> Result<describe_quorum_response::PartitionData, String> {
    let mut partition = PartitionData::default();
    partition.partition_index = 0;
    let mut topic = TopicData::default();
    topic.topic_name = TopicName(StrBytes::from_static_str("__cluster_metadata"));
    topic.partitions = vec![partition];
    let mut request = DescribeQuorumRequest::default();
    request.topics = vec![topic];
    // While a leader is being elected the answer is NOT_LEADER_OR_FOLLOWER: ask again, for
    // up to 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let quorum = match client.call(ApiKey::DescribeQuorum, 2, request.clone().into())? {
            ResponseKind::DescribeQuorum(response) => response,
            _ => return Err("unexpected response to DescribeQuorum".into()),
        };
        check(quorum.error_code, quorum.error_message.as_ref(), "describing the quorum")?;
        let Some(log) =
            quorum.topics.into_iter().next().and_then(|t| t.partitions.into_iter().next())
        else {
            return Err("DescribeQuorum answered without the metadata log".into());
        };
        let moving = super::is_error(log.error_code, ResponseError::NotLeaderOrFollower);
        if moving && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        check(log.error_code, log.error_message.as_ref(), "describing the quorum")?;
        return Ok(log);
    }
}

/// The voters' (and observers') table of `status`, with each one's lag behind the leader and
/// last contact, written to `text`; returned as JSON values too.
fn write_voters(
    text: &mut String,
    log: &describe_quorum_response::PartitionData,
) -> Vec<serde_json::Value> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64);
    let leader_end =
        log.current_voters.iter().find(|v| v.replica_id == log.leader_id).map(|v| v.log_end_offset);
    text.push_str(&format!(
        "{:<6} {:<10} {:<12} {:<8} {:<14}\n",
        "VOTER", "ROLE", "LOG END", "LAG", "LAST CONTACT"
    ));
    let mut voters_json = Vec::new();
    let rows = log
        .current_voters
        .iter()
        .map(|v| (v, "voter"))
        .chain(log.observers.iter().map(|v| (v, "observer")));
    for (replica, role) in rows {
        let role = if replica.replica_id == log.leader_id { "leader" } else { role };
        let lag = match (leader_end, replica.log_end_offset) {
            (Some(leader), end) if end >= 0 => Some((leader - end).max(0)),
            _ => None,
        };
        let contact_ms = match replica.last_fetch_timestamp {
            stamp if stamp >= 0 => Some((now - stamp).max(0)),
            _ => None,
        };
        text.push_str(&format!(
            "{:<6} {:<10} {:<12} {:<8} {}\n",
            replica.replica_id.0,
            role,
            replica.log_end_offset,
            lag.map_or_else(|| "?".to_string(), |lag| lag.to_string()),
            contact_ms.map_or_else(|| "unknown".to_string(), |ms| format!("{ms} ms ago")),
        ));
        voters_json.push(serde_json::json!({"id": replica.replica_id.0, "role": role,
            "log_end_offset": replica.log_end_offset, "lag": lag,
            "last_contact_ms_ago": contact_ms}));
    }
    voters_json
}

/// A node of `strata cluster local`: its ports and its process.
struct LocalNode {
    id: u32,
    kafka: u16,
    child: Child,
}

/// The ports of node `id` (1-based): Kafka at `base + 100 * (id - 1)`, its controller one
/// above, its admin endpoint at `base + 10 + 100 * (id - 1)`.
fn ports(base: u16, id: u32) -> Result<(u16, u16, u16), String> {
    let offset = u16::try_from(100 * (id - 1)).map_err(|_| "too many nodes".to_string())?;
    let kafka = base.checked_add(offset).ok_or("the base port is too high")?;
    let controller = kafka.checked_add(1).ok_or("the base port is too high")?;
    let admin = kafka.checked_add(10).ok_or("the base port is too high")?;
    Ok((kafka, controller, admin))
}

pub fn local(nodes: u32, data_dir: &Path, base_port: u16) -> Result<(), String> {
    if !(1..=9).contains(&nodes) {
        return Err(format!("--nodes {nodes}: use 1 to 9"));
    }
    let data_dir =
        std::path::absolute(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let binary = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let mut voters = Vec::new();
    for id in 1..=nodes {
        let (_, controller, _) = ports(base_port, id)?;
        voters.push(format!("{id}@127.0.0.1:{controller}"));
    }
    let voters = voters.join(",");
    let mut running: Vec<LocalNode> = Vec::new();
    for id in 1..=nodes {
        match start_node(&binary, &data_dir, base_port, id, &voters) {
            Ok(node) => running.push(node),
            Err(error) => {
                stop_all(&mut running);
                return Err(error);
            }
        }
    }
    let bootstrap: Vec<String> = running.iter().map(|n| format!("127.0.0.1:{}", n.kafka)).collect();
    let bootstrap = bootstrap.join(",");
    let stop = crate::shutdown::block_stop_signals()?;
    match wait_ready(&mut running, nodes as usize, &stop) {
        Ok(true) => {}
        Ok(false) => {
            stop_all(&mut running);
            return Ok(());
        }
        Err(error) => {
            stop_all(&mut running);
            return Err(error);
        }
    }
    println!("strata cluster of {nodes} nodes is ready; bootstrap servers: {bootstrap}");
    println!("logs: {}/node-N.log; Ctrl-C stops every node", data_dir.display());
    // A node that exits (killed to try a failover) is reported; the others keep running.
    let mut reported = std::collections::BTreeSet::new();
    loop {
        if wait_signal(&stop, Duration::from_millis(500)) {
            break;
        }
        for node in running.iter_mut() {
            if let Ok(Some(status)) = node.child.try_wait() {
                if reported.insert(node.id) {
                    eprintln!("strata cluster local: node {} exited ({status})", node.id);
                }
            }
        }
        if reported.len() == running.len() {
            eprintln!("strata cluster local: every node has exited");
            break;
        }
    }
    stop_all(&mut running);
    Ok(())
}

fn start_node(
    binary: &Path,
    data_dir: &Path,
    base: u16,
    id: u32,
    voters: &str,
) -> Result<LocalNode, String> {
    let (kafka, _, admin) = ports(base, id)?;
    let log_path: PathBuf = data_dir.join(format!("node-{id}.log"));
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut command = Command::new(binary);
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir.join(format!("node-{id}")))
        .args(["--listen", &format!("127.0.0.1:{kafka}")])
        .args(["--advertise", &format!("127.0.0.1:{kafka}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .args(["--cores", "1", "--node-id", &id.to_string()])
        .args(["--set", &format!("controller.quorum.voters={voters}")])
        .args(["--set", "cpu.pinning=false"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl in the forked child before exec: no allocation, no locks. A node gets
        // SIGTERM when this process dies however it dies, so none is left behind.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = command.spawn().map_err(|e| format!("starting node {id}: {e}"))?;
    Ok(LocalNode { id, kafka, child })
}

/// Waits (up to 120 s) until every node lists all `expected` brokers; `false` when a stop
/// signal came first.
fn wait_ready(
    running: &mut [LocalNode],
    expected: usize,
    stop: &libc::sigset_t,
) -> Result<bool, String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut ready = vec![false; running.len()];
    while ready.iter().any(|r| !r) {
        if Instant::now() >= deadline {
            return Err("the nodes were not ready within 120 s (see their logs)".into());
        }
        if let Some(gone) = exited(running) {
            return Err(format!("node {gone} exited while starting (see node-{gone}.log)"));
        }
        for (index, node) in running.iter().enumerate() {
            if !ready[index] {
                ready[index] = lists_brokers(node.kafka, expected);
            }
        }
        if wait_signal(stop, Duration::from_millis(200)) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn lists_brokers(port: u16, expected: usize) -> bool {
    let Ok(mut client) = Client::connect(&format!("127.0.0.1:{port}")) else { return false };
    if client.set_timeout(Duration::from_secs(2)).is_err() {
        return false;
    }
    match client.call(ApiKey::DescribeCluster, 0, DescribeClusterRequest::default().into()) {
        Ok(ResponseKind::DescribeCluster(response)) => {
            response.brokers.len() == expected && response.controller_id.0 >= 0
        }
        _ => false,
    }
}

/// The id of a node whose process has ended, if any.
fn exited(running: &mut [LocalNode]) -> Option<u32> {
    running
        .iter_mut()
        .find_map(|node| (!matches!(node.child.try_wait(), Ok(None))).then_some(node.id))
}

/// SIGTERM to every node at once (each runs its controlled shutdown), then waits up to 30 s
/// before SIGKILL.
fn stop_all(running: &mut [LocalNode]) {
    for node in running.iter() {
        if let Ok(pid) = i32::try_from(node.child.id()) {
            // SAFETY: a signal to a child process this process started and has not reaped.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for node in running.iter_mut() {
        loop {
            match node.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = node.child.kill();
                    let _ = node.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
    eprintln!("strata cluster local: every node stopped");
}

/// Whether SIGINT or SIGTERM arrived within `timeout`.
fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> bool {
    let timeout = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: sigtimedwait on a set this process blocked; the info pointer may be null.
    unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &timeout) > 0 }
}
