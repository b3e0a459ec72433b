//! Unit-level behaviour of the partition log: append, read, roll, index, time index, retention,
//! truncate, delete-records and reopen, on the simulated disk (deterministic) and on real
//! direct-I/O files.

mod common;

use common::{base_offset, batch, options, read_all};
use futures_lite::future::block_on;
use shard::io::sim::{FaultConfig, SimStorage};
use shard::{FlushPolicy, LogConfig, PartitionLog, StorageError};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    PathBuf::from("/data/orders-0")
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 1024,
        flush: FlushPolicy::Never,
        ..LogConfig::default()
    }
}

async fn open(
    storage: &SimStorage,
    config: LogConfig,
    cache_bytes: usize,
) -> PartitionLog<SimStorage> {
    PartitionLog::open(storage.clone(), &dir(), options(config, cache_bytes)).await.expect("open")
}

#[test]
fn appends_get_contiguous_offsets_and_read_back_byte_for_byte() {
    block_on(async {
        let storage = SimStorage::new(1, FaultConfig::NONE);
        let log = open(&storage, LogConfig::default(), 1 << 20).await;
        let mut appended = Vec::new();
        for i in 0..3 {
            let info = log.append(batch(i, 3, 50, 1000), 0, 1000).await.expect("append");
            assert_eq!((info.base_offset, info.last_offset), (3 * i as i64, 3 * i as i64 + 2));
            appended.push(info);
        }
        assert_eq!(log.log_end_offset(), 9);
        let all = log.read(0, 1 << 20).await.expect("read");
        assert!(all.from_cache);
        assert_eq!(all.batches.len(), 3);
        for (i, bytes) in all.batches.iter().enumerate() {
            let mut expected = batch(i as u64, 3, 50, 1000);
            expected[0..8].copy_from_slice(&(3 * i as i64).to_be_bytes());
            expected[12..16].copy_from_slice(&0i32.to_be_bytes());
            assert_eq!(&bytes[..], &expected[..], "batch {i} differs from what was appended");
        }
        let middle = log.read(4, 1 << 20).await.expect("read");
        assert_eq!(base_offset(&middle.batches[0]), 3, "read starts at the batch holding 4");
        let one = log.read(0, 10).await.expect("read");
        assert_eq!(one.batches.len(), 1, "at least one batch even when over max_bytes");
        assert!(log.read(9, 100).await.expect("read at end").batches.is_empty());
        assert!(matches!(log.read(10, 100).await, Err(StorageError::OffsetOutOfRange { .. })));
    });
}

#[test]
fn disk_reads_match_cache_reads_when_the_cache_is_too_small() {
    block_on(async {
        let storage = SimStorage::new(2, FaultConfig::NONE);
        let cached = open(&storage, small_config(), 1 << 20).await;
        for i in 0..40 {
            cached.append(batch(i, 2, 100, 1000 + i as i64), 0, 1000).await.expect("append");
        }
        let from_cache = read_all(&cached).await;
        cached.close().await.expect("close");
        let uncached = open(&storage, small_config(), 0).await;
        assert!(uncached.opened_clean);
        let first = uncached.read(0, 1 << 20).await.expect("read");
        assert!(!first.from_cache);
        let from_disk = read_all(&uncached).await;
        assert_eq!(from_cache, from_disk);
        for offset in [0, 1, 17, 40, 79] {
            let read = uncached.read(offset, 300).await.expect("read");
            let header = wire::RecordBatchHeader::parse(&read.batches[0], 1 << 26).expect("batch");
            assert!(header.base_offset() <= offset && offset <= header.last_offset());
            assert!(read.size_bytes() <= 300 || read.batches.len() == 1);
        }
    });
}

#[test]
fn segments_roll_at_segment_bytes_and_index_every_interval() {
    block_on(async {
        let storage = SimStorage::new(3, FaultConfig::NONE);
        let log = open(&storage, small_config(), 1 << 20).await;
        for i in 0..30 {
            log.append(batch(i, 1, 400, 1000), 0, 1000).await.expect("append");
        }
        let bases = log.segment_base_offsets();
        assert!(bases.len() >= 3, "4 KiB segments of ~470-byte batches roll: {bases:?}");
        assert_eq!(bases[0], 0);
        let sealed_log =
            storage.file_bytes(&dir().join(format!("{:020}.log", bases[1]))).expect("file");
        assert!(sealed_log.len() as u64 <= 4096, "a sealed segment respects segment.bytes");
        assert_eq!(base_offset(&sealed_log), bases[1], "segment file named by its first offset");
        let index =
            storage.file_bytes(&dir().join(format!("{:020}.index", bases[1]))).expect("index");
        assert!(!index.is_empty() && index.len().is_multiple_of(8), "sealed segment has an index");
        let entries = index.len() / 8;
        let expected = sealed_log.len() / 1024;
        assert!(
            entries + 1 >= expected && entries <= expected,
            "{entries} entries for {} bytes",
            sealed_log.len()
        );
        for chunk in index.chunks(8) {
            let relative = u32::from_be_bytes(chunk[..4].try_into().unwrap()) as i64;
            let position = u32::from_be_bytes(chunk[4..].try_into().unwrap()) as usize;
            assert_eq!(
                base_offset(&sealed_log[position..]),
                bases[1] + relative,
                "index entry points at its batch"
            );
        }
        let read = log.read(bases[2], 1 << 20).await.expect("read across segments");
        assert_eq!(base_offset(&read.batches[0]), bases[2]);
    });
}

#[test]
fn segments_roll_after_segment_ms() {
    block_on(async {
        let storage = SimStorage::new(4, FaultConfig::NONE);
        let config = LogConfig { segment_ms: 1000, ..small_config() };
        let log = open(&storage, config, 1 << 20).await;
        log.append(batch(0, 1, 10, 1000), 0, 1000).await.expect("append");
        log.append(batch(1, 1, 10, 1500), 0, 1500).await.expect("append");
        assert_eq!(log.segment_base_offsets(), vec![0]);
        log.append(batch(2, 1, 10, 2100), 0, 2100).await.expect("append");
        assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    });
}

#[test]
fn offset_for_timestamp_finds_the_first_record_at_or_after_the_time() {
    block_on(async {
        let storage = SimStorage::new(5, FaultConfig::NONE);
        let log = open(&storage, small_config(), 0).await;
        // Batch i holds 3 records stamped 10_000 + 100 * i + {0, 1, 2}.
        for i in 0..60 {
            log.append(batch(i, 3, 60, 10_000 + 100 * i as i64), 0, 1000).await.expect("append");
        }
        let lookup = |t| log.offset_for_timestamp(t);
        assert_eq!(lookup(0).await.expect("lookup").map(|l| l.offset), Some(0));
        let hit = lookup(10_000 + 100 * 37 + 1).await.expect("lookup").expect("found");
        assert_eq!((hit.offset, hit.timestamp), (37 * 3 + 1, 10_000 + 100 * 37 + 1));
        let between = lookup(10_000 + 100 * 20 + 50).await.expect("lookup").expect("found");
        assert_eq!(between.offset, 21 * 3, "the first record after a gap in time");
        assert_eq!(lookup(10_000 + 100 * 59 + 3).await.expect("lookup"), None);
    });
}

#[test]
fn retention_by_bytes_and_time_deletes_whole_old_segments() {
    block_on(async {
        let storage = SimStorage::new(6, FaultConfig::NONE);
        let config = LogConfig { retention_ms: None, ..small_config() };
        let log = open(&storage, config.clone(), 1 << 20).await;
        for i in 0..40 {
            log.append(batch(i, 1, 400, 1_000 + i as i64 * 1000), 0, 1000).await.expect("append");
        }
        let before = log.segment_base_offsets();
        assert_eq!(
            log.apply_retention(1_000_000).await.expect("retention"),
            0,
            "nothing limits it yet"
        );
        log.set_config(LogConfig { retention_bytes: Some(8192), ..config.clone() })
            .expect("config");
        let deleted = log.apply_retention(1_000_000).await.expect("retention");
        assert!(deleted > 0);
        let after = log.segment_base_offsets();
        assert_eq!(after[..], before[deleted..]);
        assert_eq!(log.log_start_offset(), after[0]);
        assert!(log.size_bytes() - 4096 < 8192, "no segment more than needed is kept");
        assert!(!storage.paths().iter().any(|p| p.ends_with(format!("{:020}.log", before[0]))));
        assert!(matches!(log.read(0, 100).await, Err(StorageError::OffsetOutOfRange { .. })));
        // By time: segments whose newest record is older than retention.ms go; the active stays.
        log.set_config(LogConfig { retention_ms: Some(10_000), retention_bytes: None, ..config })
            .expect("config");
        let newest = 1_000 + 39 * 1000;
        log.apply_retention(newest + 10_001).await.expect("retention");
        assert_eq!(log.segment_base_offsets().len(), 1, "only the active segment is left");
        assert_eq!(
            read_all(&log).await.len() as i64,
            log.log_end_offset() - log.log_start_offset()
        );
    });
}

#[test]
fn truncate_to_removes_whole_batches_and_appends_continue() {
    block_on(async {
        let storage = SimStorage::new(7, FaultConfig::NONE);
        let log = open(&storage, small_config(), 1 << 20).await;
        for i in 0..30 {
            log.append(batch(i, 2, 300, 1000), 0, 1000).await.expect("append");
        }
        log.truncate_to(25).await.expect("truncate");
        assert_eq!(log.log_end_offset(), 24, "the batch holding 25 (24..25) is removed whole");
        assert!(matches!(log.read(24, 100).await, Ok(read) if read.batches.is_empty()));
        let info = log.append(batch(99, 1, 10, 2000), 0, 2000).await.expect("append");
        assert_eq!(info.base_offset, 24);
        let all = read_all(&log).await;
        assert_eq!(all.len(), 13);
        log.truncate_to(0).await.expect("truncate everything");
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        drop(log);
        storage.crash();
        let reopened = open(&storage, small_config(), 1 << 20).await;
        assert_eq!(reopened.log_end_offset(), 0);
    });
}

#[test]
fn restart_at_empties_the_log_and_starts_it_past_its_end_across_a_crash() {
    block_on(async {
        let storage = SimStorage::new(9, FaultConfig::NONE);
        let log = open(&storage, small_config(), 1 << 20).await;
        for i in 0..30 {
            log.append(batch(i, 2, 300, 1000), 0, 1000).await.expect("append");
        }
        log.sync().await.expect("sync");
        log.restart_at(500).await.expect("restart");
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 500));
        assert_eq!(log.durable_end_offset(), 500, "an empty log is durable where it starts");
        assert!(matches!(log.read(0, 100).await, Err(StorageError::OffsetOutOfRange { .. })));
        assert!(log.read(500, 100).await.expect("read at the start").batches.is_empty());
        let info = log.append(batch(99, 3, 10, 2000), 0, 2000).await.expect("append");
        assert_eq!((info.base_offset, info.last_offset), (500, 502));
        log.sync().await.expect("sync");
        drop(log);
        storage.crash();
        let reopened = open(&storage, small_config(), 1 << 20).await;
        assert_eq!((reopened.log_start_offset(), reopened.log_end_offset()), (500, 503));
        let all = read_all(&reopened).await;
        assert_eq!(all.len(), 1, "only the batch appended after the restart");
        assert_eq!(base_offset(&all[0]), 500);
    });
}

#[test]
fn delete_records_before_moves_the_log_start_and_survives_a_crash() {
    block_on(async {
        let storage = SimStorage::new(8, FaultConfig::NONE);
        let log = open(&storage, small_config(), 1 << 20).await;
        for i in 0..30 {
            log.append(batch(i, 1, 400, 1000), 0, 1000).await.expect("append");
        }
        log.sync().await.expect("sync");
        let segments_before = log.segment_base_offsets().len();
        assert_eq!(log.delete_records_before(17).await.expect("delete"), 17);
        assert_eq!(log.log_start_offset(), 17);
        assert!(
            log.segment_base_offsets().len() < segments_before,
            "whole segments below 17 deleted"
        );
        assert!(matches!(log.read(16, 10).await, Err(StorageError::OffsetOutOfRange { .. })));
        assert_eq!(base_offset(&log.read(17, 10).await.expect("read").batches[0]), 17);
        assert!(log.delete_records_before(31).await.is_err(), "past the log end");
        // The deleted segments' files wait, renamed, for `remove_deleted_files` (the broker
        // runs it in the background); a crash before it leaves them for `open` to remove.
        let doomed = |storage: &SimStorage| {
            storage
                .paths()
                .into_iter()
                .filter(|p| p.to_string_lossy().ends_with(".deleted"))
                .count()
        };
        assert!(doomed(&storage) > 0, "renamed, not yet unlinked");
        drop(log);
        storage.crash();
        let reopened = open(&storage, small_config(), 1 << 20).await;
        assert_eq!(reopened.log_start_offset(), 17);
        assert_eq!(reopened.log_end_offset(), 30);
        assert_eq!(doomed(&storage), 0, "open removed the leftovers");
        assert_eq!(reopened.delete_records_before(25).await.expect("delete"), 25);
        reopened.remove_deleted_files().await.expect("remove");
        assert_eq!(doomed(&storage), 0);
        assert_eq!(base_offset(&reopened.read(25, 10).await.expect("read").batches[0]), 25);
    });
}

#[test]
fn missing_and_corrupt_index_files_are_rebuilt() {
    block_on(async {
        let storage = SimStorage::new(9, FaultConfig::NONE);
        let log = open(&storage, small_config(), 0).await;
        for i in 0..30 {
            log.append(batch(i, 1, 400, 1000 + i as i64), 0, 1000).await.expect("append");
        }
        let expected = read_all(&log).await;
        let bases = log.segment_base_offsets();
        log.close().await.expect("close");
        let index_path = |base: i64| dir().join(format!("{base:020}.index"));
        let original = storage.file_bytes(&index_path(bases[1])).expect("index");
        storage.set_file_bytes(&index_path(bases[1]), vec![0xff; 13]);
        let removed_path = index_path(bases[2]);
        let original_removed = storage.file_bytes(&removed_path).expect("index");
        shard::io::Storage::remove(&storage, &removed_path).await.expect("remove");
        let reopened = open(&storage, small_config(), 0).await;
        assert_eq!(read_all(&reopened).await, expected);
        assert_eq!(
            storage.file_bytes(&index_path(bases[1])),
            Some(original),
            "rebuilt identically"
        );
        assert_eq!(storage.file_bytes(&removed_path), Some(original_removed), "recreated");
    });
}

#[test]
fn clean_shutdown_skips_the_scan_and_a_crash_does_not() {
    block_on(async {
        let storage = SimStorage::new(10, FaultConfig::NONE);
        let log = open(&storage, small_config(), 0).await;
        assert!(!log.opened_clean);
        for i in 0..10 {
            log.append(batch(i, 1, 100, 1000), 3, 1000).await.expect("append");
        }
        log.close().await.expect("close");
        assert!(matches!(log.append(batch(0, 1, 1, 0), 3, 0).await, Err(StorageError::Closed(_))));
        let clean = open(&storage, small_config(), 0).await;
        assert!(clean.opened_clean);
        assert_eq!(clean.log_end_offset(), 10);
        assert_eq!(clean.latest_epoch(), Some(3));
        clean.append(batch(10, 1, 100, 1000), 3, 1000).await.expect("append");
        drop(clean);
        storage.crash();
        let crashed = open(&storage, small_config(), 0).await;
        assert!(!crashed.opened_clean, "the marker is removed at open, so a crash is noticed");
        assert!(crashed.log_end_offset() >= 10);
    });
}

/// Issue #12 item 1: a partition holds a bounded number of descriptors however many segments
/// it has: the active one, and `SEALED_FILES_OPEN_MAX` sealed ones opened on demand by reads.
#[test]
fn a_log_with_many_segments_keeps_only_the_active_and_the_last_read_sealed_file_open() {
    block_on(async {
        let storage = SimStorage::new(14, FaultConfig::NONE);
        let log = open(&storage, small_config(), 0).await;
        for i in 0..200 {
            log.append(batch(i, 1, 400, 1000), 0, 1000).await.expect("append");
        }
        let segments = log.segment_base_offsets().len();
        assert!(segments > 20, "{segments} segments");
        let bound = 1 + shard::partition_log::SEALED_FILES_OPEN_MAX as u64;
        assert!(storage.open_handles() <= bound, "{} files open", storage.open_handles());
        let all = read_all(&log).await;
        assert_eq!(all.len(), 200, "every segment reads (reopened on demand)");
        assert!(
            storage.open_handles() <= bound,
            "{} files open after reads",
            storage.open_handles()
        );
        log.close().await.expect("close");
        let reopened = open(&storage, small_config(), 0).await;
        assert!(
            storage.open_handles() <= bound,
            "{} files open after a clean open",
            storage.open_handles()
        );
        assert_eq!(read_all(&reopened).await, all);
        drop(reopened);
        storage.crash();
        let recovered = open(&storage, small_config(), 0).await;
        assert!(
            storage.open_handles() <= bound,
            "{} files open after recovery",
            storage.open_handles()
        );
        assert_eq!(read_all(&recovered).await.len(), 200);
    });
}

/// Issue #12 item 9: the last segment cut short after a clean shutdown, marker left in place.
/// The marker records each segment's size, so the open notices, recovers by scanning, and a
/// write acknowledged afterwards survives a crash (it was lost when the marker was trusted).
#[test]
fn a_segment_cut_short_under_a_clean_marker_is_recovered_and_later_writes_survive_a_crash() {
    block_on(async {
        let storage = SimStorage::new(13, FaultConfig::NONE);
        let log = open(&storage, small_config(), 0).await;
        for i in 0..10 {
            log.append(batch(i, 1, 300, 1000), 0, 1000).await.expect("append");
        }
        log.close().await.expect("close");
        let bases = {
            let reopened = open(&storage, small_config(), 0).await;
            let bases = reopened.segment_base_offsets();
            reopened.close().await.expect("close");
            bases
        };
        let last = dir().join(format!("{:020}.log", bases.last().expect("a segment")));
        let bytes = storage.file_bytes(&last).expect("last segment");
        let peek = wire::record_batch::peek_batch(&bytes, 1 << 20).expect("batch");
        // Cut inside its second batch: one whole batch stays.
        storage.set_file_bytes(&last, bytes[..peek.size_bytes + 10].to_vec());
        let cut = open(&storage, small_config(), 0).await;
        assert!(!cut.opened_clean, "the marker's sizes disagree: full recovery");
        let end = cut.log_end_offset();
        assert_eq!(end, peek.base_offset + 1, "the log ends after the last whole batch");
        assert_eq!(read_all(&cut).await.len() as i64, end, "every record up to it reads");
        cut.append(batch(end as u64, 1, 300, 1000), 0, 1000).await.expect("append");
        cut.sync().await.expect("sync: acknowledged");
        drop(cut);
        storage.crash();
        let crashed = open(&storage, small_config(), 0).await;
        assert_eq!(crashed.log_end_offset(), end + 1, "the acknowledged write survived");
        assert_eq!(read_all(&crashed).await.len() as i64, end + 1);
    });
}

/// A log closed without a write since a clean open skips the rewrite of its files (only the
/// marker is written); it must still reopen clean with the same contents, and a log written
/// after a clean open (even back to the same end after a truncation) must be fully closed.
#[test]
fn an_untouched_clean_log_closes_cheaply_and_a_touched_one_fully() {
    block_on(async {
        let storage = SimStorage::new(12, FaultConfig::NONE);
        let log = open(&storage, small_config(), 0).await;
        for i in 0..30 {
            log.append(batch(i, 1, 200, 1000), 0, 1000).await.expect("append");
        }
        log.close().await.expect("close");
        let written = storage.paths().len();
        let untouched = open(&storage, small_config(), 0).await;
        let before = read_all(&untouched).await;
        untouched.close().await.expect("close");
        assert_eq!(storage.paths().len(), written, "no file added or removed");
        let again = open(&storage, small_config(), 0).await;
        assert!(again.opened_clean);
        assert_eq!(read_all(&again).await, before);
        // Truncate and append back to the same end: the shape is the same, the data is not.
        let end = again.log_end_offset();
        again.truncate_to(end - 3).await.expect("truncate");
        for i in 100..103 {
            again.append(batch(i, 1, 200, 1000), 0, 1000).await.expect("append");
        }
        assert_eq!(again.log_end_offset(), end);
        let after = read_all(&again).await;
        again.close().await.expect("close");
        storage.crash(); // only what close synced survives
        let reopened = open(&storage, small_config(), 0).await;
        assert!(reopened.opened_clean);
        assert_eq!(read_all(&reopened).await, after);
    });
}

#[test]
fn bad_batches_are_rejected_with_typed_errors() {
    block_on(async {
        let storage = SimStorage::new(11, FaultConfig::NONE);
        let config = LogConfig { max_message_bytes: 500, ..LogConfig::default() };
        let log = open(&storage, config, 0).await;
        let mut corrupt = batch(1, 1, 10, 0);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        assert!(matches!(log.append(corrupt, 0, 0).await, Err(StorageError::InvalidBatch(_))));
        assert!(matches!(
            log.append(batch(1, 1, 1000, 0), 0, 0).await,
            Err(StorageError::BatchTooLarge { .. })
        ));
        let mut two = batch(1, 1, 10, 0);
        two.extend_from_slice(&batch(2, 1, 10, 0));
        assert!(matches!(log.append(two, 0, 0).await, Err(StorageError::InvalidBatch(_))));
        log.append(batch(3, 1, 10, 0), 5, 0).await.expect("append at epoch 5");
        assert!(matches!(
            log.append(batch(4, 1, 10, 0), 4, 0).await,
            Err(StorageError::StaleLeaderEpoch { .. })
        ));
        assert_eq!(log.log_end_offset(), 1, "rejected batches leave no trace");
    });
}

fn run_dma<F: std::future::Future>(future: F) -> F::Output {
    shard::runtime::run_local(1 << 20, future).expect("executor")
}

async fn open_dma(path: &Path, config: LogConfig) -> PartitionLog<shard::io::dma::DmaStorage> {
    let storage =
        shard::runtime::open_storage(path.parent().expect("parent")).await.expect("storage");
    PartitionLog::open(storage, path, options(config, 0)).await.expect("open")
}

#[test]
fn real_direct_io_files_round_trip_through_roll_close_and_reopen() {
    let root = common::scratch_dir("dma-round-trip");
    let path = root.join("orders-0");
    run_dma(async {
        let config = LogConfig {
            segment_bytes: 256 << 10,
            index_interval_bytes: 4096,
            flush: FlushPolicy::Never,
            ..LogConfig::default()
        };
        let log = open_dma(&path, config.clone()).await;
        for i in 0..300 {
            log.append(batch(i, 3, 300 + (i as usize * 37) % 2000, 1000), 0, 1000)
                .await
                .expect("append");
        }
        let written = read_all(&log).await;
        assert!(log.segment_base_offsets().len() > 3);
        log.close().await.expect("close");
        let reopened = open_dma(&path, config).await;
        assert!(reopened.opened_clean);
        assert_eq!(read_all(&reopened).await, written);
        let appended = reopened.append(batch(7, 1, 10, 1000), 0, 1000).await.expect("append");
        assert_eq!(appended.base_offset, 900);
    });
    let on_disk = std::fs::read(path.join(format!("{:020}.log", 0))).expect("segment file");
    assert_eq!(base_offset(&on_disk), 0, "the .log file holds plain Kafka batches");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn concurrent_appends_share_fdatasyncs_under_flush_always() {
    let root = common::scratch_dir("group-commit");
    let path = root.join("orders-0");
    run_dma(async {
        let config = LogConfig { flush: FlushPolicy::Always, ..LogConfig::default() };
        let log = std::rc::Rc::new(open_dma(&path, config).await);
        let writers = 8;
        let appends_each = 20;
        let mut tasks = Vec::new();
        for writer in 0..writers {
            let log = log.clone();
            tasks.push(shard::runtime::spawn(async move {
                for i in 0..appends_each {
                    let info = log
                        .append(batch(writer * 100 + i, 1, 16 << 10, 1000), 0, 1000)
                        .await
                        .expect("append");
                    assert!(
                        log.durable_end_offset() > info.last_offset,
                        "acknowledged only once durable"
                    );
                }
            }));
        }
        for task in tasks {
            task.await;
        }
        let appends = writers * appends_each;
        let syncs = log.syncs_completed();
        assert_eq!(log.log_end_offset(), appends as i64);
        assert!(
            syncs < appends / 2,
            "{syncs} syncs for {appends} appends: group commit is not sharing"
        );
    });
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn disk_reads_cross_batches_larger_than_one_read() {
    // Regression: a 64 KiB read that ended inside a larger batch, after other batches were
    // collected, was reported as corruption.
    block_on(async {
        let storage = SimStorage::new(12, FaultConfig::NONE);
        let config = LogConfig { flush: FlushPolicy::Never, ..LogConfig::default() };
        let log = open(&storage, config, 0).await;
        for i in 0..20 {
            log.append(batch(i, 1, 70_000 + (i as usize * 997) % 30_000, 1000), 0, 1000)
                .await
                .expect("append");
        }
        let expected = read_all(&log).await;
        assert_eq!(expected.len(), 20);
        for max_bytes in [1, 65_536, 150_000, 300_000, 4 << 20] {
            let mut offset = 0;
            let mut seen = 0;
            while offset < log.log_end_offset() {
                let read = log.read(offset, max_bytes).await.expect("read from disk");
                assert!(!read.from_cache);
                for batch in read.batches {
                    assert_eq!(batch, expected[offset as usize], "max_bytes {max_bytes}");
                    offset += 1;
                    seen += 1;
                }
            }
            assert_eq!(seen, 20);
        }
    });
}

/// A follower appends the leader's batches byte for byte: offsets and leader epochs are the
/// leader's, the epoch history follows them, the producer state is rebuilt from them, and a
/// batch that does not continue the log is refused.
#[test]
fn replica_appends_keep_the_leaders_offsets_and_epochs_byte_for_byte() {
    block_on(async {
        let leader_disk = SimStorage::new(31, FaultConfig::NONE);
        let leader = open(&leader_disk, LogConfig::default(), 1 << 20).await;
        let mut idempotent = wire::RecordBatchBuilder::new(1000);
        idempotent.producer(7, 0, 0);
        idempotent.push(wire::BatchRecord {
            key: Some(b"k"),
            value: Some(b"v"),
            timestamp_delta: 0,
        });
        leader.append(batch(1, 3, 20, 1000), 0, 1000).await.expect("epoch 0");
        leader.append(bytes::BytesMut::from(&idempotent.build()[..]), 2, 1000).await.expect("p");
        leader.append(batch(2, 2, 20, 1000), 2, 1000).await.expect("epoch 2");
        let copied = read_all(&leader).await;
        let follower_disk = SimStorage::new(32, FaultConfig::NONE);
        let follower =
            PartitionLog::open(follower_disk.clone(), &dir(), options(LogConfig::default(), 0))
                .await
                .expect("open");
        let mut out_of_place = bytes::BytesMut::from(&copied[1][..]);
        assert!(
            matches!(
                follower.append_replica(out_of_place.split().freeze(), 1000).await,
                Err(StorageError::InvalidArgument(_))
            ),
            "a batch at offset 3 cannot start an empty log"
        );
        for batch in &copied {
            follower.append_replica(batch.clone(), 1000).await.expect("copy");
        }
        assert_eq!(follower.log_end_offset(), 6);
        assert_eq!(read_all(&follower).await, copied, "byte for byte, from disk");
        assert_eq!(follower.latest_epoch(), Some(2));
        assert_eq!(follower.active_producers(), leader.active_producers(), "producer state");
        let mut stale = batch(5, 1, 20, 1000);
        let mut view = wire::record_batch::RecordBatchMut::new(&mut stale, 1 << 20).expect("batch");
        view.set_base_offset(6);
        view.set_partition_leader_epoch(1);
        assert!(
            matches!(
                follower.append_replica(stale.freeze(), 1000).await,
                Err(StorageError::StaleLeaderEpoch { epoch: 1, latest_epoch: 2 })
            ),
            "an epoch older than the history's latest is refused"
        );
        follower.sync().await.expect("sync: the refusals left the log writable");
        follower.close().await.expect("close");
        let reopened =
            PartitionLog::open(follower_disk, &dir(), options(LogConfig::default(), 0)).await;
        let reopened = reopened.expect("reopen");
        assert_eq!(read_all(&reopened).await, copied);
        assert_eq!(reopened.latest_epoch(), Some(2), "the epoch history was recorded");
    });
}

/// The high watermark follows the log end until replication sets it; once set it only moves
/// forward, truncation lowers it with the log end, and it never passes the log end.
#[test]
fn the_high_watermark_follows_the_log_end_until_set_and_then_only_moves_forward() {
    block_on(async {
        let storage = SimStorage::new(33, FaultConfig::NONE);
        let log = open(&storage, small_config(), 1 << 20).await;
        for i in 0..4 {
            log.append(batch(i, 2, 20, 1000), 0, 1000).await.expect("append");
        }
        assert_eq!(log.high_watermark(), 8, "no replicas: the log end");
        log.set_high_watermark(4);
        assert_eq!(log.high_watermark(), 4);
        log.set_high_watermark(2);
        assert_eq!(log.high_watermark(), 4, "never backwards");
        log.append(batch(9, 2, 20, 1000), 0, 1000).await.expect("append");
        assert_eq!(log.high_watermark(), 4, "appends do not move a set high watermark");
        log.set_high_watermark(10);
        log.truncate_to(6).await.expect("truncate");
        assert_eq!((log.log_end_offset(), log.high_watermark()), (6, 6), "truncation lowers it");
        let past =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| log.set_high_watermark(7)));
        assert!(past.is_err(), "a high watermark past the log end is a bug, asserted");
    });
}

/// A hold (an acks=all append on a single replica, waiting for its sync) keeps readers below
/// its first offset until that offset is durable, then the log end counts again; appends after
/// it stay hidden behind it; dropping the hold releases it even if no sync came.
#[test]
fn a_hold_keeps_readers_below_an_append_until_it_is_synced() {
    block_on(async {
        let storage = SimStorage::new(35, FaultConfig::NONE);
        let log = open(&storage, small_config(), 1 << 20).await;
        log.append(batch(0, 2, 20, 1000), 0, 1000).await.expect("append");
        log.sync().await.expect("sync");
        let hold = log.hold_until_durable(log.log_end_offset());
        log.append_with(batch(2, 2, 20, 1000), 0, 1000, false).await.expect("append");
        log.append_with(batch(4, 2, 20, 1000), 0, 1000, false).await.expect("append");
        assert_eq!(log.log_end_offset(), 6);
        assert_eq!(log.high_watermark(), 2, "held at the first unsynced append");
        log.sync_to(4).await.expect("sync");
        assert_eq!(log.high_watermark(), 6, "durable past the hold: the log end again");
        drop(hold);
        let second = log.hold_until_durable(log.log_end_offset());
        log.append_with(batch(6, 2, 20, 1000), 0, 1000, false).await.expect("append");
        assert_eq!(log.high_watermark(), 6);
        drop(second);
        assert_eq!(log.high_watermark(), 8, "a dropped hold holds nothing");
    });
}

/// The disk read path checks what the write path checked: a flipped byte inside a sealed
/// segment's batch (caught by its CRC32C) is reported as damage at that batch, never served, and
/// reported once; the intact batches before it are still served (issue #12 item 8).
#[test]
fn a_flipped_byte_in_a_sealed_segment_is_caught_by_the_disk_read_path() {
    block_on(async {
        let storage = SimStorage::new(34, FaultConfig::NONE);
        let log = open(&storage, small_config(), 0).await;
        for i in 0..20 {
            log.append(batch(i, 1, 400, 1000), 0, 1000).await.expect("append");
        }
        let first_segment = dir().join(format!("{:020}.log", 0));
        let mut bytes = storage.file_bytes(&first_segment).expect("sealed segment");
        let batch_bytes =
            wire::record_batch::peek_batch(&bytes, 1 << 20).expect("batch").size_bytes;
        // A byte inside the third batch (offset 2).
        bytes[2 * batch_bytes + 100] ^= 0x40;
        storage.set_file_bytes(&first_segment, bytes);
        let read = log.read(0, 1 << 20).await.expect("the intact prefix is served");
        let offsets: Vec<i64> = read
            .batches
            .iter()
            .map(|b| wire::record_batch::peek_batch(b, 1 << 20).expect("batch").base_offset)
            .collect();
        assert_eq!(offsets, vec![0, 1], "the batches before the damage, and none after it");
        let damaged = |first: bool| {
            move |result: &Result<_, StorageError>| {
                matches!(result, Err(StorageError::DamagedBatch { offset: 2, first_report, .. })
                    if *first_report == first)
            }
        };
        let at_damage = log.read(2, 1 << 20).await;
        assert!(damaged(true)(&at_damage), "reported at the damaged batch: {at_damage:?}");
        let again = log.read(2, 1 << 20).await;
        assert!(damaged(false)(&again), "reported once: {again:?}");
        let later = log.segment_base_offsets()[1];
        assert!(log.read(later, 1 << 20).await.is_ok(), "other segments still read");
    });
}

/// The stored form of `batch(tag, ..)` at `base` (offset and epoch patched by the append).
fn stored(tag: u64, records: usize, value_bytes: usize, base: i64) -> Vec<u8> {
    let mut expected = batch(tag, records, value_bytes, 1000);
    expected[0..8].copy_from_slice(&base.to_be_bytes());
    expected[12..16].copy_from_slice(&0i32.to_be_bytes());
    expected.to_vec()
}

#[test]
fn sequential_disk_reads_are_served_from_the_read_ahead_byte_for_byte() {
    block_on(async {
        let storage = SimStorage::new(3, FaultConfig::NONE);
        let config = LogConfig { segment_bytes: 256 << 10, ..small_config() };
        let log = open(&storage, config.clone(), 0).await;
        for i in 0..60 {
            log.append(batch(i, 10, 1000, 1000), 0, 1000).await.expect("append");
        }
        log.close().await.expect("close");
        let log = open(&storage, config, 0).await;
        let (mut offset, mut read) = (0i64, Vec::new());
        while offset < log.log_end_offset() {
            let got = log.read(offset, 64 << 10).await.expect("read");
            assert!(!got.from_cache && !got.batches.is_empty());
            for bytes in got.batches {
                offset = base_offset(&bytes) + 10;
                read.push(bytes.to_vec());
            }
        }
        let expected: Vec<Vec<u8>> = (0..60).map(|i| stored(i, 10, 1000, 10 * i as i64)).collect();
        assert_eq!(read, expected, "read-ahead serves exactly the log's bytes, across segments");
        assert!(
            log.read_ahead_hits() >= 3,
            "sequential reads took the read-ahead: {}",
            log.read_ahead_hits()
        );
    });
}

#[test]
fn a_truncation_drops_the_read_ahead_so_rewritten_offsets_read_the_new_batches() {
    block_on(async {
        let storage = SimStorage::new(4, FaultConfig::NONE);
        let log =
            open(&storage, LogConfig { flush: FlushPolicy::Never, ..LogConfig::default() }, 0)
                .await;
        for i in 0..40 {
            log.append(batch(i, 10, 1000, 1000), 0, 1000).await.expect("append");
        }
        // Each read takes the read-ahead the one before issued, and issues the next.
        let first = log.read(0, 64 << 10).await.expect("read");
        let second_at = base_offset(first.batches.last().expect("a batch")) + 10;
        let second = log.read(second_at, 64 << 10).await.expect("read");
        assert_eq!(log.read_ahead_hits(), 1, "the second read came from the read-ahead");
        let next = base_offset(second.batches.last().expect("a batch")) + 10;
        log.truncate_to(next).await.expect("truncate");
        for i in 0..5 {
            log.append(batch(1000 + i, 10, 1000, 1000), 0, 1000).await.expect("append");
        }
        let again = log.read(next, 64 << 10).await.expect("read");
        assert_eq!(
            again.batches[0].to_vec(),
            stored(1000, 10, 1000, next),
            "the batch written after the truncation, not the one read ahead before it"
        );
        assert_eq!(
            log.read_ahead_hits(),
            1,
            "the read-ahead from before the truncation was dropped"
        );
    });
}

/// The default config with 64 KiB write chunks (many chunk boundaries in little data).
fn chunks_of_64_kib(flush: FlushPolicy) -> LogConfig {
    LogConfig { write_chunk_bytes: 64 << 10, flush, ..LogConfig::default() }
}

#[test]
fn a_synced_chunk_is_not_written_again_in_full_when_it_fills() {
    block_on(async {
        let storage = SimStorage::new(7, FaultConfig::NONE);
        let config = chunks_of_64_kib(FlushPolicy::Always);
        let log = open(&storage, config, 1 << 20).await;
        let before = storage.bytes_written();
        let (mut appended, mut syncs) = (0u64, 0u64);
        // ~20 KiB batches, each synced (acks=all, or a follower's sync per fetch): 62 chunks.
        for i in 0..200 {
            let batch = batch(i, 20, 1000, 1000);
            appended += batch.len() as u64;
            log.append(batch, 0, 1000).await.expect("append");
            syncs += 1;
        }
        let written = storage.bytes_written() - before;
        // Each sync may write its last page again (and the one before it, when the batch
        // ends just past a page), never the chunk's head twice.
        assert!(
            written <= appended + syncs * 2 * 4096,
            "{written} bytes written for {appended} appended in {syncs} syncs"
        );
        assert_eq!(read_all(&log).await.len(), 200);
    });
}

/// Appends batches `tags` of `records` 1000-byte records; -> (bytes appended, disk writes made).
async fn append_counting(
    log: &PartitionLog<SimStorage>,
    storage: &SimStorage,
    tags: std::ops::Range<u64>,
    records: usize,
) -> (usize, u64) {
    let before = storage.writes();
    let mut appended = 0;
    for tag in tags {
        let batch = batch(tag, records, 1000, 1000);
        appended += batch.len();
        log.append(batch, 0, 1000).await.expect("append");
    }
    (appended, storage.writes() - before)
}

#[test]
fn large_batches_are_written_in_large_chunks_and_small_ones_in_configured_ones() {
    block_on(async {
        let storage = SimStorage::new(11, FaultConfig::NONE);
        let config = chunks_of_64_kib(FlushPolicy::Never);
        let log = open(&storage, config, 1 << 20).await;
        // ~640 KB batches: over `LARGE_BATCH_BYTES`, so their chunks are 4 MiB, not 64 KiB.
        let large = batch(0, 640, 1000, 1000);
        assert!(large.len() >= shard::partition_log::LARGE_BATCH_BYTES);
        let (appended, large_writes) = append_counting(&log, &storage, 0..20, 640).await;
        let chunk = shard::partition_log::LARGE_WRITE_CHUNK_BYTES;
        // The first chunk was allocated for the first batch already (the log starts empty).
        assert!(
            large_writes as usize <= appended / chunk + 1,
            "{large_writes} writes for {appended} bytes of large batches"
        );
        // Small batches (~20 KiB) fill the last large chunk, then get chunks of the configured
        // 64 KiB.
        log.sync().await.expect("sync");
        let (small, small_writes) = append_counting(&log, &storage, 20..420, 20).await;
        assert!(
            small_writes as usize >= (small - chunk) / (64 << 10),
            "{small_writes} writes for {small} bytes of small batches: not in 64 KiB chunks"
        );
        // Mixed chunk sizes read back byte for byte, from the cache and from the disk.
        log.sync().await.expect("sync");
        let written = read_all(&log).await;
        assert_eq!(written.len(), 420);
        log.close().await.expect("close");
        let reopened = open(&storage, LogConfig::default(), 0).await;
        assert_eq!(read_all(&reopened).await, written);
    });
}

#[test]
fn a_disk_read_behind_the_unwritten_tail_does_not_write_it_out() {
    block_on(async {
        let storage = SimStorage::new(13, FaultConfig::NONE);
        let config = chunks_of_64_kib(FlushPolicy::Never);
        // No cache: every read goes to the disk.
        let log = open(&storage, config, 0).await;
        // ~10 KiB batches: 1 MiB in 64 KiB chunks, so all but the last few chunks are written,
        // and the tail holds a partial one.
        for i in 0..100 {
            log.append(batch(i, 10, 1000, 1000), 0, 1000).await.expect("append");
        }
        let before = storage.writes();
        let early = log.read(0, 16 << 10).await.expect("read behind the tail");
        assert!(!early.batches.is_empty() && !early.from_cache);
        assert_eq!(base_offset(&early.batches[0]), 0);
        assert_eq!(storage.writes(), before, "a read of written bytes wrote the tail out");
        // A read of the unwritten tail writes it out first, and reads it back byte for byte.
        let last = log.log_end_offset() - 10;
        let tail = log.read(last, 16 << 10).await.expect("read at the tail");
        assert!(storage.writes() > before, "the tail was written out for the read");
        assert_eq!(tail.batches.len(), 1);
        assert_eq!(tail.batches[0].to_vec(), stored(99, 10, 1000, last));
    });
}
