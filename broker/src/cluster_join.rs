//! Joining the cluster at startup (a node with `controller.quorum.voters`): start the
//! controller thread (a broker-only node asks to be a Raft learner), agree on the cluster id
//! through the quorum, check the data directory's identity against it, and register this
//! broker, before any shard serves; or, for a controller-only node, register its directory
//! and serve the quorum alone (`serve_controller`).
//!
//! The cluster id: the first node to find the quorum's image without one proposes its own
//! (`meta.properties`' if its directory has one, else a new random id) on the condition that
//! the image is still empty; the first such proposal to commit wins and every other is
//! refused as stale, so all nodes end up with one id. A directory whose `meta.properties`
//! names another cluster is refused.
//! Runs on: the main thread, before the shards start (it blocks on the controller thread).

use crate::config::BrokerConfig;
use crate::controller::protocol::ProposeError;
use crate::controller::quorum::{self, ControllerHandle, Identity, QuorumConfig};
use crate::controller::types::{Proposal, Refused};
use crate::metadata::image::RegisteredListener;
use crate::metadata::meta_properties::{self, MetaProperties};
use crate::metadata::records::BrokerRegistration;
use crate::metadata::{store, MetadataImage, MetadataRecord};
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::ids::NodeId;

/// The controller log's directory under the data directory.
pub const METADATA_DIR: &str = "__cluster_metadata";
/// How often a node still waiting for the quorum says so.
const WAITING_REPORT_SECS: u64 = 10;

/// A started controller thread and this data directory's identity.
struct Started {
    handle: Arc<ControllerHandle>,
    identity: Option<MetaProperties>,
    directory_id: String,
}

/// Starts the controller thread (heartbeating for `broker` if any), and
/// for a node that does not vote, has the quorum add it as a learner.
fn start_controller(
    config: &BrokerConfig,
    broker: Option<(NodeId, [u8; 16])>,
) -> Result<Started, String> {
    let cluster = &config.cluster;
    let (host, port) = cluster
        .controller_address()
        .ok_or("no controller listener: a broker-only node needs CONTROLLER://HOST:PORT")?;
    let listen = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("controller listener {host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("controller listener {host}:{port}: no address"))?;
    let voters = cluster
        .voters
        .iter()
        .map(|voter| (voter.id as u64, format!("{}:{}", voter.host, voter.port)))
        .collect();
    let identity = meta_properties::read(&config.data_dir)?;
    // A new directory gets its id now: the quorum learns it with the registration.
    let directory_id = identity.as_ref().map_or_else(store::random_id, |m| m.directory_id.clone());
    let quorum_config = QuorumConfig {
        node_id: config.node_id as u64,
        voters,
        listen,
        dir: config.data_dir.join(METADATA_DIR),
        broker,
        heartbeat_interval: Duration::from_millis(config.heartbeat_interval_ms),
        session_timeout: Duration::from_millis(config.session_timeout_ms),
        rebalance_interval: config.leader_rebalance_interval_ms.map(Duration::from_millis),
        identity: Identity {
            cluster_id: identity.as_ref().map(|m| m.cluster_id.clone()),
            directory_id: directory_id.clone(),
        },
    };
    let handle = Arc::new(
        quorum::start(quorum_config).map_err(|e| format!("starting the controller: {e}"))?,
    );
    tracing::info!(
        node = config.node_id,
        controller = %handle.listen,
        voters = cluster.voters.len(),
        voter = cluster.is_voter(),
        "controller started; joining the quorum"
    );
    if !cluster.is_voter() {
        // The leader must reach this learner: its listener's host, or the advertised one
        // when the listener is on every interface.
        let reachable = if listen.ip().is_unspecified() { &config.advertise_host } else { &host };
        learn(&handle, format!("{reachable}:{port}"))?;
    }
    Ok(Started { handle, identity, directory_id })
}

/// Has the quorum add this node as a learner, as long as it takes, until shutdown.
fn learn(handle: &ControllerHandle, address: String) -> Result<(), String> {
    let started = Instant::now();
    let mut reported = Instant::now();
    loop {
        if crate::shutdown::requested() {
            return Err("shutdown requested while joining the quorum as a learner".into());
        }
        match futures_lite::future::block_on(handle.join_as_learner(address.clone())) {
            Ok(()) => {
                tracing::info!(%address, "joined the controller quorum as a learner");
                return Ok(());
            }
            Err(error) if reported.elapsed() >= Duration::from_secs(WAITING_REPORT_SECS) => {
                tracing::warn!(
                    seconds = started.elapsed().as_secs(),
                    %error,
                    "still waiting for the controller quorum to add this node as a learner"
                );
                reported = Instant::now();
            }
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Agrees on the cluster id through the quorum and checks or writes `meta.properties`.
fn agree_on_cluster(config: &BrokerConfig, started: &Started) -> Result<MetadataImage, String> {
    let identity = &started.identity;
    let proposed_id = identity.as_ref().map_or_else(store::random_id, |m| m.cluster_id.clone());
    let image = settle(&started.handle, "the cluster id", |image| {
        if !image.cluster_id.is_empty() {
            return None;
        }
        Some(Proposal {
            expected_version: Some(image.version),
            records: vec![MetadataRecord::ClusterId { cluster_id: proposed_id.clone() }],
        })
    })?;
    match identity {
        Some(meta) => meta.check(&image.cluster_id, config.node_id)?,
        None => meta_properties::write(
            &config.data_dir,
            &MetaProperties {
                cluster_id: image.cluster_id.clone(),
                node_id: config.node_id,
                directory_id: started.directory_id.clone(),
            },
        )?,
    }
    Ok(image)
}

/// Starts the controller and joins the cluster as a broker (a voter or a learner); the image
/// to start the shards from.
pub fn join(
    config: &BrokerConfig,
    shards: usize,
) -> Result<(Arc<ControllerHandle>, MetadataImage), String> {
    let incarnation = *uuid::Uuid::new_v4().as_bytes();
    let started = start_controller(config, Some((NodeId(config.node_id), incarnation)))?;
    agree_on_cluster(config, &started)?;
    let registration = BrokerRegistration {
        node: NodeId(config.node_id),
        incarnation,
        directory_id: started.directory_id.clone(),
        host: config.advertise_host.clone(),
        port: u16::try_from(config.advertise_port)
            .map_err(|_| format!("advertised port {} is not a port", config.advertise_port))?,
        rack: config.cluster.rack.clone(),
        shards: u16::try_from(shards).unwrap_or(u16::MAX),
        listeners: config
            .listeners
            .iter()
            .map(|listener| -> Result<RegisteredListener, String> {
                Ok(RegisteredListener {
                    name: listener.name.clone(),
                    host: listener.advertise_host.clone(),
                    port: u16::try_from(listener.advertise_port).map_err(|_| {
                        format!("advertised port {} is not a port", listener.advertise_port)
                    })?,
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let handle = started.handle;
    let mut registered = false;
    let image = settle(&handle, "registering this broker", |image| {
        let current = image.brokers.get(&registration.node);
        if registered && current.is_some_and(|b| b.registration == registration) {
            return None;
        }
        registered = true;
        Some(Proposal {
            expected_version: None,
            records: vec![MetadataRecord::RegisterBroker { broker: registration.clone() }],
        })
    })?;
    tracing::info!(
        cluster_id = %image.cluster_id,
        brokers = image.brokers.len(),
        leader = ?handle.status.leader(),
        "joined the cluster"
    );
    Ok((handle, image))
}

/// A controller-only node (`process.roles=controller`): a voter of the quorum and nothing
/// else (no shards, no Kafka listener), until a shutdown signal. Its data directory is
/// registered (`RegisterController`) so that the quorum knows it by it, as brokers are by
/// their registration.
pub fn serve_controller(config: &BrokerConfig) -> Result<(), String> {
    let started = start_controller(config, None)?;
    agree_on_cluster(config, &started)?;
    let node = NodeId(config.node_id);
    let directory_id = started.directory_id.clone();
    let image = settle(&started.handle, "registering this controller", |image| {
        if image.controllers.get(&node) == Some(&directory_id) {
            return None;
        }
        Some(Proposal {
            expected_version: None,
            records: vec![MetadataRecord::RegisterController {
                node,
                directory_id: directory_id.clone(),
            }],
        })
    })?;
    tracing::info!(
        cluster_id = %image.cluster_id,
        controller = %started.handle.listen,
        role = "controller",
        "ready"
    );
    while !crate::shutdown::requested() {
        std::thread::sleep(Duration::from_millis(crate::shutdown::SHUTDOWN_POLL_MS));
    }
    drop(started);
    tracing::info!("clean shutdown complete");
    Ok(())
}

/// Proposes what `next` asks for until it asks for nothing (the image holds what it wants),
/// waiting for the quorum as long as it takes (other voters may start later), until shutdown
/// is requested; the image then.
fn settle(
    handle: &ControllerHandle,
    what: &str,
    mut next: impl FnMut(&MetadataImage) -> Option<Proposal>,
) -> Result<MetadataImage, String> {
    let started = Instant::now();
    let mut reported = Instant::now();
    loop {
        if crate::shutdown::requested() {
            return Err(format!("shutdown requested while waiting for {what}"));
        }
        let (image, _) = handle.images.latest();
        let Some(proposal) = next(&image) else {
            return Ok(MetadataImage::clone(&image));
        };
        match futures_lite::future::block_on(handle.propose(proposal)) {
            Ok(committed) => match committed.applied.refused {
                None | Some(Refused::Stale { .. }) => {
                    wait_applied(handle, committed.index);
                }
                Some(Refused::Invalid(error)) => {
                    return Err(format!("the quorum refused {what}: {error}"));
                }
            },
            Err(ProposeError::Failed(error)) => return Err(format!("{what}: {error}")),
            Err(error) => {
                if reported.elapsed() >= Duration::from_secs(WAITING_REPORT_SECS) {
                    tracing::warn!(
                        seconds = started.elapsed().as_secs(),
                        %error,
                        "still waiting for the controller quorum ({what})"
                    );
                    reported = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// Waits (briefly) until this node's state machine applied `index`.
fn wait_applied(handle: &ControllerHandle, index: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while handle.images.latest().1.map(|id| id.index) < Some(index) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}
