//! Log compaction (`cleanup.policy=compact`): the last record per key survives with its offset,
//! superseded records go, batches keep their offset ranges (so the log stays contiguous), old
//! tombstones go, the active segment is untouched, compressed batches are compacted too, and
//! the result survives a crash and a reopen.

mod common;

use common::{options, read_all};
use futures_lite::future::block_on;
use shard::io::sim::{FaultConfig, SimStorage};
use shard::{FlushPolicy, LogConfig, PartitionLog};
use std::collections::BTreeMap;
use std::path::PathBuf;
use wire::{BatchRecord, Compression, RecordBatchBuilder, RecordBatchHeader};

fn dir() -> PathBuf {
    PathBuf::from("/data/compacted-0")
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        flush: FlushPolicy::Always,
        cleanup_delete: false,
        cleanup_compact: true,
        ..LogConfig::default()
    }
}

async fn open(storage: &SimStorage) -> PartitionLog<SimStorage> {
    PartitionLog::open(storage.clone(), &dir(), options(config(), 1 << 20)).await.expect("open")
}

/// A batch of (key, value) records; `None` value = tombstone.
fn batch(
    records: &[(&str, Option<String>)],
    timestamp: i64,
    codec: Compression,
) -> bytes::BytesMut {
    let mut builder = RecordBatchBuilder::new(timestamp);
    for (key, value) in records {
        builder.push(BatchRecord {
            key: Some(key.as_bytes()),
            value: value.as_deref().map(str::as_bytes),
            timestamp_delta: 0,
        });
    }
    bytes::BytesMut::from(&builder.build_compressed(codec).expect("build")[..])
}

/// offset → (key, value) of every record in the log, and the batch ranges.
async fn contents(
    log: &PartitionLog<SimStorage>,
) -> (BTreeMap<i64, (String, Option<String>)>, Vec<(i64, i64)>) {
    let mut records = BTreeMap::new();
    let mut ranges = Vec::new();
    for bytes in read_all(log).await {
        let header = RecordBatchHeader::parse(&bytes, 1 << 26).expect("batch");
        header.verify_crc().expect("crc");
        ranges.push((header.base_offset(), header.last_offset()));
        for record in wire::compression::records_of(&header).expect("records") {
            let offset = header.base_offset() + i64::from(record.offset_delta);
            let key = String::from_utf8(record.key.expect("keyed")).expect("utf-8");
            let value = record.value.map(|v| String::from_utf8(v).expect("utf-8"));
            records.insert(offset, (key, value));
        }
    }
    (records, ranges)
}

const NOW: i64 = 1_700_000_000_000;
const DAY_MS: i64 = 24 * 3600 * 1000;

#[test]
fn the_last_record_per_key_survives_at_its_offset_and_batches_keep_their_ranges() {
    block_on(async {
        for codec in [Compression::None, Compression::Zstd, Compression::Lz4] {
            let storage = SimStorage::new(11, FaultConfig::NONE);
            let log = open(&storage).await;
            // 6 rounds over 8 keys, 4 records per batch; segments of 2 KiB roll many times.
            for round in 0..6 {
                for half in 0..2 {
                    let records: Vec<(String, Option<String>)> = (0..4)
                        .map(|i| {
                            (
                                format!("key-{}", half * 4 + i),
                                Some(format!("round-{round}-{}", "x".repeat(40))),
                            )
                        })
                        .collect();
                    let refs: Vec<(&str, Option<String>)> =
                        records.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
                    log.append(batch(&refs, NOW, codec), 0, NOW).await.expect("append");
                }
            }
            let (before, ranges_before) = contents(&log).await;
            assert_eq!(before.len(), 48);
            let sealed_end = *log.segment_base_offsets().last().expect("segments");
            let outcome = log.compact(NOW).await.expect("compact");
            assert!(outcome.segments_rewritten > 0 && outcome.records_removed > 0, "{outcome:?}");
            assert!(outcome.bytes_after < outcome.bytes_before);
            let (after, ranges_after) = contents(&log).await;
            assert_eq!(
                ranges_after, ranges_before,
                "every batch keeps its offset range ({codec:?})"
            );
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 48));
            // Kept: every record in the active segment, and in sealed ones the latest per key.
            let latest: BTreeMap<&str, i64> =
                before.iter().map(|(offset, (key, _))| (key.as_str(), *offset)).collect();
            for (offset, record) in &before {
                let expected = *offset >= sealed_end || latest[record.0.as_str()] == *offset;
                assert_eq!(
                    after.get(offset),
                    expected.then_some(record),
                    "offset {offset} ({codec:?})"
                );
            }
            // A second run finds nothing more to do.
            assert_eq!(log.compact(NOW).await.expect("compact").segments_rewritten, 0);
            // Reads from the middle of a rewritten segment still land on the right batch.
            let read = log.read(5, 1).await.expect("read");
            let header = RecordBatchHeader::parse(&read.batches[0], 1 << 26).expect("batch");
            assert!(header.base_offset() <= 5 && 5 <= header.last_offset());
        }
    })
}

#[test]
fn old_tombstones_go_recent_ones_stay() {
    block_on(async {
        let storage = SimStorage::new(12, FaultConfig::NONE);
        let log = open(&storage).await;
        let old = NOW - 2 * DAY_MS;
        log.append(
            batch(
                &[("gone", Some("v".into())), ("kept", Some("v".into()))],
                old,
                Compression::None,
            ),
            0,
            old,
        )
        .await
        .expect("append");
        log.append(batch(&[("gone", None)], old, Compression::None), 0, old).await.expect("append");
        log.append(batch(&[("kept", None)], NOW - 1000, Compression::None), 0, NOW)
            .await
            .expect("append");
        log.roll(NOW).await.expect("roll");
        log.append(batch(&[("other", Some("v".into()))], NOW, Compression::None), 0, NOW)
            .await
            .expect("append");
        log.compact(NOW).await.expect("compact");
        let (after, ranges) = contents(&log).await;
        let kept: Vec<(i64, (String, Option<String>))> = after.into_iter().collect();
        assert_eq!(
            kept,
            vec![
                (3, ("kept".to_string(), None)),
                (4, ("other".to_string(), Some("v".to_string())))
            ],
            "the old tombstone and everything it deleted are gone; the recent tombstone stays"
        );
        assert_eq!(
            ranges,
            vec![(0, 1), (2, 2), (3, 3), (4, 4)],
            "emptied batches keep their ranges"
        );
    })
}

#[test]
fn a_compacted_log_survives_a_crash_and_a_leftover_temporary_file_is_removed() {
    block_on(async {
        let storage = SimStorage::new(13, FaultConfig::NONE);
        let log = open(&storage).await;
        for round in 0..10 {
            let value = format!("{round}-{}", "y".repeat(200));
            log.append(
                batch(&[("a", Some(value.clone())), ("b", Some(value))], NOW, Compression::None),
                0,
                NOW,
            )
            .await
            .expect("append");
        }
        assert!(log.compact(NOW).await.expect("compact").segments_rewritten > 0);
        let (expected, _) = contents(&log).await;
        drop(log);
        storage.crash();
        let stray = dir().join("00000000000000000000.log.cleaned.tmp");
        storage.set_file_bytes(&stray, vec![1, 2, 3]);
        let log = open(&storage).await;
        assert!(storage.file_bytes(&stray).is_none(), "the temporary file is removed at open");
        assert_eq!(contents(&log).await.0, expected);
        log.close().await.expect("close");
        let log = open(&storage).await;
        assert!(log.opened_clean);
        assert_eq!(contents(&log).await.0, expected);
    })
}
