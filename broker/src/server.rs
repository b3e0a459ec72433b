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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Channel depth between each pair of shards.
pub const MESH_QUEUE_DEPTH_MAX: usize = 1024;
/// How often shards run flush-interval and retention checks.
pub const MAINTENANCE_INTERVAL_MS: u64 = 1000;

pub fn serve(config: BrokerConfig) -> Result<(), String> {
    let runtime_config = RuntimeConfig { cores: config.cores, ..RuntimeConfig::all_cores() };
    let preflight = runtime::preflight(runtime_config.cores, runtime_config.io_memory_bytes)
        .map_err(|e| e.to_string())?;
    for warning in &preflight.warnings {
        tracing::warn!("{warning}");
    }
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("{}: {e}", config.data_dir.display()))?;
    let metadata_path = config.data_dir.join(METADATA_FILE);
    let (snapshot, fresh) = match std::fs::read(&metadata_path) {
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
    });
    if id == 0 && fresh {
        let path = config.data_dir.join(METADATA_FILE);
        shard::io::write_file_atomic(&shard.storage, &path, &snapshot.to_json())
            .await
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    shard.apply_snapshot(snapshot).await.map_err(|e| format!("shard {id}: {e}"))?;
    for (peer, receiver) in ends.receivers {
        runtime::spawn(router::receive_loop(shard.clone(), peer, receiver)).detach();
    }
    runtime::spawn(maintenance(shard.clone())).detach();
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
}

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
