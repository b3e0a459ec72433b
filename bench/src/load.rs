//! `strata-bench produce|consume|e2e`: Kafka-protocol load against any Kafka-compatible broker.
//!
//! Open loop: with `--rate`, message i of a producer is scheduled at `start + i / rate` and its
//! latency is measured from that scheduled time, so a stalled broker shows up as latency instead
//! of silently lowering the offered load (no coordinated omission). Without `--rate` producers
//! run closed-loop (latency from the moment the batch was built).
//! Tasks run on pinned executors (`--cores`), producers and consumers spread across them.
//! A producer packs its batches into requests as Kafka clients do (the Java client drains every
//! ready batch for a broker into one request): one batch per partition it writes to, or fewer
//! (`--batches-per-request`, `--max-request-bytes`); under `--rate` a request goes as soon as
//! no further message is due.

use crate::args::{LoadArgs, Mode};
use crate::kafka::{self, Connection};
use crate::shared::{histogram, Shared};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn run(mode: Mode, args: LoadArgs) -> Result<(), String> {
    if let Some(ca_file) = &args.tls_ca {
        crate::kafka::use_tls(ca_file)?;
    }
    let acks = checked_acks(&args)?;
    let cores = args.cores.unwrap_or_else(shard::runtime::available_cores);
    let config = shard::runtime::RuntimeConfig {
        cores,
        pin: true,
        ..shard::runtime::RuntimeConfig::all_cores()
    };
    let shared = new_shared(mode, &args);
    let partitions = set_up_topic(&args)?;
    let started = Instant::now();
    let reporter = spawn_reporter(shared.clone(), args.clone(), started);
    let tasks_args = args.clone();
    let run_shared = shared.clone();
    let results = shard::runtime::run_shards(&config, move |context| {
        let (args, shared) = (tasks_args.clone(), run_shared.clone());
        async move {
            shard_tasks(
                mode,
                args,
                acks,
                partitions,
                context.shard_id.0 as usize,
                context.shard_count,
                shared,
            )
            .await
        }
    })
    .map_err(|e| e.to_string())?;
    shared.stop.store(true, Ordering::Relaxed);
    let _ = reporter.join();
    for result in results {
        result?;
    }
    let seconds = (started.elapsed().as_secs_f64() - args.warmup).max(1e-9);
    summarize(mode, &args, &shared, seconds)
}

/// Checks the options against each other and returns `--acks` as Kafka's number.
fn checked_acks(args: &LoadArgs) -> Result<i16, String> {
    let acks: i16 = match args.acks.as_str() {
        "all" | "-1" => -1,
        "1" => 1,
        "0" => 0,
        other => return Err(format!("--acks {other:?}: use 0, 1 or all")),
    };
    if args.transactional == Some(0) {
        return Err("--transactional takes the batches per transaction (at least 1)".into());
    }
    if (args.idempotent || args.transactional.is_some()) && acks != -1 {
        return Err("--idempotent needs --acks all (as Kafka producers require)".into());
    }
    if args.idempotent && args.in_flight > 5 {
        return Err("--idempotent allows at most 5 requests in flight (--in-flight)".into());
    };
    if args.message_size < 8 || args.batch_bytes < args.message_size {
        return Err("--message-size must be >= 8 and <= --batch-bytes".into());
    }
    Ok(acks)
}

/// The counters and histograms the run's tasks and its reporter share, all at zero.
fn new_shared(mode: Mode, args: &LoadArgs) -> Arc<Shared> {
    Arc::new(Shared {
        produced: AtomicU64::new(0),
        produced_bytes: AtomicU64::new(0),
        consumed: AtomicU64::new(0),
        consumed_bytes: AtomicU64::new(0),
        consumed_all: AtomicU64::new(0),
        produced_all: AtomicU64::new(0),
        consumers_ready: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        total: Mutex::new(histogram()),
        interval: Mutex::new(histogram()),
        recording: AtomicBool::new(args.warmup <= 0.0),
        stop: AtomicBool::new(false),
        producers_done: AtomicU64::new(0),
        transactions: AtomicU64::new(0),
        first_error: Mutex::new(None),
        e2e: mode == Mode::E2e,
        message_size: args.message_size,
        retriable: Mutex::new(BTreeMap::new()),
        stalls_ms: Mutex::new(BTreeMap::new()),
    })
}

/// Creates the topic unless it exists and waits until every partition is led; its partitions.
fn set_up_topic(args: &LoadArgs) -> Result<i32, String> {
    // Set up the topic once, from a throwaway executor: created unless it exists, and every
    // partition led.
    let (bootstrap, topic, wanted) = (args.bootstrap.clone(), args.topic.clone(), args.partitions);
    let replication_factor = args.replication_factor;
    shard::runtime::run_local(1 << 20, async move {
        let mut connection = Connection::connect(&bootstrap).await?;
        kafka::ensure_topic(&mut connection, &topic, wanted, replication_factor).await?;
        let leaders = crate::routing::Leaders::discover(&bootstrap, &topic).await?;
        Ok::<i32, String>(leaders.partition_count())
    })
    .map_err(|e| e.to_string())?
}

#[allow(clippy::too_many_arguments)]
async fn shard_tasks(
    mode: Mode,
    args: LoadArgs,
    acks: i16,
    partitions: i32,
    shard: usize,
    shards: usize,
    shared: Arc<Shared>,
) -> Result<(), String> {
    let mut tasks = Vec::new();
    let producers = if mode == Mode::Consume { 0 } else { args.producers };
    let consumers = if mode == Mode::Produce { 0 } else { args.consumers };
    for producer in (0..producers).filter(|p| p % shards == shard) {
        let (args, shared) = (args.clone(), shared.clone());
        tasks.push(shard::runtime::spawn(async move {
            let result =
                crate::producer::produce(mode, &args, acks, partitions, producer, &shared).await;
            if let Err(error) = &result {
                shared.fail(error.clone());
            }
            result
        }));
    }
    for consumer in (0..consumers).filter(|c| (c + producers) % shards == shard) {
        let (args, shared) = (args.clone(), shared.clone());
        tasks.push(shard::runtime::spawn(async move {
            let result = crate::consumer::consume(mode, &args, partitions, consumer, &shared).await;
            if let Err(error) = &result {
                shared.fail(error.clone());
            }
            result
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}

fn spawn_reporter(
    shared: Arc<Shared>,
    args: LoadArgs,
    started: Instant,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut log = args.hdr_log.as_ref().and_then(|path| std::fs::File::create(path).ok());
        use hdrhistogram::serialization::Serializer;
        let mut serializer = hdrhistogram::serialization::V2DeflateSerializer::new();
        if let Some(file) = log.as_mut() {
            use std::io::Write;
            let start = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or_default();
            let _ = writeln!(file, "#[StartTime: {start:.3} (seconds since epoch)]");
            let _ = writeln!(file, "#[Latency unit: microseconds]");
            let _ = writeln!(file, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"");
        }
        let mut last = (0u64, 0u64, 0u64, 0u64);
        let mut second = 0u64;
        while !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            let elapsed = started.elapsed().as_secs_f64();
            if !shared.recording.load(Ordering::Relaxed) && elapsed >= args.warmup {
                shared.recording.store(true, Ordering::Relaxed);
            }
            if elapsed < (second + 1) as f64 {
                continue;
            }
            second += 1;
            let now = (
                shared.produced.load(Ordering::Relaxed),
                shared.produced_bytes.load(Ordering::Relaxed),
                shared.consumed.load(Ordering::Relaxed),
                shared.consumed_bytes.load(Ordering::Relaxed),
            );
            let interval = shared.interval.lock().map(|mut h| {
                let copy = h.clone();
                h.reset();
                copy
            });
            let Ok(interval) = interval else { continue };
            if let Some(file) = log.as_mut() {
                use std::io::Write;
                let mut encoded = Vec::new();
                if serializer.serialize(&interval, &mut encoded).is_ok() {
                    let _ = writeln!(
                        file,
                        "{:.3},1.000,{:.3},{}",
                        (second - 1) as f64,
                        interval.max() as f64 / 1000.0,
                        base64_encode(&encoded)
                    );
                }
            }
            if !args.quiet {
                eprintln!(
                    "{second:>4}s produced {:>9} msg/s {:>8.1} MB/s  consumed {:>9} msg/s {:>8.1} MB/s  latency p50 {:.2} ms p99 {:.2} ms p99.9 {:.2} ms",
                    now.0 - last.0,
                    (now.1 - last.1) as f64 / 1e6,
                    now.2 - last.2,
                    (now.3 - last.3) as f64 / 1e6,
                    interval.value_at_quantile(0.5) as f64 / 1000.0,
                    interval.value_at_quantile(0.99) as f64 / 1000.0,
                    interval.value_at_quantile(0.999) as f64 / 1000.0,
                );
            }
            last = now;
        }
    })
}

fn base64_encode(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(TABLE[(n >> 18) as usize & 63] as char);
        out.push(TABLE[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { TABLE[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { TABLE[n as usize & 63] as char } else { '=' });
    }
    out
}

/// The quantiles `--json` reports as `percentiles` ([quantile, microseconds] pairs): two per
/// halving of the tail from p50 to p99.99, the layout of an HDR percentile plot, so runs can
/// be drawn and combined quantile by quantile.
pub const PERCENTILE_LADDER: [f64; 12] =
    [0.5, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9975, 0.999, 0.9995, 0.99975, 0.9999];

fn summarize(mode: Mode, args: &LoadArgs, shared: &Shared, seconds: f64) -> Result<(), String> {
    let produced = shared.produced.load(Ordering::Relaxed);
    let produced_bytes = shared.produced_bytes.load(Ordering::Relaxed);
    let consumed = shared.consumed.load(Ordering::Relaxed);
    let consumed_bytes = shared.consumed_bytes.load(Ordering::Relaxed);
    let errors = shared.errors.load(Ordering::Relaxed);
    let total = shared.total.lock().map(|h| h.clone()).map_err(|_| "histogram lock poisoned")?;
    let latency = |q: f64| total.value_at_quantile(q);
    let (messages, bytes) =
        if mode == Mode::Consume { (consumed, consumed_bytes) } else { (produced, produced_bytes) };
    let first_error = shared.first_error.lock().ok().and_then(|e| e.clone());
    let retriable = shared.retriable.lock().map(|r| r.clone()).unwrap_or_default();
    let stalls_ms = shared.stalls_ms.lock().map(|s| s.clone()).unwrap_or_default();
    if args.json {
        let json = serde_json::json!({
            "mode": format!("{mode:?}").to_lowercase(),
            "topic": args.topic,
            "acks": args.acks,
            "idempotent": args.idempotent,
            "transactional": args.transactional,
            "transactions": shared.transactions.load(Ordering::Relaxed),
            "compression": format!("{:?}", args.compression).to_lowercase(),
            "message_size": args.message_size,
            "seconds": seconds,
            "produced_messages": produced,
            "produced_bytes": produced_bytes,
            "consumed_messages": consumed,
            "consumed_bytes": consumed_bytes,
            "messages_per_second": messages as f64 / seconds,
            "megabytes_per_second": bytes as f64 / 1e6 / seconds,
            "errors": errors,
            "first_error": first_error,
            "retriable_errors": retriable,
            "retriable_errors_total": retriable.values().sum::<u64>(),
            "partition_stalls_ms": stalls_ms,
            "longest_stall_ms": stalls_ms.values().copied().max().unwrap_or(0),
            "latency_us": {
                "count": total.len(),
                "mean": total.mean(),
                "p50": latency(0.5),
                "p95": latency(0.95),
                "p99": latency(0.99),
                "p999": latency(0.999),
                "max": total.max(),
            },
            "percentiles": PERCENTILE_LADDER
                .iter()
                .map(|&q| serde_json::json!([q, latency(q)]))
                .collect::<Vec<_>>(),
        });
        println!("{json}");
    } else {
        println!(
            "{messages} records {}, {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {:.2} ms 50th, {:.2} ms 95th, {:.2} ms 99th, {:.2} ms 99.9th; {errors} errors",
            if mode == Mode::Consume { "consumed" } else { "sent" },
            messages as f64 / seconds,
            bytes as f64 / 1e6 / seconds,
            total.mean() / 1000.0,
            total.max() as f64 / 1000.0,
            latency(0.5) as f64 / 1000.0,
            latency(0.95) as f64 / 1000.0,
            latency(0.99) as f64 / 1000.0,
            latency(0.999) as f64 / 1000.0,
        );
        if !retriable.is_empty() {
            let listed: Vec<String> = retriable.iter().map(|(n, c)| format!("{n} x{c}")).collect();
            println!("retried: {}", listed.join(", "));
        }
        if !stalls_ms.is_empty() {
            let listed: Vec<String> =
                stalls_ms.iter().map(|(p, ms)| format!("{p}: {ms} ms")).collect();
            println!("failover stalls by partition: {}", listed.join(", "));
        }
    }
    if let Some(error) = first_error {
        return Err(format!("{errors} errors; first: {error}"));
    }
    Ok(())
}
