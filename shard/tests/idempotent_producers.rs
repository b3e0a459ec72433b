//! Idempotent producers at the partition log (issue #6): retries return the original offsets
//! without a second write, each sequence/epoch error gets its typed error, and after a crash or
//! a clean restart the producer state comes from the newest snapshot plus only the log after it.

mod common;

use common::options;
use futures_lite::future::block_on;
use shard::io::sim::{FaultConfig, SimStorage};
use shard::partition_log::ProducerRecovery;
use shard::producer_state::{parse_snapshot_file_name, snapshot_file_name};
use shard::{FlushPolicy, LogConfig, PartitionLog, StorageError};
use std::path::PathBuf;
use wire::{BatchRecord, RecordBatchBuilder};

fn dir() -> PathBuf {
    PathBuf::from("/data/idempotent-0")
}

fn config() -> LogConfig {
    LogConfig { segment_bytes: 1 << 20, flush: FlushPolicy::Always, ..LogConfig::default() }
}

async fn open(storage: &SimStorage) -> PartitionLog<SimStorage> {
    PartitionLog::open(storage.clone(), &dir(), options(config(), 1 << 20)).await.expect("open")
}

/// A batch of `records` records from producer `producer_id`/`epoch` starting at `sequence`.
fn batch(producer_id: i64, epoch: i16, sequence: i32, records: usize) -> bytes::BytesMut {
    let mut builder = RecordBatchBuilder::new(1_000);
    builder.producer(producer_id, epoch, sequence);
    let value = format!("{producer_id}/{epoch}/{sequence}");
    for i in 0..records {
        builder.push(BatchRecord {
            key: None,
            value: Some(value.as_bytes()),
            timestamp_delta: i as i64,
        });
    }
    bytes::BytesMut::from(&builder.build()[..])
}

async fn append(log: &PartitionLog<SimStorage>, b: bytes::BytesMut) -> shard::Result<(i64, bool)> {
    log.append(b, 0, 1_000).await.map(|info| (info.base_offset, info.duplicate))
}

fn snapshots(storage: &SimStorage) -> Vec<i64> {
    let mut offsets: Vec<i64> = storage
        .paths()
        .iter()
        .filter(|path| path.starts_with(dir()))
        .filter_map(|path| parse_snapshot_file_name(path.file_name()?.to_str()?))
        .collect();
    offsets.sort_unstable();
    offsets
}

#[test]
fn a_retried_batch_gets_its_original_offsets_and_is_not_written_twice() {
    block_on(async {
        let storage = SimStorage::new(1, FaultConfig::NONE);
        let log = open(&storage).await;
        assert_eq!(append(&log, batch(7, 0, 0, 3)).await.ok(), Some((0, false)));
        assert_eq!(append(&log, batch(7, 0, 3, 2)).await.ok(), Some((3, false)));
        assert_eq!(append(&log, batch(9, 0, 0, 1)).await.ok(), Some((5, false)));
        assert_eq!(append(&log, batch(7, 0, 0, 3)).await.ok(), Some((0, true)));
        assert_eq!(append(&log, batch(7, 0, 3, 2)).await.ok(), Some((3, true)));
        assert_eq!(log.log_end_offset(), 6, "retries wrote nothing");
        // A producer without an id is never checked.
        assert_eq!(append(&log, common::batch(1, 1, 10, 1_000)).await.ok(), Some((6, false)));
        assert_eq!(append(&log, common::batch(1, 1, 10, 1_000)).await.ok(), Some((7, false)));
    })
}

#[test]
fn sequence_and_epoch_errors_are_typed_and_write_nothing() {
    block_on(async {
        let storage = SimStorage::new(2, FaultConfig::NONE);
        let log = open(&storage).await;
        append(&log, batch(7, 1, 0, 2)).await.expect("first batch");
        let end = log.log_end_offset();
        assert!(matches!(
            append(&log, batch(7, 1, 5, 1)).await,
            Err(StorageError::OutOfOrderSequence { producer_id: 7, sequence: 5, expected: 2 })
        ));
        assert!(matches!(
            append(&log, batch(7, 0, 2, 1)).await,
            Err(StorageError::InvalidProducerEpoch { producer_id: 7, epoch: 0, current_epoch: 1 })
        ));
        assert!(matches!(
            append(&log, batch(7, 2, 2, 1)).await,
            Err(StorageError::OutOfOrderSequence { expected: 0, .. })
        ));
        assert_eq!(log.log_end_offset(), end, "refused batches wrote nothing");
        // A bumped epoch starting at 0 is accepted, and the old epoch is fenced from then on.
        assert_eq!(append(&log, batch(7, 2, 0, 1)).await.ok(), Some((end, false)));
        assert!(matches!(
            append(&log, batch(7, 1, 2, 1)).await,
            Err(StorageError::InvalidProducerEpoch { .. })
        ));
        // A producer this partition does not know may start at any sequence (Kafka 2.5+).
        assert_eq!(append(&log, batch(8, 0, 40, 1)).await.ok(), Some((end + 1, false)));
    })
}

#[test]
fn after_a_crash_producer_state_comes_from_the_snapshot_and_the_log_after_it() {
    block_on(async {
        let storage = SimStorage::new(3, FaultConfig::NONE);
        let log = open(&storage).await;
        assert_eq!(log.producer_recovery(), ProducerRecovery::default());
        for sequence in 0..10 {
            append(&log, batch(7, 0, sequence, 1)).await.expect("append");
        }
        log.roll(1_000).await.expect("roll");
        assert_eq!(snapshots(&storage), vec![10], "a roll writes the state as of the log end");
        for sequence in 10..13 {
            append(&log, batch(7, 0, sequence, 1)).await.expect("append");
        }
        append(&log, batch(8, 0, 0, 4)).await.expect("append");
        drop(log);
        storage.crash();

        let log = open(&storage).await;
        assert!(!log.opened_clean);
        assert_eq!(
            log.producer_recovery(),
            ProducerRecovery { snapshot_offset: Some(10), batches_replayed: 4 },
            "only the batches after the snapshot are read"
        );
        assert_eq!(log.producer_count(), 2);
        // The state is the same as before the crash: retries are recognised, gaps refused.
        assert_eq!(append(&log, batch(7, 0, 12, 1)).await.ok(), Some((12, true)));
        assert_eq!(append(&log, batch(8, 0, 0, 4)).await.ok(), Some((13, true)));
        assert!(matches!(
            append(&log, batch(7, 0, 14, 1)).await,
            Err(StorageError::OutOfOrderSequence { expected: 13, .. })
        ));
        assert_eq!(append(&log, batch(7, 0, 13, 1)).await.ok(), Some((17, false)));

        // A clean close snapshots the log end: the next open reads no batch at all.
        log.close().await.expect("close");
        let log = open(&storage).await;
        assert!(log.opened_clean);
        assert_eq!(
            log.producer_recovery(),
            ProducerRecovery { snapshot_offset: Some(18), batches_replayed: 0 }
        );
        assert_eq!(append(&log, batch(7, 0, 13, 1)).await.ok(), Some((17, true)));
        assert_eq!(snapshots(&storage), vec![10, 18], "older snapshots are removed");
    })
}

#[test]
fn a_damaged_snapshot_falls_back_to_an_older_one() {
    block_on(async {
        let storage = SimStorage::new(4, FaultConfig::NONE);
        let log = open(&storage).await;
        for sequence in 0..4 {
            append(&log, batch(3, 0, sequence, 1)).await.expect("append");
            log.roll(1_000).await.expect("roll");
        }
        assert_eq!(snapshots(&storage), vec![3, 4]);
        drop(log);
        storage.crash();
        let newest = dir().join(snapshot_file_name(4));
        let mut bytes = storage.file_bytes(&newest).expect("snapshot");
        bytes[10] ^= 0xff;
        storage.set_file_bytes(&newest, bytes);
        let log = open(&storage).await;
        assert_eq!(
            log.producer_recovery(),
            ProducerRecovery { snapshot_offset: Some(3), batches_replayed: 1 }
        );
        assert_eq!(append(&log, batch(3, 0, 3, 1)).await.ok(), Some((3, true)));
        assert_eq!(append(&log, batch(3, 0, 4, 1)).await.ok(), Some((4, false)));
    })
}

#[test]
fn producers_whose_batches_are_all_deleted_expire() {
    block_on(async {
        let storage = SimStorage::new(5, FaultConfig::NONE);
        let log = open(&storage).await;
        append(&log, batch(1, 0, 0, 1)).await.expect("append");
        append(&log, batch(2, 0, 0, 1)).await.expect("append");
        log.delete_records_before(1).await.expect("delete records");
        assert_eq!(log.producer_count(), 1);
        // Its state gone, producer 1 goes on where it was (Kafka 2.5+ accepts an unknown
        // producer at any sequence) and producer 2's sequences are still checked.
        assert_eq!(append(&log, batch(1, 0, 1, 1)).await.ok(), Some((2, false)));
        assert_eq!(append(&log, batch(2, 0, 1, 1)).await.ok(), Some((3, false)));
        assert!(matches!(
            append(&log, batch(2, 0, 5, 1)).await,
            Err(StorageError::OutOfOrderSequence { producer_id: 2, .. })
        ));
    })
}
