//! Seeded randomized test: append / read / roll / truncate / retention / delete-records / sync /
//! clean close / crash + recover, against a plain in-memory model, on the simulated disk that
//! tears unsynced writes at a crash and injects read errors.
//!
//! Every run takes the fixed seeds `0..SEEDS` (40) and one random seed, and prints them; a
//! failure names the seed, and `SEED=<n> cargo test -p shard --test randomized_model` replays
//! exactly that run.

mod common;

use bytes::Bytes;
use common::{batch, options};
use futures_lite::future::block_on;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shard::io::sim::{FaultConfig, SimStorage};
use shard::{FlushPolicy, LogConfig, PartitionLog, StorageError};
use std::path::PathBuf;

const OPERATIONS_PER_SEED: usize = 400;
const READ_ERROR_PROBABILITY: f64 = 0.05;

/// What the log must hold: acknowledged batches in offset order.
struct Model {
    batches: Vec<(i64, i64, Bytes)>,
    log_start_offset: i64,
    log_end_offset: i64,
    /// Offsets below this were made durable and must survive a crash.
    durable_end_offset: i64,
}

impl Model {
    fn truncate(&mut self, end: i64) {
        self.batches.retain(|(_, last, _)| *last < end);
        self.log_end_offset = end;
        self.durable_end_offset = self.durable_end_offset.min(end);
        self.log_start_offset = self.log_start_offset.min(end);
    }
    fn expected_from(&self, offset: i64) -> Vec<&(i64, i64, Bytes)> {
        self.batches.iter().filter(|(_, last, _)| *last >= offset).collect()
    }
}

fn dir() -> PathBuf {
    PathBuf::from("/data/events-3")
}

async fn open_retrying(storage: &SimStorage, config: &LogConfig) -> PartitionLog<SimStorage> {
    // An open reads many files, so with read errors on it may fail several times in a row; each
    // failure must be a clean I/O error that leaves the disk reusable. After a few, faults are
    // paused for one attempt so the run goes on.
    for attempt in 0..10 {
        if attempt == 9 {
            storage.set_faults(FaultConfig::NONE);
        }
        match PartitionLog::open(storage.clone(), &dir(), options(config.clone(), 16 << 10)).await {
            Ok(log) => {
                storage.set_faults(FaultConfig::reads(READ_ERROR_PROBABILITY));
                return log;
            }
            Err(StorageError::Io(_)) if attempt < 9 => continue,
            Err(error) => panic!("open failed: {error}"),
        }
    }
    unreachable!("the last attempt runs without faults");
}

/// Reads the whole log with faults off, for checking.
async fn contents(log: &PartitionLog<SimStorage>, storage: &SimStorage) -> Vec<Bytes> {
    storage.set_faults(FaultConfig::NONE);
    let out = common::read_all(log).await;
    storage.set_faults(FaultConfig::reads(READ_ERROR_PROBABILITY));
    out
}

async fn check_matches_model(
    log: &PartitionLog<SimStorage>,
    storage: &SimStorage,
    model: &Model,
    step: usize,
) {
    assert_eq!(log.log_end_offset(), model.log_end_offset, "step {step}: log end offset");
    assert_eq!(log.log_start_offset(), model.log_start_offset, "step {step}: log start offset");
    let actual = contents(log, storage).await;
    let expected: Vec<Bytes> = model
        .expected_from(model.log_start_offset)
        .into_iter()
        .map(|(_, _, b)| b.clone())
        .collect();
    assert_eq!(actual, expected, "step {step}: log contents differ from the model");
}

async fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let storage = SimStorage::new(seed ^ 0x5eed, FaultConfig::reads(READ_ERROR_PROBABILITY));
    let flush = if rng.gen_bool(0.5) { FlushPolicy::Always } else { FlushPolicy::Never };
    let mut config = LogConfig {
        segment_bytes: rng.gen_range(2_000..20_000),
        index_interval_bytes: rng.gen_range(100..3000),
        retention_ms: None,
        flush,
        write_chunk_bytes: 4096 * rng.gen_range(1..5),
        ..LogConfig::default()
    };
    let mut log = open_retrying(&storage, &config).await;
    let mut model = Model {
        batches: Vec::new(),
        log_start_offset: 0,
        log_end_offset: 0,
        durable_end_offset: 0,
    };
    let mut tag = 0u64;
    let mut now = 1_000_000i64;
    for step in 0..OPERATIONS_PER_SEED {
        now += rng.gen_range(0..50);
        match rng.gen_range(0..100) {
            0..=49 => {
                tag += 1;
                let records = rng.gen_range(1..6);
                let value_bytes = rng.gen_range(0..1500);
                let info = log
                    .append(batch(tag, records, value_bytes, now), 0, now)
                    .await
                    .expect("append");
                assert_eq!(
                    info.base_offset, model.log_end_offset,
                    "step {step}: offsets are contiguous"
                );
                let mut expected = batch(tag, records, value_bytes, now);
                expected[0..8].copy_from_slice(&info.base_offset.to_be_bytes());
                expected[12..16].copy_from_slice(&0i32.to_be_bytes());
                model.batches.push((
                    info.base_offset,
                    info.last_offset,
                    Bytes::from(expected.to_vec()),
                ));
                model.log_end_offset = info.last_offset + 1;
                if flush == FlushPolicy::Always {
                    model.durable_end_offset = model.log_end_offset;
                }
            }
            50..=64 => {
                let offset = rng.gen_range(model.log_start_offset..=model.log_end_offset);
                let max_bytes = rng.gen_range(1..20_000);
                match log.read(offset, max_bytes).await {
                    Ok(read) => {
                        let expected = model.expected_from(offset);
                        if offset == model.log_end_offset {
                            assert!(read.batches.is_empty(), "step {step}: read at the end");
                        } else {
                            assert!(
                                !read.batches.is_empty(),
                                "step {step}: read at {offset} empty"
                            );
                            for (got, want) in read.batches.iter().zip(expected.iter()) {
                                assert_eq!(got, &want.2, "step {step}: read at {offset} differs");
                            }
                            assert!(read.batches.len() <= expected.len());
                            assert!(read.batches.len() == 1 || read.size_bytes() <= max_bytes);
                        }
                    }
                    Err(StorageError::Io(_)) => {} // an injected read error, reported as such
                    Err(error) => panic!("step {step}: read at {offset} failed: {error}"),
                }
            }
            65..=69 => {
                log.roll(now).await.expect("roll");
                model.durable_end_offset = model.log_end_offset;
            }
            70..=73 => {
                let offset = rng.gen_range(model.log_start_offset..=model.log_end_offset);
                let first_base = log.segment_base_offsets()[0];
                let target_end = if offset <= first_base {
                    offset.min(model.log_end_offset)
                } else {
                    model
                        .batches
                        .iter()
                        .find(|(_, last, _)| *last >= offset)
                        .map_or(model.log_end_offset, |b| b.0)
                };
                match log.truncate_to(offset).await {
                    Ok(()) => {
                        if offset <= first_base {
                            model.batches.clear();
                            model.log_end_offset = target_end;
                            model.log_start_offset = target_end;
                            model.durable_end_offset = model.durable_end_offset.min(target_end);
                        } else {
                            model.truncate(target_end);
                        }
                    }
                    Err(StorageError::Io(_)) => {
                        // An injected read error: the log went offline part-way. A restart (no
                        // power loss) must find a prefix of the old log no shorter than the target.
                        assert!(matches!(
                            log.append(batch(0, 1, 1, now), 0, now).await,
                            Err(StorageError::Offline(_))
                        ));
                        drop(log);
                        log = open_retrying(&storage, &config).await;
                        let end = log.log_end_offset();
                        assert!(
                            end >= target_end && end <= model.log_end_offset,
                            "step {step}: restart after a failed truncate: end {end}, target {target_end}, model end {}", model.log_end_offset
                        );
                        model.truncate(end);
                        model.log_start_offset = log.log_start_offset();
                        model.batches.retain(|(_, last, _)| *last >= model.log_start_offset);
                        if model.batches.is_empty() {
                            model.log_start_offset = log.log_start_offset();
                        }
                    }
                    Err(error) => panic!("step {step}: truncate failed: {error}"),
                }
                check_matches_model(&log, &storage, &model, step).await;
            }
            74..=77 => {
                let before = log.segment_base_offsets();
                let retention_bytes = rng.gen_range(0..30_000);
                config.retention_bytes = Some(retention_bytes);
                log.set_config(config.clone()).expect("config");
                let deleted = log.apply_retention(now).await.expect("retention");
                config.retention_bytes = None;
                log.set_config(config.clone()).expect("config");
                let after = log.segment_base_offsets();
                assert_eq!(
                    after[..],
                    before[deleted..],
                    "step {step}: oldest segments deleted first"
                );
                if deleted > 0 {
                    model.log_start_offset = model.log_start_offset.max(after[0]);
                }
                model.batches.retain(|(_, last, _)| *last >= model.log_start_offset);
                check_matches_model(&log, &storage, &model, step).await;
            }
            78..=80 => {
                let offset = rng.gen_range(model.log_start_offset..=model.log_end_offset);
                let start = log.delete_records_before(offset).await.expect("delete records");
                assert_eq!(start, offset.max(model.log_start_offset));
                model.log_start_offset = start;
                model.batches.retain(|(_, last, _)| *last >= start);
            }
            81..=85 => {
                log.sync().await.expect("sync");
                model.durable_end_offset = model.log_end_offset;
            }
            86..=89 => {
                log.close().await.expect("close");
                log = open_retrying(&storage, &config).await;
                assert!(log.opened_clean, "step {step}: clean close is noticed");
                check_matches_model(&log, &storage, &model, step).await;
            }
            _ => {
                drop(log);
                storage.crash();
                log = open_retrying(&storage, &config).await;
                assert!(!log.opened_clean);
                let recovered = contents(&log, &storage).await;
                let expected = model.expected_from(log.log_start_offset());
                assert!(
                    recovered.len() <= expected.len(),
                    "step {step}: recovery invented batches"
                );
                for (got, want) in recovered.iter().zip(expected.iter()) {
                    assert_eq!(
                        got, &want.2,
                        "step {step}: a recovered batch differs from what was appended"
                    );
                }
                assert!(
                    log.log_end_offset() >= model.durable_end_offset,
                    "step {step}: lost durable data: end {} < durable {}",
                    log.log_end_offset(),
                    model.durable_end_offset
                );
                assert!(log.log_start_offset() >= model.log_start_offset.min(log.log_end_offset()));
                // Adopt what survived: a prefix of what was appended.
                let end = log.log_end_offset();
                model.truncate(end);
                model.log_start_offset = log.log_start_offset();
                model.batches.retain(|(_, last, _)| *last >= model.log_start_offset);
                model.durable_end_offset = end;
                check_matches_model(&log, &storage, &model, step).await;
            }
        }
    }
    check_matches_model(&log, &storage, &model, OPERATIONS_PER_SEED).await;
    assert!(
        storage.injected_read_errors() > 0 || OPERATIONS_PER_SEED < 100,
        "faults were injected"
    );
}

#[test]
fn randomized_operations_match_the_model_across_crashes() {
    // Fixed seeds 0..SEEDS (40) every run, and one random seed, new each run (printed).
    let seeds: Vec<u64> = match std::env::var("SEED") {
        Ok(seed) => vec![seed.parse().expect("SEED must be an integer")],
        Err(_) => {
            let count: u64 = std::env::var("SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
            let random = count + u64::from(rand::random::<u32>());
            (0..count).chain([random]).collect()
        }
    };
    eprintln!(
        "randomized_model: seeds 0..{} and the random seed {} (replay one: SEED=<seed>)",
        seeds.len() - 1,
        seeds[seeds.len() - 1]
    );
    for seed in seeds {
        let outcome = std::panic::catch_unwind(|| block_on(run_seed(seed)));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("seed {seed} failed: {message}\nreplay with: SEED={seed} cargo test -p shard --test randomized_model");
        }
    }
}
