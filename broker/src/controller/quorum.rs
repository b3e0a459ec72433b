//! The controller thread: openraft on a current-thread tokio runtime of its own, its
//! CONTROLLER listener, and the channel shard 0 proposes through (ARCHITECTURE.md, "Cluster
//! control plane").
//!
//! Owns: the `Raft` handle, the listener's connections, and `ControllerHandle` (what the rest
//! of the broker holds: the command channel, the applied image, the known leader).
//! Startup: storage is opened and the listener bound before `start` returns, so a bad data
//! directory or a taken port is an error at startup, not a silent thread. A voter whose log
//! is empty initializes the quorum with every voter (each voter does; openraft accepts the
//! first and refuses the rest as already initialized, which is the same membership).
//! Durability rule: a proposal is answered `Committed` only after a majority of voters synced
//! it (openraft's commit) and the leader applied it.
//! Runs on: its own OS thread, never a shard. No glommio type comes here.

use super::liveness::{self, Liveness};
use super::log_store::LogStore;
use super::network::Network;
use super::proposer::propose;
use super::protocol::{self, Committed, ProposeError, Request, Response};
use super::state_machine::{ImageCell, StateMachine};
use super::types::{NodeId, Proposal, Raft};
use openraft::error::{InitializeError, RaftError};
use openraft::BasicNode;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Raft timing: heartbeats every 250 ms, an election after 1-2 s without one (Kafka's
/// `controller.quorum.election.timeout.ms` is 1 s).
const HEARTBEAT_MS: u64 = 250;
const ELECTION_MIN_MS: u64 = 1_000;
const ELECTION_MAX_MS: u64 = 2_000;

#[derive(Debug, Clone)]
pub struct QuorumConfig {
    pub node_id: NodeId,
    /// Every voter's id and controller address (`controller.quorum.voters`).
    pub voters: BTreeMap<NodeId, String>,
    /// Where this node's controller listens.
    pub listen: SocketAddr,
    /// `<data_dir>/__cluster_metadata`.
    pub dir: PathBuf,
    /// This node's broker (id, incarnation), heartbeating every `heartbeat_interval`; a
    /// broker silent for `session_timeout` is fenced by the leader.
    pub broker: Option<(wire::ids::NodeId, [u8; 16])>,
    pub heartbeat_interval: Duration,
    pub session_timeout: Duration,
}

enum Command {
    Propose(Proposal, futures_channel::oneshot::Sender<Result<Committed, ProposeError>>),
}

/// What the controller thread shows the broker.
#[derive(Debug, Default)]
pub struct QuorumStatus {
    /// The leader's node id plus one, 0 when none is known.
    leader: AtomicU64,
}

impl QuorumStatus {
    pub fn leader(&self) -> Option<NodeId> {
        self.leader.load(Ordering::Relaxed).checked_sub(1)
    }
}

/// The broker's side of the controller thread. Dropping it stops the thread.
pub struct ControllerHandle {
    commands: async_channel::Sender<Command>,
    pub images: Arc<ImageCell>,
    pub status: Arc<QuorumStatus>,
    pub listen: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControllerHandle {
    /// Commits `proposal` through the quorum (forwarded to the leader if this node is not it).
    pub async fn propose(&self, proposal: Proposal) -> Result<Committed, ProposeError> {
        let (reply, answer) = futures_channel::oneshot::channel();
        self.commands
            .send(Command::Propose(proposal, reply))
            .await
            .map_err(|_| ProposeError::Failed("the controller thread has stopped".into()))?;
        answer
            .await
            .map_err(|_| ProposeError::Failed("the controller thread has stopped".into()))?
    }

    /// Stops the controller thread and waits for it.
    pub fn stop(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.commands.close();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the controller thread panicked");
            }
        }
    }
}

impl Drop for ControllerHandle {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn raft_config() -> io::Result<openraft::Config> {
    openraft::Config {
        cluster_name: "strata".into(),
        heartbeat_interval: HEARTBEAT_MS,
        election_timeout_min: ELECTION_MIN_MS,
        election_timeout_max: ELECTION_MAX_MS,
        ..Default::default()
    }
    .validate()
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
}

/// Starts the controller thread: storage opened, listener bound, Raft running, before it
/// returns.
pub fn start(config: QuorumConfig) -> io::Result<ControllerHandle> {
    let images = Arc::new(ImageCell::default());
    let status = Arc::new(QuorumStatus::default());
    let log = LogStore::open(&config.dir)?;
    let machine = StateMachine::open(&config.dir, images.clone())?;
    let (commands, receiver) = async_channel::bounded(1024);
    let (started, on_start) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
    let thread_status = status.clone();
    let thread_images = images.clone();
    let thread = std::thread::Builder::new().name("controller".into()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => {
                let _ = started.send(Err(error));
                return;
            }
        };
        runtime.block_on(run(
            config,
            log,
            machine,
            receiver,
            thread_status,
            thread_images,
            started,
        ));
    })?;
    let listen = match on_start.recv() {
        Ok(Ok(listen)) => listen,
        Ok(Err(error)) => {
            let _ = thread.join();
            return Err(error);
        }
        Err(_) => {
            let _ = thread.join();
            return Err(io::Error::other("the controller thread ended while starting"));
        }
    };
    Ok(ControllerHandle { commands, images, status, listen, thread: Some(thread) })
}

async fn run(
    config: QuorumConfig,
    log: LogStore,
    machine: StateMachine,
    commands: async_channel::Receiver<Command>,
    status: Arc<QuorumStatus>,
    images: Arc<ImageCell>,
    started: std::sync::mpsc::Sender<io::Result<SocketAddr>>,
) {
    let listener = match TcpListener::bind(config.listen).await {
        Ok(listener) => listener,
        Err(error) => {
            let message = format!("controller listener {}: {error}", config.listen);
            let _ = started.send(Err(io::Error::new(error.kind(), message)));
            return;
        }
    };
    let listen = listener.local_addr().unwrap_or(config.listen);
    let raft = match raft_config() {
        Ok(raft_config) => {
            Raft::new(config.node_id, Arc::new(raft_config), Network, log, machine).await
        }
        Err(error) => {
            let _ = started.send(Err(error));
            return;
        }
    };
    let raft = match raft {
        Ok(raft) => raft,
        Err(error) => {
            let _ = started.send(Err(io::Error::other(format!("starting Raft: {error}"))));
            return;
        }
    };
    if config.voters.contains_key(&config.node_id) {
        let members: BTreeMap<NodeId, BasicNode> =
            config.voters.iter().map(|(id, address)| (*id, BasicNode::new(address))).collect();
        match raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
            Err(error) => {
                let _ = started.send(Err(io::Error::other(format!("initializing: {error}"))));
                return;
            }
        }
    }
    let _ = started.send(Ok(listen));
    tracing::info!(node = config.node_id, %listen, "controller started");
    let liveness = Arc::new(Liveness::default());
    let mut tasks = vec![
        tokio::spawn(accept(listener, raft.clone(), liveness.clone())),
        tokio::spawn(watch_leader(raft.clone(), status)),
        tokio::spawn(liveness::watch(
            raft.clone(),
            config.node_id,
            images,
            liveness.clone(),
            config.session_timeout,
        )),
    ];
    if let Some(broker) = config.broker {
        tasks.push(tokio::spawn(liveness::heartbeat(
            raft.clone(),
            config.node_id,
            broker,
            liveness,
            config.heartbeat_interval,
        )));
    }
    while let Ok(command) = commands.recv().await {
        match command {
            Command::Propose(proposal, reply) => {
                let raft = raft.clone();
                tokio::spawn(async move {
                    let _ = reply.send(propose(&raft, proposal, false).await);
                });
            }
        }
    }
    for task in tasks {
        task.abort();
    }
    if let Err(error) = raft.shutdown().await {
        tracing::warn!(%error, "stopping Raft");
    }
    tracing::info!(node = config.node_id, "controller stopped");
}

async fn watch_leader(raft: Raft, status: Arc<QuorumStatus>) {
    let mut metrics = raft.metrics();
    loop {
        let leader = metrics.borrow().current_leader;
        status.leader.store(leader.map_or(0, |id| id + 1), Ordering::Relaxed);
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

async fn accept(listener: TcpListener, raft: Raft, liveness: Arc<Liveness>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::spawn(serve(stream, peer, raft.clone(), liveness.clone()));
            }
            Err(error) => {
                tracing::warn!(%error, "accepting a controller connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Answers one connection's requests in order, until it closes or sends what is not a request.
async fn serve(mut stream: TcpStream, peer: SocketAddr, raft: Raft, liveness: Arc<Liveness>) {
    let _ = stream.set_nodelay(true);
    loop {
        let request = match protocol::read::<Request, _>(&mut stream).await {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%peer, %error, "closing a controller connection");
                return;
            }
        };
        let response = match request {
            Request::AppendEntries(rpc) => Response::AppendEntries(raft.append_entries(rpc).await),
            Request::Vote(rpc) => Response::Vote(raft.vote(rpc).await),
            Request::InstallSnapshot(rpc) => {
                Response::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
            Request::Propose { proposal, forwarded } => {
                Response::Proposed(propose(&raft, proposal, forwarded).await)
            }
            Request::Heartbeat { node, incarnation } => {
                let leads = raft.metrics().borrow().state.is_leader();
                if leads {
                    liveness.heartbeat(node, incarnation);
                }
                Response::Heartbeat(leads)
            }
        };
        if let Err(error) = protocol::write(&mut stream, &response).await {
            tracing::debug!(%peer, %error, "a controller connection closed while answering");
            return;
        }
    }
}
