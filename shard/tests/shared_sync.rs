//! The shard's shared commit (`shard::shared_sync`): while several logs sync at once, one sync
//! of the file system stands for their fdatasyncs. Durability rule: an append acknowledged
//! under flush `always` survives a crash. The simulated disk's crash loses or tears every
//! write not synced, so a shared sync that did not cover a log's writes loses acknowledged
//! batches here.

mod common;

use common::{base_offset, batch, options, read_all};
use futures_lite::future::block_on;
use shard::io::sim::{FaultConfig, SimStorage};
use shard::{FlushPolicy, LogConfig, PartitionLog};
use std::path::PathBuf;

const LOGS: usize = 8;
const APPENDS_EACH: u64 = 40;

fn config() -> LogConfig {
    LogConfig { flush: FlushPolicy::Always, segment_bytes: 64 << 10, ..LogConfig::default() }
}

fn dir(log: usize) -> PathBuf {
    PathBuf::from(format!("/data/tenant-{log}"))
}

async fn open(storage: &SimStorage, log: usize) -> PartitionLog<SimStorage> {
    PartitionLog::open(storage.clone(), &dir(log), options(config(), 0)).await.expect("open")
}

#[test]
fn acknowledged_appends_of_many_logs_syncing_together_survive_a_crash() {
    for seed in 0..6 {
        block_on(async {
            let storage = SimStorage::new(seed, FaultConfig::NONE);
            let mut logs = Vec::new();
            for log in 0..LOGS {
                logs.push(open(&storage, log).await);
            }
            let before = shard::shared_sync::snapshot();
            // Every log appends at once (one task polls them all, as a shard's tasks interleave).
            let acknowledged = futures_util::future::join_all(logs.iter().enumerate().map(
                |(index, log)| async move {
                    let mut acknowledged = Vec::new();
                    for sequence in 0..APPENDS_EACH {
                        let tag = index as u64 * 1_000 + sequence;
                        let size = 100 + (tag as usize * 37) % 3_000;
                        let info = log.append(batch(tag, 1, size, 0), 0, 0).await.expect("append");
                        assert!(log.durable_end_offset() > info.last_offset, "acked once durable");
                        acknowledged.push(info.base_offset);
                    }
                    acknowledged
                },
            ))
            .await;
            let after = shard::shared_sync::snapshot();
            assert!(after.syncs > before.syncs, "seed {seed}: no shared sync was taken");
            assert!(
                after.log_syncs - before.log_syncs > after.syncs - before.syncs,
                "seed {seed}: each shared sync stood for one log only"
            );
            drop(logs);
            storage.crash();
            for (index, offsets) in acknowledged.iter().enumerate() {
                let log = open(&storage, index).await;
                let batches = read_all(&log).await;
                let found: Vec<i64> = batches.iter().map(|batch| base_offset(batch)).collect();
                for offset in offsets {
                    assert!(
                        found.contains(offset),
                        "seed {seed}: log {index} lost acknowledged offset {offset} (has {found:?})"
                    );
                }
            }
        });
    }
}
