//! Helpers shared by the shard integration tests.
#![allow(dead_code)]

use bytes::BytesMut;
use shard::{BatchCache, LogConfig, OpenOptions, PartitionLog};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use wire::{BatchRecord, RecordBatchBuilder};

/// A batch of `records` records whose values are derived from `tag`, each `value_bytes` long,
/// stamped `timestamp` (+1 ms per record).
pub fn batch(tag: u64, records: usize, value_bytes: usize, timestamp: i64) -> BytesMut {
    let mut builder = RecordBatchBuilder::new(timestamp);
    let values: Vec<Vec<u8>> = (0..records)
        .map(|i| {
            let seed = format!("{tag}:{i}:");
            seed.bytes().cycle().take(value_bytes).collect()
        })
        .collect();
    let key = tag.to_be_bytes();
    for (i, value) in values.iter().enumerate() {
        builder.push(BatchRecord {
            key: Some(&key),
            value: Some(value),
            timestamp_delta: i as i64,
        });
    }
    BytesMut::from(&builder.build()[..])
}

pub fn options(config: LogConfig, cache_bytes: usize) -> OpenOptions {
    OpenOptions {
        sync_latency_us: Rc::new(RefCell::new(shard::partition_log::latency_histogram())),
        config,
        cache: Rc::new(RefCell::new(BatchCache::new(cache_bytes))),
        now_ms: 1_000,
    }
}

/// Reads every batch from the log start to the end.
pub async fn read_all<S: shard::io::Storage>(log: &PartitionLog<S>) -> Vec<bytes::Bytes> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, 1 << 20).await.expect("read");
        assert!(!read.batches.is_empty(), "read at {offset} returned nothing");
        for batch in read.batches {
            let header = wire::RecordBatchHeader::parse(&batch, 1 << 26).expect("valid batch");
            assert!(header.last_offset() >= offset);
            offset = header.last_offset() + 1;
            out.push(batch);
        }
    }
    out
}

pub fn base_offset(batch: &[u8]) -> i64 {
    wire::RecordBatchHeader::parse(batch, 1 << 26).expect("valid batch").base_offset()
}

pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shard-tests");
    let dir = root.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}
