//! `strata serve`: starts one shard per core, each accepting Kafka connections on the same port
//! (SO_REUSEPORT), joined by the cross-core mesh, owning its partitions.
//!
//! Startup order per shard: prime direct I/O, join the mesh, open owned partitions from the
//! topic table, start mesh receivers, bind the listener; the last shard to bind logs `ready`.

use crate::config::BrokerConfig;
use crate::metadata::{MetadataSnapshot, METADATA_FILE};
use crate::router::{self, ShardMessage};
use crate::state::Shard;
use shard::runtime::mesh::MeshHandle;
use shard::runtime::net::TcpListener;
use shard::runtime::{self, RuntimeConfig, ShardContext};
use shard::BatchCache;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Channel depth between each pair of shards.
pub const MESH_QUEUE_DEPTH_MAX: usize = 1024;
/// How often shards run flush-interval and retention checks.
pub const MAINTENANCE_INTERVAL_MS: u64 = 1000;

/// Set by the signal thread on the first SIGTERM/SIGINT; shards poll it (not a hot path).
static SHUTDOWN: AtomicBool = AtomicBool::new(false);
/// How often shards look at `SHUTDOWN`.
pub const SHUTDOWN_POLL_MS: u64 = 50;

/// Blocks SIGTERM and SIGINT in this thread (so the executor threads spawned after inherit the
/// mask) and waits for them on a dedicated thread: the first asks every shard to stop cleanly,
/// a second one exits at once.
fn install_signal_handling() -> Result<(), String> {
    // SAFETY: plain libc signal-set manipulation on local values, then pthread_sigmask for this
    // thread; sigwait on the dedicated thread receives the blocked signals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err("could not block SIGTERM/SIGINT".into());
        }
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || loop {
                let mut signal: libc::c_int = 0;
                if libc::sigwait(&set, &mut signal) != 0 {
                    continue;
                }
                if SHUTDOWN.swap(true, Ordering::SeqCst) {
                    tracing::warn!(signal, "second signal: exiting without a clean shutdown");
                    std::process::exit(130);
                }
                tracing::info!(
                    signal,
                    "shutting down: closing partitions (signal again to exit at once)"
                );
            })
            .map_err(|e| format!("signal thread: {e}"))?;
    }
    Ok(())
}

/// The lock file that keeps two brokers off one data directory.
pub const LOCK_FILE: &str = ".lock";

/// Takes an exclusive `flock` on `<data_dir>/.lock`; the kernel drops it when the process
/// exits, however it exits.
fn lock_data_dir(data_dir: &std::path::Path) -> Result<std::fs::File, String> {
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

pub fn serve(config: BrokerConfig) -> Result<(), String> {
    install_signal_handling()?;
    crate::metadata::set_broker_topic_defaults(config.topic_defaults.clone());
    let runtime_config = RuntimeConfig { cores: config.cores, ..RuntimeConfig::all_cores() };
    let preflight = runtime::preflight(runtime_config.cores, runtime_config.io_memory_bytes)
        .map_err(|e| e.to_string())?;
    for warning in &preflight.warnings {
        tracing::warn!("{warning}");
    }
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("{}: {e}", config.data_dir.display()))?;
    // Held for the life of the process: a second broker on this directory would corrupt it.
    let _lock = lock_data_dir(&config.data_dir)?;
    let metadata_path = config.data_dir.join(METADATA_FILE);
    let (mut snapshot, mut fresh) = match std::fs::read(&metadata_path) {
        Ok(bytes) => (
            MetadataSnapshot::from_json(&bytes)
                .map_err(|e| format!("{}: {e}", metadata_path.display()))?,
            false,
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            (MetadataSnapshot::new_cluster(), true)
        }
        Err(error) => return Err(format!("{}: {error}", metadata_path.display())),
    };
    // The internal offsets topic exists from the first start on (shard 0 persists the table).
    fresh |= crate::group::ensure_offsets_topic(&mut snapshot);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        shards = runtime_config.cores,
        data_dir = %config.data_dir.display(),
        topics = snapshot.topics.len(),
        cluster_id = %snapshot.cluster_id,
        "starting strata"
    );
    let mesh: MeshHandle<ShardMessage> =
        MeshHandle::new(runtime_config.cores, MESH_QUEUE_DEPTH_MAX);
    let bound = Arc::new(AtomicUsize::new(0));
    let config = Arc::new(config);
    let results = runtime::run_shards(&runtime_config, move |context| {
        let (config, mesh, snapshot, bound) =
            (config.clone(), mesh.clone(), snapshot.clone(), bound.clone());
        async move { shard_main(context, config, mesh, snapshot, fresh, bound).await }
    })
    .map_err(|e| e.to_string())?;
    for result in results {
        result?;
    }
    tracing::info!("clean shutdown complete");
    Ok(())
}

async fn shard_main(
    context: ShardContext,
    config: Arc<BrokerConfig>,
    mesh: MeshHandle<ShardMessage>,
    snapshot: MetadataSnapshot,
    fresh: bool,
    bound: Arc<AtomicUsize>,
) -> Result<(), String> {
    let id = usize::from(context.shard_id.0);
    let storage =
        runtime::open_storage(&config.data_dir).await.map_err(|e| format!("shard {id}: {e}"))?;
    let ends = mesh.join(id).await?;
    let producer_ids = if id == 0 {
        crate::producer_ids::ProducerIdAllocator::load(&storage, &config.data_dir).await?
    } else {
        Default::default()
    };
    let shard = Rc::new(Shard {
        id,
        count: context.shard_count,
        config: config.clone(),
        metadata: RefCell::new(Rc::new(MetadataSnapshot::default())),
        partitions: RefCell::new(HashMap::new()),
        storage,
        cache: Rc::new(RefCell::new(BatchCache::new(config.cache_bytes))),
        senders: ends.senders,
        pending: RefCell::new(HashMap::new()),
        next_request_id: Cell::new(0),
        metadata_lock: async_lock::Mutex::new(()),
        stats: RefCell::new(Default::default()),
        sync_latency_us: Rc::new(RefCell::new(shard::partition_log::latency_histogram())),
        offsets: RefCell::new(Default::default()),
        groups: RefCell::new(HashMap::new()),
        offsets_lock: async_lock::Mutex::new(()),
        requests_in_progress: Cell::new(0),
        producer_ids,
    });
    if id == 0 && fresh {
        let path = config.data_dir.join(METADATA_FILE);
        shard::io::write_file_atomic(&shard.storage, &path, &snapshot.to_json())
            .await
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    shard.apply_snapshot(snapshot).await.map_err(|e| format!("shard {id}: {e}"))?;
    let replayed = crate::group::replay(&shard)
        .await
        .map_err(|e| format!("shard {id}: replaying offsets: {e}"))?;
    if replayed > 0 {
        tracing::info!(shard = id, records = replayed, "committed offsets replayed");
    }
    for (peer, receiver) in ends.receivers {
        runtime::spawn(router::receive_loop(shard.clone(), peer, receiver)).detach();
    }
    runtime::spawn(maintenance(shard.clone())).detach();
    runtime::spawn(crate::group::coordinator::tick(shard.clone())).detach();
    let listener =
        TcpListener::bind(config.listen).map_err(|e| format!("binding {}: {e}", config.listen))?;
    if id == 0 {
        let admin = TcpListener::bind(config.admin_listen)
            .map_err(|e| format!("binding admin {}: {e}", config.admin_listen))?;
        runtime::spawn(crate::admin::serve(shard.clone(), admin)).detach();
    }
    if bound.fetch_add(1, Ordering::SeqCst) + 1 == context.shard_count {
        tracing::info!(
            listen = %config.listen,
            advertise = %format!("{}:{}", config.advertise_host, config.advertise_port),
            admin = %config.admin_listen,
            shards = context.shard_count,
            "ready"
        );
    }
    let accept = async {
        loop {
            match listener.accept().await {
                Ok(stream) => {
                    runtime::spawn(crate::connection::serve(shard.clone(), stream)).detach();
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    runtime::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    };
    let shutdown = async {
        while !SHUTDOWN.load(Ordering::SeqCst) {
            runtime::sleep(Duration::from_millis(SHUTDOWN_POLL_MS)).await;
        }
    };
    futures_lite::future::or(accept, shutdown).await;
    drop(listener);
    drain(&shard, context.shard_count).await;
    close_partitions(&shard).await;
    Ok(())
}

/// Whether a shutdown signal arrived (connections stop reading new requests).
pub fn shutting_down() -> bool {
    SHUTDOWN.load(Ordering::SeqCst)
}

/// Longest a shutdown waits for requests in progress before closing the partitions.
pub const SHUTDOWN_DRAIN_MS_MAX: u64 = 5_000;
/// Shards that finished their own requests in progress.
static DRAINED_SHARDS: AtomicUsize = AtomicUsize::new(0);

/// Waits (up to `SHUTDOWN_DRAIN_MS_MAX`) until this shard answered the requests it was handling
/// and then until every shard has, so no shard closes a partition another shard's request is
/// still appending to. The mesh keeps serving routed requests meanwhile.
async fn drain(shard: &Rc<Shard>, shard_count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_millis(SHUTDOWN_DRAIN_MS_MAX);
    while shard.requests_in_progress.get() > 0 && std::time::Instant::now() < deadline {
        runtime::sleep(Duration::from_millis(5)).await;
    }
    let left = shard.requests_in_progress.get();
    DRAINED_SHARDS.fetch_add(1, Ordering::SeqCst);
    while DRAINED_SHARDS.load(Ordering::SeqCst) < shard_count
        && std::time::Instant::now() < deadline
    {
        runtime::sleep(Duration::from_millis(5)).await;
    }
    if left > 0 {
        tracing::warn!(
            shard = shard.id,
            requests = left,
            "shutdown deadline: closing with requests in progress"
        );
    } else {
        tracing::info!(shard = shard.id, "requests in progress drained");
    }
}

/// Clean shutdown of this shard's partitions: each close waits for appends in progress, writes
/// and syncs everything, and leaves the clean-shutdown marker so the next start skips recovery.
async fn close_partitions(shard: &Rc<Shard>) {
    use futures_util::StreamExt;
    let partitions: Vec<_> = shard.partitions.borrow().values().cloned().collect();
    let closed = std::cell::Cell::new(0usize);
    // Closes are independent (each partition owns its files) and mostly wait on fsyncs, so
    // several run at once: with thousands of partitions a sequential close takes minutes.
    futures_util::stream::iter(partitions)
        .for_each_concurrent(CLOSE_CONCURRENCY_MAX, |partition| {
            let closed = &closed;
            async move {
                match partition.log.close().await {
                    Ok(()) => closed.set(closed.get() + 1),
                    Err(error) => {
                        tracing::error!(%error, dir = %partition.log.dir().display(), "close failed")
                    }
                }
                partition.appended.notify(usize::MAX);
            }
        })
        .await;
    tracing::info!(shard = shard.id, closed = closed.get(), "partitions closed");
}

/// Partition closes in flight at once per shard during shutdown.
pub const CLOSE_CONCURRENCY_MAX: usize = 64;

/// Flush-interval syncs and retention for the partitions this shard owns.
async fn maintenance(shard: Rc<Shard>) {
    let mut last_retention = runtime::now_ms();
    loop {
        let interval =
            (shard.config.retention_check_interval_ms as u64).clamp(10, MAINTENANCE_INTERVAL_MS);
        runtime::sleep(Duration::from_millis(interval)).await;
        let now = runtime::now_ms();
        let partitions: Vec<_> = shard.partitions.borrow().values().cloned().collect();
        let retention_due = now - last_retention >= shard.config.retention_check_interval_ms;
        for partition in partitions {
            if let Err(error) = partition.log.flush_if_due(now).await {
                tracing::error!(%error, dir = %partition.log.dir().display(), "interval flush failed");
            }
            if retention_due {
                match partition.log.compact_if_due(now).await {
                    Ok(Some(outcome)) if outcome.segments_rewritten > 0 => {
                        let mut stats = shard.stats.borrow_mut();
                        stats.compaction_runs += 1;
                        stats.compacted_records += outcome.records_removed;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::error!(%error, dir = %partition.log.dir().display(), "compaction failed")
                    }
                }
                match partition.log.apply_retention(now).await {
                    Ok(0) => {}
                    Ok(deleted) => {
                        tracing::info!(deleted, dir = %partition.log.dir().display(), "retention deleted segments")
                    }
                    Err(error) => {
                        tracing::error!(%error, dir = %partition.log.dir().display(), "retention failed")
                    }
                }
            }
        }
        if retention_due {
            last_retention = now;
        }
    }
}
