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

use super::admission::{self, Admission};
use super::liveness::{self, Liveness};
use super::log_store::LogStore;
use super::network::{Network, Peer};
use super::proposer::propose;
use super::protocol::{self, Committed, ProposeError, QuorumState, Request, Response};
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
use tokio::net::TcpListener;

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
    /// How often the leader runs preferred elections (`auto.leader.rebalance.enable`).
    pub rebalance_interval: Option<Duration>,
    /// This node's data directory, as its `meta.properties` says (checked against the quorum
    /// before this node votes).
    pub identity: Identity,
}

#[derive(Debug, Clone)]
pub struct Identity {
    /// `None` for a directory without `meta.properties` (new, or wiped).
    pub cluster_id: Option<String>,
    pub directory_id: String,
}

enum Command {
    Propose(Proposal, futures_channel::oneshot::Sender<Result<Committed, ProposeError>>),
    /// Stop heartbeating and have this node's broker fenced; answered with the fencing
    /// entry's index once this node applied it.
    ControlledShutdown(futures_channel::oneshot::Sender<Result<Option<u64>, ProposeError>>),
    DescribeQuorum(futures_channel::oneshot::Sender<Option<QuorumState>>),
    /// Asks the voters to add this node as a learner reachable at the address.
    JoinAsLearner(String, futures_channel::oneshot::Sender<Result<(), String>>),
}

/// The longest a controlled shutdown waits for the controller before the broker stops anyway
/// (a broker that cannot reach a quorum is fenced by its session timeout instead).
pub const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// What the controller thread shows the broker (the leader for Metadata, the rest for
/// `/metrics`), updated on every change of openraft's metrics.
#[derive(Debug, Default)]
pub struct QuorumStatus {
    /// The leader's node id plus one, 0 when none is known.
    leader: AtomicU64,
    term: AtomicU64,
    /// The last applied log index plus one, 0 before any.
    applied: AtomicU64,
    leads: std::sync::atomic::AtomicBool,
    /// On the leader: how many entries each voter is behind (itself: 0).
    voter_lag: std::sync::Mutex<BTreeMap<NodeId, u64>>,
}

impl QuorumStatus {
    pub fn leader(&self) -> Option<NodeId> {
        self.leader.load(Ordering::Relaxed).checked_sub(1)
    }

    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Relaxed)
    }

    pub fn applied_index(&self) -> Option<u64> {
        self.applied.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Whether this node's controller leads the quorum.
    pub fn leads(&self) -> bool {
        self.leads.load(Ordering::Relaxed)
    }

    /// Entries each voter is behind (empty unless this node leads).
    pub fn voter_lag(&self) -> BTreeMap<NodeId, u64> {
        self.voter_lag.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
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

    /// Controlled shutdown: this node's broker stops heartbeating and is fenced, its
    /// leaderships moved away, within `CONTROLLED_SHUTDOWN_TIMEOUT`. Answered once this node
    /// applied the fencing entry.
    pub async fn controlled_shutdown(&self) -> Result<Option<u64>, ProposeError> {
        let (reply, answer) = futures_channel::oneshot::channel();
        self.commands
            .send(Command::ControlledShutdown(reply))
            .await
            .map_err(|_| ProposeError::Failed("the controller thread has stopped".into()))?;
        answer
            .await
            .map_err(|_| ProposeError::Failed("the controller thread has stopped".into()))?
    }

    /// A node that does not vote (broker-only) asks the quorum's leader to add it as a
    /// learner, reachable at `address`, so the metadata log is replicated to it.
    pub async fn join_as_learner(&self, address: String) -> Result<(), String> {
        let (reply, answer) = futures_channel::oneshot::channel();
        self.commands
            .send(Command::JoinAsLearner(address, reply))
            .await
            .map_err(|_| "the controller thread has stopped".to_string())?;
        answer.await.map_err(|_| "the controller thread has stopped".to_string())?
    }

    /// The quorum's state from its leader; `None` when no leader answers.
    pub async fn describe_quorum(&self) -> Option<QuorumState> {
        let (reply, answer) = futures_channel::oneshot::channel();
        self.commands.send(Command::DescribeQuorum(reply)).await.ok()?;
        answer.await.ok().flatten()
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
    let liveness = Arc::new(Liveness::default());
    let (raft_ready, raft_waiting) = tokio::sync::watch::channel::<Option<Raft>>(None);
    let answering = Answering {
        raft: raft_waiting,
        liveness: liveness.clone(),
        images: images.clone(),
        identity: config.identity.clone(),
        voters: Arc::new(config.voters.keys().copied().collect()),
    };
    let accepting = tokio::spawn(accept(listener, answering));
    if let Err(error) = check_identity(&config).await {
        accepting.abort();
        let _ = started.send(Err(error));
        return;
    }
    let raft = match start_raft(&config, log, machine).await {
        Ok(raft) => raft,
        Err(error) => {
            let _ = started.send(Err(error));
            return;
        }
    };
    let _ = started.send(Ok(listen));
    tracing::info!(node = config.node_id, %listen, "controller started");
    let _ = raft_ready.send(Some(raft.clone()));
    let running = Running::spawn(&config, raft, status, images, liveness, accepting);
    while let Ok(command) = commands.recv().await {
        answer_command(command, &config, &running);
    }
    if let Some(task) = running.heartbeating {
        task.abort();
    }
    for task in running.tasks {
        task.abort();
    }
    if let Err(error) = running.raft.shutdown().await {
        tracing::warn!(%error, "stopping Raft");
    }
    tracing::info!(node = config.node_id, "controller stopped");
}

/// Starts Raft on the opened storage; a pristine voter proposes the initial membership.
async fn start_raft(
    config: &QuorumConfig,
    log: LogStore,
    machine: StateMachine,
) -> io::Result<Raft> {
    let raft = Raft::new(
        config.node_id,
        Arc::new(raft_config()?),
        Network { me: config.node_id },
        log,
        machine,
    )
    .await
    .map_err(|error| io::Error::other(format!("starting Raft: {error}")))?;
    // A voter with a log or a vote of its own rejoins the quorum it was in; only a pristine
    // one proposes the initial membership (openraft logs an ERROR for an initialize it
    // refuses, so it is not asked).
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|error| io::Error::other(format!("starting Raft: {error}")))?;
    if initialized {
        let metrics = raft.metrics().borrow().clone();
        let last_log = metrics.last_log_index;
        let term = metrics.current_term;
        tracing::info!(node = config.node_id, ?last_log, term, "rejoining the controller quorum");
    } else if config.voters.contains_key(&config.node_id) {
        let members: BTreeMap<NodeId, BasicNode> =
            config.voters.iter().map(|(id, address)| (*id, BasicNode::new(address))).collect();
        match raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
            Err(error) => return Err(io::Error::other(format!("initializing: {error}"))),
        }
    }
    Ok(raft)
}

/// The controller once Raft runs: what the broker's commands are answered with, and the
/// tasks beside the command loop.
struct Running {
    raft: Raft,
    images: Arc<ImageCell>,
    liveness: Arc<Liveness>,
    /// The listener's accept loop, the leader watch and the liveness watch.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// This node's broker heartbeat, stopped by a controlled shutdown.
    heartbeating: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Spawns the leader watch, the liveness watch and this node's broker heartbeat.
    fn spawn(
        config: &QuorumConfig,
        raft: Raft,
        status: Arc<QuorumStatus>,
        images: Arc<ImageCell>,
        liveness: Arc<Liveness>,
        accepting: tokio::task::JoinHandle<()>,
    ) -> Running {
        let tasks = vec![
            accepting,
            tokio::spawn(watch_leader(raft.clone(), status)),
            tokio::spawn(liveness::watch(
                raft.clone(),
                config.node_id,
                images.clone(),
                liveness.clone(),
                config.session_timeout,
                config.rebalance_interval,
            )),
        ];
        let heartbeating = config.broker.map(|broker| {
            tokio::spawn(liveness::heartbeat(
                raft.clone(),
                config.node_id,
                broker,
                liveness.clone(),
                config.heartbeat_interval,
            ))
        });
        Running { raft, images, liveness, tasks, heartbeating }
    }
}

/// Answers one of the broker's commands, on a task of its own where it waits.
fn answer_command(command: Command, config: &QuorumConfig, running: &Running) {
    match command {
        Command::Propose(proposal, reply) => {
            let raft = running.raft.clone();
            tokio::spawn(async move {
                let _ = reply.send(propose(&raft, proposal, false).await);
            });
        }
        Command::ControlledShutdown(reply) => {
            if let Some(task) = &running.heartbeating {
                task.abort();
            }
            let Some(broker) = config.broker else {
                let _ = reply.send(Ok(None));
                return;
            };
            let (raft, images, liveness) =
                (running.raft.clone(), running.images.clone(), running.liveness.clone());
            let me = config.node_id;
            tokio::spawn(async move {
                let deadline = std::time::Instant::now() + CONTROLLED_SHUTDOWN_TIMEOUT;
                let outcome =
                    liveness::controlled_shutdown(&raft, me, broker, &images, &liveness, deadline)
                        .await;
                if let Ok(Some(index)) = outcome {
                    let applied = images.next_after(Some(index.saturating_sub(1)));
                    let _ = tokio::time::timeout_at(deadline.into(), applied).await;
                }
                let _ = reply.send(outcome);
            });
        }
        Command::JoinAsLearner(address, reply) => {
            let voters: Vec<String> = config.voters.values().cloned().collect();
            let node = config.node_id;
            tokio::spawn(async move {
                let _ = reply.send(ask_to_learn(&voters, node, address).await);
            });
        }
        Command::DescribeQuorum(reply) => {
            let (raft, liveness) = (running.raft.clone(), running.liveness.clone());
            tokio::spawn(async move {
                let _ = reply.send(super::status::describe(&raft, &liveness).await);
            });
        }
    }
}

async fn watch_leader(raft: Raft, status: Arc<QuorumStatus>) {
    let mut metrics = raft.metrics();
    loop {
        {
            let now = metrics.borrow();
            status.leader.store(now.current_leader.map_or(0, |id| id + 1), Ordering::Relaxed);
            status.term.store(now.current_term, Ordering::Relaxed);
            let applied = now.last_applied.map_or(0, |id| id.index + 1);
            status.applied.store(applied, Ordering::Relaxed);
            let leads = now.state.is_leader() && now.current_leader == Some(now.id);
            status.leads.store(leads, Ordering::Relaxed);
            let end = now.last_log_index.unwrap_or(0);
            let mut lag: BTreeMap<NodeId, u64> = match (&now.replication, leads) {
                (Some(replication), true) => replication
                    .iter()
                    .map(|(node, matched)| {
                        (*node, end.saturating_sub(matched.map_or(0, |id| id.index)))
                    })
                    .collect(),
                _ => BTreeMap::new(),
            };
            if leads {
                lag.insert(now.id, 0);
            }
            *status.voter_lag.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = lag;
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// What the listener's connections answer with: Raft (once it runs), the leader's liveness
/// record, the applied image and this node's identity.
#[derive(Clone)]
struct Answering {
    raft: tokio::sync::watch::Receiver<Option<Raft>>,
    liveness: Arc<Liveness>,
    images: Arc<ImageCell>,
    identity: Identity,
    /// `controller.quorum.voters`' ids.
    voters: Arc<std::collections::BTreeSet<NodeId>>,
}

impl Answering {
    /// Raft, once this node has passed its identity check and started it.
    async fn raft(&mut self) -> Option<Raft> {
        let ready = self.raft.wait_for(Option::is_some).await.ok()?;
        ready.clone()
    }
}

async fn accept(listener: TcpListener, answering: Answering) {
    let admission = Admission::default();
    let mut last_refusal_logged: Option<std::time::Instant> = None;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let Some(slot) = admission.connection() else {
                    // One line a second at most: the peers decide how many there are.
                    if last_refusal_logged.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                        last_refusal_logged = Some(std::time::Instant::now());
                        tracing::warn!(
                            %peer,
                            connections_max = admission::CONNECTIONS_MAX,
                            "refused a controller connection: the listener serves its most"
                        );
                    }
                    drop(stream);
                    continue;
                };
                let answering = answering.clone();
                let admission = admission.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let _ = stream.set_nodelay(true);
                    match super::security::secure_server(stream, peer).await {
                        Ok(stream) => serve(stream, peer, answering, admission).await,
                        Err(error) => {
                            tracing::warn!(%peer, %error, "refused a controller connection")
                        }
                    }
                });
            }
            Err(error) => {
                tracing::warn!(%error, "accepting a controller connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Answers one connection's requests in order, until it closes or sends what is not a request.
/// Reads within `admission`'s bounds: a connection is proven by the listener's login, or by
/// an `Identify` of a node of this cluster.
async fn serve(
    mut stream: super::security::ControllerStream,
    peer: SocketAddr,
    mut answering: Answering,
    admission: Admission,
) {
    let mut proven = super::security::requires_login();
    loop {
        let request = match admission.read_request(&mut stream, proven).await {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%peer, %error, "closing a controller connection");
                return;
            }
        };
        if let Request::Identify { node } = request {
            let response = identify(&answering, node, &mut proven);
            if protocol::write(&mut stream, &response).await.is_err() {
                return;
            }
            continue;
        }
        let Some(raft) = answering.raft().await else { return };
        let liveness = &answering.liveness;
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
            Request::ControlledShutdown { node, incarnation } => {
                let images = &answering.images;
                let node = wire::ids::NodeId(node);
                let fenced =
                    liveness::fence_for_shutdown(&raft, images, liveness, node, incarnation);
                Response::ShutDown(fenced.await)
            }
            Request::DescribeQuorum => Response::Quorum(super::status::local(&raft, liveness)),
            Request::AddLearner { node, address } => add_learner(&raft, node, address).await,
            Request::Identify { .. } => continue,
            // Only as a connection's first message (`security::secure_server`).
            Request::Authenticate { .. } => {
                tracing::warn!(%peer, "a login in the middle of a controller connection");
                return;
            }
        };
        if let Err(error) = protocol::write(&mut stream, &response).await {
            tracing::debug!(%peer, %error, "a controller connection closed while answering");
            return;
        }
    }
}

/// Answers an `Identify` of `node`: this node's cluster and the data directory it knows `node`
/// by. Proves the connection when `node` is a voter or a node of the applied image.
fn identify(answering: &Answering, node: i32, proven: &mut bool) -> Response {
    let (image, _) = answering.images.latest();
    let id = wire::ids::NodeId(node);
    if !*proven {
        let voter = u64::try_from(node).is_ok_and(|n| answering.voters.contains(&n));
        *proven = voter || image.brokers.contains_key(&id) || image.controllers.contains_key(&id);
    }
    // Before its log is applied again, a restarting node knows its cluster from its
    // directory.
    let cluster_id = match (&image.cluster_id, &answering.identity.cluster_id) {
        (id, _) if !id.is_empty() => id.clone(),
        (_, Some(own)) => own.clone(),
        _ => String::new(),
    };
    let directory_id = image
        .brokers
        .get(&id)
        .map(|broker| broker.registration.directory_id.clone())
        .or_else(|| image.controllers.get(&id).cloned());
    Response::Identity { cluster_id, directory_id }
}

/// Adds a broker-only node as a learner (answered by the leader; the others refuse).
async fn add_learner(raft: &Raft, node: NodeId, address: String) -> Response {
    let added = raft.add_learner(node, BasicNode::new(address.clone()), false).await;
    match added {
        Ok(_) => {
            tracing::info!(node, %address, "added a learner (a broker-only node)");
            Response::LearnerAdded(Ok(()))
        }
        Err(error) => Response::LearnerAdded(Err(error.to_string())),
    }
}

/// Asks each voter in turn to add `node` (at `address`) as a learner; the leader does.
async fn ask_to_learn(voters: &[String], node: NodeId, address: String) -> Result<(), String> {
    let mut last = String::from("no voter answered");
    for voter in voters {
        let request = Request::AddLearner { node, address: address.clone() };
        match Peer::new(voter.clone(), node).call(&request, Duration::from_secs(5)).await {
            Ok(Response::LearnerAdded(Ok(()))) => return Ok(()),
            Ok(Response::LearnerAdded(Err(error))) => last = format!("voter {voter}: {error}"),
            Ok(other) => last = format!("voter {voter} answered out of turn: {other:?}"),
            Err(error) => last = format!("voter {voter}: {error}"),
        }
    }
    Err(last)
}

/// How often a voter still waiting to check its identity says so.
const IDENTITY_REPORT_SECS: u64 = 10;

/// Before this node votes: asks the other voters which cluster they are in and which data
/// directory they know this node by, and refuses to start when this directory belongs to
/// another cluster, or is not the one the quorum registered for this node (a wiped or
/// replaced voter directory: voting as its old self with an empty log could elect a leader
/// that lost committed entries; KIP-853's guard). Waits until a voter that knows the cluster
/// answers, or, for a cluster not formed yet, until a majority (with this node) answered.
async fn check_identity(config: &QuorumConfig) -> io::Result<()> {
    let peers: Vec<(NodeId, String)> = config
        .voters
        .iter()
        .filter(|(id, _)| **id != config.node_id)
        .map(|(id, address)| (*id, address.clone()))
        .collect();
    let majority = config.voters.len() / 2 + 1;
    let me = i32::try_from(config.node_id).unwrap_or(i32::MAX);
    let started = std::time::Instant::now();
    let mut reported = std::time::Instant::now();
    let voter = config.voters.contains_key(&config.node_id);
    while !peers.is_empty() {
        let mut answered = usize::from(voter);
        let mut formed = false;
        for (id, address) in &peers {
            let request = Request::Identify { node: me };
            let Ok(Response::Identity { cluster_id, directory_id }) =
                Peer::new(address.clone(), config.node_id)
                    .call(&request, Duration::from_secs(1))
                    .await
            else {
                continue;
            };
            answered += 1;
            if cluster_id.is_empty() {
                continue;
            }
            formed = true;
            if let Some(own) = &config.identity.cluster_id {
                if *own != cluster_id {
                    return Err(refused(format!(
                        "this data directory belongs to cluster {own}, but voter {id} is in \
                         cluster {cluster_id}: it is another cluster's directory (or the \
                         voters name another cluster); not starting, and not voting"
                    )));
                }
            }
            // The wiped-voter guard is for voters; a learner's directory may be new.
            if let Some(known) = directory_id.filter(|_| voter) {
                if known != config.identity.directory_id {
                    return Err(refused(format!(
                        "the quorum knows node {} by data directory {known}, but this one is {} \
                         ({}): the voter's directory was wiped or replaced, and a voter must not \
                         vote as its old self with an empty log (Raft safety, KIP-853); restore \
                         its directory (replacing a voter is not built yet)",
                        config.node_id,
                        config.identity.directory_id,
                        if config.identity.cluster_id.is_some() { "replaced" } else { "new" },
                    )));
                }
            }
        }
        if formed || answered >= majority {
            return Ok(());
        }
        if reported.elapsed() >= Duration::from_secs(IDENTITY_REPORT_SECS) {
            tracing::warn!(
                seconds = started.elapsed().as_secs(),
                answered,
                voters = config.voters.len(),
                "waiting for other voters before voting (identity check)"
            );
            reported = std::time::Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
