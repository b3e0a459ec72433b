//! One consumer of `strata-bench consume|e2e`: its partitions fetched from their leaders, one
//! fetching task per leader broker (so a quiet broker's long poll never delays another's
//! records). A partition answered with a retriable error, or on a lost connection, goes back
//! to the consumer, which finds its leader again (Metadata at most every 100 ms) and hands it
//! to that broker's fetcher, at the position it had reached.
//! Runs on: one of the load generator's executors.

use crate::args::{LoadArgs, Mode};
use crate::kafka::{self, Connection};
use crate::routing::{self, Leaders};
use crate::shared::{now_nanos, Shared};
use kafka_protocol::messages::*;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::Compression;

/// What a consumer and its fetchers share (one executor).
#[derive(Default)]
struct Progress {
    /// Partition -> next offset to read.
    positions: RefCell<BTreeMap<i32, i64>>,
    /// Partitions whose leader must be found again.
    orphans: RefCell<Vec<i32>>,
    /// A non-retriable error: the consumer stops with it.
    fatal: RefCell<Option<String>>,
    stop: Cell<bool>,
}

/// One broker's fetching task and the partitions it fetches.
struct Fetcher {
    assigned: Rc<RefCell<Vec<i32>>>,
    alive: Rc<Cell<bool>>,
    _task: shard::runtime::Task<()>,
}

pub async fn consume(
    mode: Mode,
    args: &LoadArgs,
    partitions: i32,
    consumer: usize,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let mine: Vec<i32> =
        (0..partitions).filter(|p| *p as usize % args.consumers == consumer).collect();
    if mine.is_empty() {
        shared.consumers_ready.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    let mut leaders = Leaders::discover(&args.bootstrap, &args.topic).await?;
    let bounds = routing::offsets(&leaders, &args.topic).await?;
    let from_end = mode == Mode::E2e || args.from == "end";
    let progress = Rc::new(Progress::default());
    for partition in &mine {
        let (start, end) = bounds.get(*partition as usize).copied().unwrap_or_default();
        progress.positions.borrow_mut().insert(*partition, if from_end { end } else { start });
    }
    *progress.orphans.borrow_mut() = mine;
    shared.consumers_ready.fetch_add(1, Ordering::Relaxed);
    let mut fetchers: BTreeMap<i32, Fetcher> = BTreeMap::new();
    let started = Instant::now();
    // Consume mode stops when all consumers together have read --messages.
    let limit = if mode == Mode::Consume { args.messages } else { None };
    loop {
        if let Some(error) = progress.fatal.borrow().clone() {
            progress.stop.set(true);
            return Err(error);
        }
        let over = started.elapsed().as_secs_f64() >= args.duration + args.warmup;
        let done = shared.stop.load(Ordering::Relaxed)
            || limit.is_some_and(|limit| shared.consumed_all.load(Ordering::Relaxed) >= limit)
            || (over
                && (mode != Mode::E2e
                    || (shared.producers_done.load(Ordering::Relaxed) >= args.producers as u64
                        && shared.consumed_all.load(Ordering::Relaxed)
                            >= shared.produced_all.load(Ordering::Relaxed))
                    || started.elapsed().as_secs_f64() > args.duration + args.warmup + 5.0));
        if done {
            progress.stop.set(true);
            return Ok(());
        }
        fetchers.retain(|_, fetcher| fetcher.alive.get());
        let orphans: Vec<i32> = progress.orphans.borrow_mut().drain(..).collect();
        if !orphans.is_empty() {
            leaders.refresh_if_due().await;
        }
        for partition in orphans {
            let Some((leader, address)) = leaders.leader(partition) else {
                progress.orphans.borrow_mut().push(partition);
                continue;
            };
            let address = address.to_string();
            let fetcher = fetchers
                .entry(leader)
                .or_insert_with(|| spawn_fetcher(address, mode, args, shared, &progress));
            fetcher.assigned.borrow_mut().push(partition);
        }
        shard::runtime::sleep(Duration::from_millis(20)).await;
    }
}

fn spawn_fetcher(
    address: String,
    mode: Mode,
    args: &LoadArgs,
    shared: &Arc<Shared>,
    progress: &Rc<Progress>,
) -> Fetcher {
    let assigned: Rc<RefCell<Vec<i32>>> = Default::default();
    let alive = Rc::new(Cell::new(true));
    let (args, progress) = (args.clone(), progress.clone());
    let (assigned_here, alive_here) = (assigned.clone(), alive.clone());
    let shared = shared.clone();
    let task = shard::runtime::spawn(async move {
        let outcome = fetch_loop(&address, mode, &args, &shared, &progress, &assigned_here).await;
        alive_here.set(false);
        // Whatever it still held is found again by the consumer.
        progress.orphans.borrow_mut().extend(assigned_here.borrow_mut().drain(..));
        if let Err(error) = outcome {
            progress.fatal.borrow_mut().get_or_insert(error);
        }
    });
    Fetcher { assigned, alive, _task: task }
}

/// Fetches the assigned partitions from one broker until the consumer stops, the connection
/// is lost (`Ok`, its partitions orphaned) or a partition fails for good (`Err`).
async fn fetch_loop(
    address: &str,
    mode: Mode,
    args: &LoadArgs,
    shared: &Shared,
    progress: &Progress,
    assigned: &RefCell<Vec<i32>>,
) -> Result<(), String> {
    let Ok(mut connection) = Connection::connect(address).await else {
        shared.retried(None);
        return Ok(());
    };
    while !progress.stop.get() {
        let wanted: Vec<(i32, i64)> = {
            let positions = progress.positions.borrow();
            assigned.borrow().iter().filter_map(|p| positions.get(p).map(|o| (*p, *o))).collect()
        };
        if wanted.is_empty() {
            shard::runtime::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let request = fetch_request(&args.topic, &wanted);
        let response = match connection.call(ApiKey::Fetch, 11, request).await {
            Ok(ResponseKind::Fetch(response)) => response,
            Ok(_) => return Err("unexpected answer to fetch".into()),
            Err(_) => {
                shared.retried(None);
                return Ok(());
            }
        };
        for data in response.responses.into_iter().flat_map(|t| t.partitions) {
            let partition = data.partition_index;
            match data.error_code {
                0 => {}
                code if routing::RETRIABLE.contains(&code) => {
                    shared.retried(Some(code));
                    assigned.borrow_mut().retain(|p| *p != partition);
                    progress.orphans.borrow_mut().push(partition);
                    continue;
                }
                code => {
                    return Err(format!(
                        "fetch from partition {partition}: {}",
                        routing::error_name(code)
                    ))
                }
            }
            let records = data.records.unwrap_or_default();
            let Some(mut position) = progress.positions.borrow().get(&partition).copied() else {
                continue;
            };
            read_records(mode, shared, &records, &mut position)?;
            progress.positions.borrow_mut().insert(partition, position);
        }
    }
    Ok(())
}

fn fetch_request(topic: &str, wanted: &[(i32, i64)]) -> RequestKind {
    let mut entry = fetch_request::FetchTopic::default();
    entry.topic = kafka::topic_name(topic);
    entry.partitions = wanted
        .iter()
        .map(|(partition, offset)| {
            let mut entry = fetch_request::FetchPartition::default();
            entry.partition = *partition;
            entry.fetch_offset = *offset;
            entry.partition_max_bytes = 4 << 20;
            entry
        })
        .collect();
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = 100;
    request.min_bytes = 1;
    request.max_bytes = 16 << 20;
    request.topics = vec![entry];
    RequestKind::Fetch(request)
}

/// Counts (and in e2e mode times) the records of `records` at or after `position`, moving it
/// past them.
fn read_records(
    mode: Mode,
    shared: &Shared,
    records: &[u8],
    position: &mut i64,
) -> Result<(), String> {
    let mut rest = records;
    let now = now_nanos();
    while let Ok(header) = wire::RecordBatchHeader::parse(rest, shard::config::BATCH_BYTES_MAX) {
        rest = &rest[header.size_bytes()..];
        if header.last_offset() < *position {
            continue;
        }
        let count = (header.last_offset() + 1 - (*position).max(header.base_offset())) as u64;
        *position = header.last_offset() + 1;
        shared.consumed_all.fetch_add(count, Ordering::Relaxed);
        if shared.recording.load(Ordering::Relaxed) {
            shared.consumed.fetch_add(count, Ordering::Relaxed);
            shared.consumed_bytes.fetch_add(header.size_bytes() as u64, Ordering::Relaxed);
        }
        if mode != Mode::E2e {
            continue;
        }
        let stamp_of = |value: Option<&[u8]>| {
            value
                .and_then(|v| v.get(..8))
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .unwrap_or(now)
        };
        if header.compression() == Compression::None {
            // Borrowed views: no copy per record on the measuring side.
            for record in header.records() {
                let record = record.map_err(|e| e.to_string())?;
                shared.record(now.saturating_sub(stamp_of(record.value)) / 1000, 1);
            }
        } else {
            let records = wire::compression::records_of(&header).map_err(|e| e.to_string())?;
            for record in records {
                shared.record(now.saturating_sub(stamp_of(record.value.as_deref())) / 1000, 1);
            }
        }
    }
    Ok(())
}
