//! `strata serve`: starts one shard per core, each accepting Kafka connections on the same port
//! (SO_REUSEPORT), joined by the cross-core mesh, owning its partitions.
//!
//! Startup order per shard: prime direct I/O, join the mesh, open owned partitions from the
//! topic table, start mesh receivers, bind the listener; the last shard to bind logs `ready`.

use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::mesh::{Mesh, MeshHandles};
use crate::metadata::{startup_image, store, MetadataImage, PlacementPolicy};
use crate::net::budget::RequestBudget;
use crate::net::connection::ConnectionTimeouts;
use crate::net::limits::ConnectionLimits;
use crate::net::listener::{Acceptor, Admission};
use crate::node::{Node, NodeParts};
use shard::io::dma::DmaStorage;
use shard::runtime::net::TcpListener;
use shard::runtime::{self, RuntimeConfig, ShardContext, ShardId};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wire::ids::NodeId;

/// Blocks SIGTERM and SIGINT in this thread (so the executor threads spawned after inherit the
/// mask) and waits for them on a dedicated thread: the first asks every shard to stop cleanly,
/// a second one exits at once.
fn install_signal_handling() -> Result<(), String> {
    let mut set = crate::shutdown::block_stop_signals()?;
    // SIGHUP reloads the SSL listeners' certificates (Kafka reloads on a config change; a
    // signal is the Unix way). Blocked here so the executor threads inherit it too.
    // SAFETY: adds to a local set, then blocks it in this thread.
    unsafe {
        libc::sigaddset(&mut set, libc::SIGHUP);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err("could not block SIGHUP".into());
        }
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: sigwait on a set this process blocked, into a local.
            if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                continue;
            }
            if signal == libc::SIGHUP {
                crate::net::tls::reload_installed();
                continue;
            }
            if crate::shutdown::request() {
                tracing::warn!(signal, "second signal: exiting without a clean shutdown");
                std::process::exit(130);
            }
            tracing::info!(signal, "shutting down (signal again to exit at once)");
        })
        .map_err(|e| format!("signal thread: {e}"))?;
    Ok(())
}

/// The lock file that keeps two brokers off one data directory.
pub const LOCK_FILE: &str = ".lock";

/// Takes an exclusive `flock` on `<data_dir>/.lock`; the kernel drops it when the process
/// exits, however it exits.
pub(crate) fn lock_data_dir(data_dir: &std::path::Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(format!(
            "data directory {} is in use by another strata process (lock {} is held); stop it or \
             use another --data-dir",
            data_dir.display(),
            path.display()
        ));
    }
    Ok(file)
}

/// Fails when another process listens on `address`'s port (Kafka's "Address already in use").
/// The shards bind with SO_REUSEPORT, which another broker's shards could join, so the kernel's
/// own table of TCP sockets is asked first: a socket in LISTEN state on the port means another
/// listener. (A plain bind would also refuse the lingering connections of a broker that was
/// just killed, which SO_REUSEPORT rightly lets a restart pass.)
fn claim_port(address: std::net::SocketAddr) -> Result<(), String> {
    if address.port() == 0 {
        return Ok(());
    }
    // A broker killed a moment ago can leave its listener behind for a while: io_uring
    // releases the files of pending operations after the process is gone.
    let deadline = std::time::Instant::now() + Duration::from_millis(PORT_RELEASE_WAIT_MS_MAX);
    while listening_on(address.port()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if listening_on(address.port()) {
        return Err(format!(
            "binding {address}: address already in use (another process listens on port {}; \
             stop it or choose another port)",
            address.port()
        ));
    }
    Ok(())
}

/// How long startup waits for a listener left by a process that just died to go away.
pub const PORT_RELEASE_WAIT_MS_MAX: u64 = 3000;

/// Whether a TCP socket on this machine listens on `port` (`/proc/net/tcp` and `tcp6`).
fn listening_on(port: u16) -> bool {
    const LISTEN: &str = "0A";
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        text.lines().skip(1).any(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1).unwrap_or_default();
            let state = fields.nth(1).unwrap_or_default();
            let local_port =
                local.rsplit(':').next().and_then(|hex| u16::from_str_radix(hex, 16).ok());
            state == LISTEN && local_port == Some(port)
        })
    })
}

/// The startup image from `strata-metadata.json` (see `metadata::startup_image`), checked
/// against the directory's `meta.properties` (written for a directory that has none). A new
/// image over a directory that has one (a crash between the two first writes, or a lost
/// metadata file) takes the file's cluster id.
fn load_image_with_identity(
    config: &BrokerConfig,
    policy: PlacementPolicy,
) -> Result<(MetadataImage, bool), String> {
    use crate::metadata::meta_properties::{self, MetaProperties};
    let identity = meta_properties::read(&config.data_dir)?;
    let (mut image, mut persist, new_cluster) = load_image(config, policy)?;
    match identity {
        Some(meta) => {
            if new_cluster && image.cluster_id != meta.cluster_id {
                image.cluster_id = meta.cluster_id.clone();
                persist = true;
            }
            meta.check(&image.cluster_id, config.node_id)?;
        }
        None => {
            let meta = MetaProperties {
                cluster_id: image.cluster_id.clone(),
                node_id: config.node_id,
                directory_id: store::random_id(),
            };
            meta_properties::write(&config.data_dir, &meta)?;
        }
    }
    Ok((image, persist))
}

/// The startup image from `strata-metadata.json` (see `metadata::startup_image`), whether it
/// must be persisted, and whether it is a new cluster's (there was no file).
fn load_image(
    config: &BrokerConfig,
    policy: PlacementPolicy,
) -> Result<(MetadataImage, bool, bool), String> {
    let path = config.data_dir.join(store::METADATA_FILE);
    let stored = match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // Partition data with no metadata is never adopted as a new cluster's.
            crate::metadata::recover::refuse_without_metadata(&config.data_dir)?;
            None
        }
        Err(error) => return Err(format!("{}: {error}", path.display())),
    };
    let (image, persist) =
        startup_image(stored.as_deref(), policy, *uuid::Uuid::new_v4().as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((image, persist, stored.is_none()))
}

pub fn serve(config: BrokerConfig) -> Result<(), String> {
    config.cluster.check_runnable()?;
    install_signal_handling()?;
    crate::metadata::topic_config::set_broker_topic_defaults(config.topic_defaults.clone());
    let runtime_config =
        RuntimeConfig { cores: config.cores, pin: config.pin_cpus, ..RuntimeConfig::all_cores() };
    let preflight = runtime::preflight(runtime_config.cores, runtime_config.io_memory_bytes)
        .map_err(|e| e.to_string())?;
    for warning in &preflight.warnings {
        tracing::warn!("{warning}");
    }
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("{}: {e}", config.data_dir.display()))?;
    // Held for the life of the process: a second broker on this directory would corrupt it.
    let _lock = lock_data_dir(&config.data_dir)?;
    // How this node reaches the other brokers and controllers (TLS, SASL login), and what its
    // controller listener asks of them (issue #18).
    crate::peer::configure(&config.inter_broker_security)?;
    crate::controller::security::configure(&config)?;
    if !config.cluster.roles.broker {
        return crate::cluster_join::serve_controller(&config);
    }
    // Every shard binds the Kafka port with SO_REUSEPORT, which would let a second broker on
    // this machine share it too: claim each port once, exclusively, first.
    for address in config.listeners.iter().map(|l| l.listen).chain([config.admin_listen]) {
        claim_port(address)?;
    }
    // An SSL listener's key, chain and CAs, read (and checked) before anything starts.
    let tls = match &config.tls {
        Some(settings) => Some(Arc::new(crate::net::tls::TlsServer::new(settings.clone())?)),
        None => None,
    };
    if let Some(tls) = &tls {
        crate::net::tls::install_for_reload(tls.clone());
    }
    serve_broker(config, runtime_config, tls)
}

/// Loads (or joins the cluster for) the metadata image, then runs the broker's shards until
/// they stop.
fn serve_broker(
    mut config: BrokerConfig,
    runtime_config: RuntimeConfig,
    tls: Option<Arc<crate::net::tls::TlsServer>>,
) -> Result<(), String> {
    let policy =
        PlacementPolicy { node: NodeId(config.node_id), shard_count: runtime_config.cores };
    let (image, persist, cluster) = if config.cluster.voters.is_empty() {
        let (image, persist) = load_image_with_identity(&config, policy)?;
        (image, persist, None)
    } else {
        let (handle, image) = crate::cluster_join::join(&config, runtime_config.cores)?;
        (image, false, Some(handle))
    };
    let (files_limit, files_hard) = crate::metadata::file_budget::raise_open_files_limit();
    crate::metadata::file_budget::check_start(files_limit, runtime_config.cores)?;
    let segment_files_per_shard =
        crate::metadata::file_budget::segment_files_per_shard(files_limit, runtime_config.cores);
    config.segment_files_per_shard = segment_files_per_shard;
    tracing::info!(files_limit, files_hard, segment_files_per_shard, "open-files budget");
    shard::io::space_reserve::install(&config.data_dir);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        shards = runtime_config.cores,
        data_dir = %config.data_dir.display(),
        topics = image.topics.len(),
        cluster_id = %image.cluster_id,
        "starting strata"
    );
    let meshes = MeshHandles::new(runtime_config.cores);
    let limits = ConnectionLimits::new(
        config.max_connections,
        config.max_connections_per_ip,
        runtime_config.cores,
    );
    let bound = Arc::new(AtomicUsize::new(0));
    let progress = StartupProgress::watch(runtime_config.cores, bound.clone());
    let config = Arc::new(config);
    let results = runtime::run_shards(&runtime_config, move |context| {
        let startup = Startup {
            cluster: cluster.clone(),
            config: config.clone(),
            meshes: meshes.clone(),
            image: image.clone(),
            persist,
            limits: limits.clone(),
            bound: bound.clone(),
            progress: progress.clone(),
            tls: tls.clone(),
        };
        async move { shard_main(context, startup).await }
    })
    .map_err(|e| e.to_string())?;
    for result in results {
        result?;
    }
    tracing::info!("clean shutdown complete");
    Ok(())
}

/// What every shard starts from.
struct Startup {
    config: Arc<BrokerConfig>,
    cluster: Option<Arc<crate::controller::quorum::ControllerHandle>>,
    meshes: MeshHandles,
    image: MetadataImage,
    persist: bool,
    limits: Arc<ConnectionLimits>,
    /// Shards bound to the listener so far (the last logs `ready`).
    bound: Arc<AtomicUsize>,
    progress: Arc<StartupProgress>,
    /// The SSL listeners' server config, when there is one.
    tls: Option<Arc<crate::net::tls::TlsServer>>,
}

/// How far each shard's start has come, for a start that takes long: until every shard is
/// ready, a watcher thread logs each shard's step every `STARTUP_REPORT_SECS` (a shard that
/// waits for another, in the mesh join, shows which one is behind). Shards park in io_uring
/// when idle (no busy polling), so a broker pinned to busy cores starts at its fair share:
/// measured, 0.23-0.24 s to `ready` while another strata on the same cores ran 4 acks=all
/// producers (issue #14).
struct StartupProgress {
    steps: Vec<std::sync::atomic::AtomicU8>,
}

/// Seconds between reports of a start that is not ready yet.
const STARTUP_REPORT_SECS: u64 = 10;
const STARTUP_STEPS: [&str; 6] = [
    "starting its executor",
    "opening storage",
    "joining the shard mesh",
    "building its services",
    "opening partition logs",
    "binding the listener",
];

impl StartupProgress {
    fn watch(shards: usize, bound: Arc<AtomicUsize>) -> Arc<Self> {
        let progress = Arc::new(StartupProgress {
            steps: (0..shards).map(|_| std::sync::atomic::AtomicU8::new(0)).collect(),
        });
        let watched = progress.clone();
        let started = std::time::Instant::now();
        let _ = std::thread::Builder::new().name("startup-watch".into()).spawn(move || loop {
            std::thread::sleep(Duration::from_secs(STARTUP_REPORT_SECS));
            if bound.load(Ordering::SeqCst) >= shards || crate::shutdown::requested() {
                return;
            }
            let steps: Vec<String> = watched
                .steps
                .iter()
                .enumerate()
                .map(|(shard, step)| {
                    let step = STARTUP_STEPS.get(step.load(Ordering::SeqCst) as usize);
                    format!("shard {shard}: {}", step.unwrap_or(&"bound"))
                })
                .collect();
            tracing::warn!(
                seconds = started.elapsed().as_secs(),
                steps = %steps.join(", "),
                "still starting"
            );
        });
        progress
    }

    fn step(&self, shard: ShardId, step: u8) {
        if let Some(slot) = self.steps.get(shard.0 as usize) {
            slot.store(step, Ordering::SeqCst);
        }
    }
}

/// This shard's connection admission: the broker's limits, the shard's share of the request
/// budget, the timeouts.
fn admission(
    config: &BrokerConfig,
    node: &Node<DmaStorage>,
    limits: Arc<ConnectionLimits>,
    shards: usize,
) -> Admission {
    let share = (config.queued_request_bytes_max / shards.max(1) as u64).max(1);
    Admission {
        limits,
        budget: Rc::new(RequestBudget::new(share, node.stats.clone())),
        timeouts: ConnectionTimeouts {
            idle: config.connections_idle_ms.map(Duration::from_millis),
            frame: Duration::from_millis(config.frame_timeout_ms),
        },
    }
}

async fn shard_main(context: ShardContext, startup: Startup) -> Result<(), String> {
    let Startup { config, cluster, meshes, image, persist, limits, bound, progress, tls } = startup;
    let id = context.shard_id;
    progress.step(id, 1);
    let storage: DmaStorage = runtime::open_storage(&config.data_dir)
        .await
        .map_err(|e| format!("shard {}: {e}", id.0))?;
    progress.step(id, 2);
    let (mesh, receivers) = Mesh::join(id, context.shard_count, &meshes).await?;
    tracing::debug!(shard = id.0, "joined the shard meshes");
    progress.step(id, 3);
    let parts = NodeParts {
        config: config.clone(),
        storage,
        mesh,
        clock: Clock::system(),
        cluster: cluster.clone(),
    };
    let node = Node::build(parts).await?;
    progress.step(id, 4);
    node.start(image, persist, Some(receivers)).await?;
    progress.step(id, 5);
    let listeners = bind_listeners(&config, tls.as_ref())?;
    if id == ShardId(0) {
        let admin = TcpListener::bind(config.admin_listen)
            .map_err(|e| format!("binding admin {}: {e}", config.admin_listen))?;
        runtime::spawn(crate::admin::serve(node.clone(), admin)).detach();
    }
    let admission = admission(&config, &node, limits.clone(), context.shard_count);
    let infos = listeners.iter().map(|(_, info)| info.clone()).collect();
    let acceptor = Rc::new(Acceptor::new(node.clone(), infos, admission));
    // Other shards may place connections here from now on.
    node.mesh.register(acceptor.clone());
    limits.serving(usize::from(id.0));
    progress.step(id, STARTUP_STEPS.len() as u8);
    if bound.fetch_add(1, Ordering::SeqCst) + 1 == context.shard_count {
        log_ready(&config, context.shard_count);
    }
    let accepts = listeners
        .iter()
        .enumerate()
        .map(|(index, (socket, _))| Box::pin(acceptor.clone().accept_loop(index, socket)));
    let accept = futures_util::future::join_all(accepts);
    if id == ShardId(0) {
        runtime::spawn(controlled_shutdown(node.clone())).detach();
    }
    let shutdown = async {
        while !crate::shutdown::stopping() {
            runtime::sleep(Duration::from_millis(crate::shutdown::SHUTDOWN_POLL_MS)).await;
        }
    };
    futures_lite::future::or(
        async {
            accept.await;
        },
        shutdown,
    )
    .await;
    drop(listeners);
    drain(&node, context.shard_count).await;
    node.close().await;
    Ok(())
}

/// Binds this shard's socket for every client listener, with what its connections are told of
/// it (its name, TLS, SASL).
fn bind_listeners(
    config: &BrokerConfig,
    tls: Option<&Arc<crate::net::tls::TlsServer>>,
) -> Result<Vec<(TcpListener, Rc<crate::net::connection::ListenerInfo>)>, String> {
    let mut listeners = Vec::new();
    for listener in &config.listeners {
        let socket = TcpListener::bind(listener.listen)
            .map_err(|e| format!("binding {} ({}): {e}", listener.listen, listener.name))?;
        let tls = if listener.tls {
            let tls = tls.cloned().ok_or_else(|| format!("{}: no TLS settings", listener.name))?;
            Some(tls)
        } else {
            None
        };
        let info = crate::net::connection::ListenerInfo {
            name: Rc::from(listener.name.as_str()),
            tls,
            sasl: listener.sasl,
        };
        listeners.push((socket, Rc::new(info)));
    }
    Ok(listeners)
}

/// Logs `ready` with every address served: the last shard to bind does.
fn log_ready(config: &BrokerConfig, shards: usize) {
    let served: Vec<String> =
        config.listeners.iter().map(|l| format!("{}://{}", l.name, l.listen)).collect();
    tracing::info!(
        listen = %config.listen,
        listeners = %served.join(","),
        advertise = %format!("{}:{}", config.advertise_host, config.advertise_port),
        admin = %config.admin_listen,
        shards,
        "ready"
    );
}

/// Shard 0, once a shutdown signal arrived: a cluster broker asks the controller to fence it
/// (its leaderships move away while it still answers, so clients find the new leaders
/// rather than a dead socket) and waits until its shards have that image, then every shard
/// stops. Bounded by `CONTROLLED_SHUTDOWN_TIMEOUT`; past it the broker stops anyway and its
/// session timeout fences it.
async fn controlled_shutdown(node: Rc<Node<DmaStorage>>) {
    while !crate::shutdown::requested() {
        runtime::sleep(Duration::from_millis(crate::shutdown::SHUTDOWN_POLL_MS)).await;
    }
    if let Some(cluster) = node.cluster.clone() {
        let started = std::time::Instant::now();
        match cluster.controlled_shutdown().await {
            Ok(_) => {
                let me = node.node_id();
                let deadline = started + crate::controller::quorum::CONTROLLED_SHUTDOWN_TIMEOUT;
                while node.metadata().brokers.get(&me).is_some_and(|broker| !broker.fenced)
                    && std::time::Instant::now() < deadline
                {
                    runtime::sleep(Duration::from_millis(10)).await;
                }
                tracing::info!(
                    millis = started.elapsed().as_millis() as u64,
                    "controlled shutdown: this broker is fenced and leads nothing"
                );
            }
            Err(error) => tracing::warn!(
                %error,
                "controlled shutdown: the controller did not fence this broker; stopping anyway"
            ),
        }
    }
    crate::shutdown::begin_stopping();
}

/// Longest a shutdown waits for requests in progress before closing the partitions.
pub const SHUTDOWN_DRAIN_MS_MAX: u64 = 5_000;
/// Shards that finished their own requests in progress.
static DRAINED_SHARDS: AtomicUsize = AtomicUsize::new(0);

/// Waits (up to `SHUTDOWN_DRAIN_MS_MAX`) until this shard answered the requests it was handling
/// and then until every shard has, so no shard closes a partition another shard's request is
/// still appending to. The mesh keeps serving routed requests meanwhile.
async fn drain(node: &Rc<Node<DmaStorage>>, shard_count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_millis(SHUTDOWN_DRAIN_MS_MAX);
    while node.requests_in_progress() > 0 && std::time::Instant::now() < deadline {
        runtime::sleep(Duration::from_millis(5)).await;
    }
    let left = node.requests_in_progress();
    DRAINED_SHARDS.fetch_add(1, Ordering::SeqCst);
    while DRAINED_SHARDS.load(Ordering::SeqCst) < shard_count
        && std::time::Instant::now() < deadline
    {
        runtime::sleep(Duration::from_millis(5)).await;
    }
    if left > 0 {
        tracing::warn!(
            shard = node.shard().0,
            requests = left,
            "shutdown deadline: closing with requests in progress"
        );
    } else {
        tracing::info!(shard = node.shard().0, "requests in progress drained");
    }
}
