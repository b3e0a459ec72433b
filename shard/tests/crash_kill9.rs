//! Crash test with a real process: a child process appends with flush policy `always` to six
//! logs at once (four concurrent writers on the first, so its appends share fdatasyncs; one on
//! each of the others, so several logs sync together and share syncfs calls, `shared_sync`)
//! and prints every acknowledged offset; the parent kills it with SIGKILL at random moments
//! (25 rounds, seeded) and after each kill reopens every log and checks that every
//! acknowledged batch is present byte for byte and that each log is one contiguous run of
//! valid batches (nothing after a gap). Replay a run with `CRASH_SEED=<n>`.
//!
//! The child is this same test binary running the ignored test `crash_child_appender`.

mod common;

use bytes::BytesMut;
use rand::{Rng, SeedableRng};
use shard::{FlushPolicy, LogConfig, PartitionLog};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_DIR_ENV: &str = "STRATA_CRASH_CHILD_DIR";
const ROUNDS: usize = 25;
const LOGS: usize = 6;
/// Writers of the first log; every other log has one.
const FIRST_LOG_WRITERS: usize = 4;
const WRITERS: u64 = (FIRST_LOG_WRITERS + LOGS - 1) as u64;

fn log_path(root: &Path, log: usize) -> PathBuf {
    root.join(format!("ledger-{log}"))
}

fn log_of_writer(writer: u64) -> usize {
    (writer as usize).saturating_sub(FIRST_LOG_WRITERS - 1)
}

fn config() -> LogConfig {
    LogConfig { flush: FlushPolicy::Always, segment_bytes: 256 << 10, ..LogConfig::default() }
}

/// The batch a writer appends for `tag`; its key is the tag, so any batch read back can be
/// checked against the bytes it must hold.
fn batch_for(tag: u64) -> BytesMut {
    common::batch(tag, 1 + (tag % 4) as usize, ((tag * 7919) % 6000) as usize, tag as i64)
}

fn tag_of(batch: &[u8]) -> u64 {
    let header = wire::RecordBatchHeader::parse(batch, 1 << 26).expect("batch");
    let record = header.records().next().expect("a record").expect("decodable");
    u64::from_be_bytes(record.key.expect("key").try_into().expect("8-byte key"))
}

async fn open(path: &Path) -> PartitionLog<shard::io::dma::DmaStorage> {
    let storage =
        shard::runtime::open_storage(path.parent().expect("parent")).await.expect("storage");
    PartitionLog::open(storage, path, common::options(config(), 0)).await.expect("open")
}

#[test]
#[ignore = "child process of sigkill_at_random_moments_never_loses_an_acknowledged_batch"]
fn crash_child_appender() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else { return };
    let path = PathBuf::from(dir);
    let first_tag: u64 =
        std::env::var("STRATA_CRASH_FIRST_TAG").expect("tag").parse().expect("number");
    shard::runtime::run_local(1 << 20, async move {
        let mut logs = Vec::new();
        for log in 0..LOGS {
            logs.push(std::rc::Rc::new(open(&log_path(&path, log)).await));
        }
        println!("READY");
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let index = log_of_writer(writer);
            let log = logs[index].clone();
            tasks.push(shard::runtime::spawn(async move {
                for sequence in 0.. {
                    let tag = first_tag + sequence * WRITERS + writer;
                    let info = log.append(batch_for(tag), 0, tag as i64).await.expect("append");
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {index} {} {tag}", info.base_offset).expect("stdout");
                    if sequence % 20 == 0 {
                        writeln!(out, "SHARED {}", shard::shared_sync::snapshot().syncs)
                            .expect("stdout");
                    }
                    out.flush().expect("flush");
                }
            }));
        }
        for task in tasks {
            task.await;
        }
    })
    .expect("executor");
}

#[test]
fn sigkill_at_random_moments_never_loses_an_acknowledged_batch() {
    let seed: u64 =
        std::env::var("CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("crash test seed {seed} (replay with CRASH_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let root = common::scratch_dir("crash-kill9");
    let path = root.clone();
    let mut acknowledged: Vec<BTreeMap<i64, u64>> = vec![BTreeMap::new(); LOGS];
    let mut shared_syncs = 0u64;
    let mut next_tag = 0u64;
    let mut total_kills = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--ignored",
                "--exact",
                "crash_child_appender",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, &path)
            .env("STRATA_CRASH_FIRST_TAG", next_tag.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, receiver) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        // The test harness prints its own lines first; wait for the child's READY.
        loop {
            let line = receiver.recv_timeout(Duration::from_secs(30)).expect("child started");
            if line.contains("READY") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..400)));
        child.kill().expect("SIGKILL"); // std's kill sends SIGKILL on Unix
        let status = child.wait().expect("wait");
        assert!(!status.success(), "round {round}: the child must die by the signal");
        total_kills += 1;
        reader.join().expect("reader thread");
        let mut acked_this_round = 0;
        for line in receiver.try_iter() {
            let mut fields = line.split(' ');
            if line.starts_with("SHARED ") && fields.next() == Some("SHARED") {
                let count: u64 = fields.next().expect("count").parse().expect("count");
                shared_syncs = shared_syncs.max(count);
            }
            let mut fields = line.split(' ');
            if line.starts_with("ACK ") && fields.next() == Some("ACK") {
                let log: usize = fields.next().expect("log").parse().expect("log");
                let base: i64 = fields.next().expect("offset").parse().expect("offset");
                let tag: u64 = fields.next().expect("tag").parse().expect("tag");
                acknowledged[log].insert(base, tag);
                next_tag = next_tag.max(tag + 1);
                acked_this_round += 1;
            }
        }
        next_tag += WRITERS * 1000; // tags are never reused across rounds
        let checked = shard::runtime::run_local(1 << 20, {
            let path = path.clone();
            let acknowledged = acknowledged.clone();
            async move {
                let mut held = (0, 0);
                for (index, acknowledged) in acknowledged.iter().enumerate() {
                    let log = open(&log_path(&path, index)).await;
                    let batches = common::read_all(&log).await; // asserts contiguous offsets
                    let mut by_base = BTreeMap::new();
                    for batch in &batches {
                        let header = wire::RecordBatchHeader::parse(batch, 1 << 26).expect("batch");
                        header.verify_crc().expect("valid CRC");
                        let tag = tag_of(batch);
                        let mut expected = batch_for(tag);
                        expected[0..8].copy_from_slice(&header.base_offset().to_be_bytes());
                        expected[12..16].copy_from_slice(&0i32.to_be_bytes());
                        assert_eq!(
                            &batch[..],
                            &expected[..],
                            "log {index}: batch at {} is not what was appended",
                            header.base_offset()
                        );
                        by_base.insert(header.base_offset(), tag);
                    }
                    for (base, tag) in acknowledged {
                        assert_eq!(
                            by_base.get(base),
                            Some(tag),
                            "log {index}: acknowledged batch at offset {base} (tag {tag}) lost"
                        );
                    }
                    held.0 += batches.len();
                    held.1 += log.log_end_offset();
                }
                held
            }
        })
        .expect("executor");
        eprintln!(
            "round {round}: {acked_this_round} acks, the logs hold {} batches, ends sum to {}",
            checked.0, checked.1
        );
    }
    assert_eq!(total_kills, ROUNDS);
    let acked: usize = acknowledged.iter().map(BTreeMap::len).sum();
    assert!(acked > ROUNDS, "the child acknowledged appends before being killed");
    assert!(shared_syncs > 0, "the logs never shared a sync: the test did not cover it");
    let _ = std::fs::remove_dir_all(&root);
}
