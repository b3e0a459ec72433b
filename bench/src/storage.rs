//! `strata-bench storage`: append throughput and latency of one partition log on real files.

use bytes::BytesMut;
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use shard::io::dma::DmaStorage;
use shard::runtime::{self, RuntimeConfig};
use shard::{BatchCache, FlushPolicy, LogConfig, OpenOptions, PartitionLog};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;
use wire::{BatchRecord, RecordBatchBuilder};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Flush {
    Never,
    Always,
}

#[derive(Args, Debug)]
pub struct StorageArgs {
    /// Data directory (must be on the device under test; it is wiped first).
    #[arg(long)]
    dir: PathBuf,
    /// Size of each appended batch in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    batch_bytes: usize,
    /// Bytes to append in total.
    #[arg(long, default_value_t = 2 << 30)]
    total_bytes: u64,
    /// Concurrent writers appending to the one log.
    #[arg(long, default_value_t = 1)]
    writers: usize,
    /// Appends each writer keeps outstanding (like a Kafka producer's
    /// max.in.flight.requests.per.connection); writers x in-flight appends run concurrently.
    #[arg(long, default_value_t = 1)]
    in_flight: usize,
    #[arg(long, value_enum, default_value_t = Flush::Never)]
    flush: Flush,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Record value size used to fill batches.
const RECORD_VALUE_BYTES: usize = 1000;

fn template_batch(batch_bytes: usize) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(runtime::now_ms());
    let value = vec![b'x'; RECORD_VALUE_BYTES];
    let mut records = 0;
    while builder.size_bytes() + RECORD_VALUE_BYTES + 16 <= batch_bytes || records == 0 {
        builder.push(BatchRecord { key: None, value: Some(&value), timestamp_delta: 0 });
        records += 1;
    }
    builder.build()
}

pub fn run(args: StorageArgs) -> Result<(), String> {
    if args.writers == 0 || args.in_flight == 0 || args.batch_bytes < 128 {
        return Err("--writers and --in-flight must be >= 1 and --batch-bytes >= 128".into());
    }
    let _ = std::fs::remove_dir_all(&args.dir);
    std::fs::create_dir_all(&args.dir).map_err(|e| format!("{}: {e}", args.dir.display()))?;
    let preflight =
        runtime::preflight(1, runtime::IO_MEMORY_BYTES_DEFAULT).map_err(|e| e.to_string())?;
    for warning in &preflight.warnings {
        eprintln!("warning: {warning}");
    }
    let config = RuntimeConfig { cores: 1, ..RuntimeConfig::all_cores() };
    let dir = args.dir.clone();
    let batch = template_batch(args.batch_bytes);
    let batch_len = batch.len();
    let batches_total = (args.total_bytes / batch_len as u64).max(args.writers as u64);
    let writers = args.writers * args.in_flight;
    let flush = args.flush;
    let results = runtime::run_shards(&config, move |_| {
        let dir = dir.clone();
        let batch = batch.clone();
        async move { drive(dir, batch, batches_total, writers, flush).await }
    })
    .map_err(|e| e.to_string())?;
    let report = results.into_iter().next().ok_or("no result")??;
    let megabytes_per_second = report.bytes as f64 / (1 << 20) as f64 / report.seconds;
    if args.json {
        let json = serde_json::json!({
            "mode": "storage",
            "flush": format!("{:?}", args.flush).to_lowercase(),
            "batch_bytes": batch_len,
            "writers": args.writers,
            "in_flight": args.in_flight,
            "batches": report.batches,
            "bytes": report.bytes,
            "seconds": report.seconds,
            "mib_per_second": megabytes_per_second,
            "append_latency_us": {
                "p50": report.latency.value_at_quantile(0.5),
                "p99": report.latency.value_at_quantile(0.99),
                "p999": report.latency.value_at_quantile(0.999),
                "max": report.latency.max(),
            },
            "fdatasyncs": report.syncs,
        });
        println!("{json}");
    } else {
        println!(
            "storage flush={:?} batch={}B writers={}x{}: {} batches, {:.1} MiB in {:.2} s = {:.1} MiB/s; \
             append latency p50 {} us, p99 {} us, p99.9 {} us, max {} us; {} fdatasyncs",
            args.flush,
            batch_len,
            args.writers,
            args.in_flight,
            report.batches,
            report.bytes as f64 / (1 << 20) as f64,
            report.seconds,
            megabytes_per_second,
            report.latency.value_at_quantile(0.5),
            report.latency.value_at_quantile(0.99),
            report.latency.value_at_quantile(0.999),
            report.latency.max(),
            report.syncs
        );
    }
    let _ = std::fs::remove_dir_all(&args.dir);
    Ok(())
}

struct Report {
    batches: u64,
    bytes: u64,
    seconds: f64,
    latency: Histogram<u64>,
    syncs: u64,
}

async fn drive(
    dir: PathBuf,
    batch: Vec<u8>,
    batches_total: u64,
    writers: usize,
    flush: Flush,
) -> Result<Report, String> {
    let storage = DmaStorage::new(&dir).await.map_err(|e| e.to_string())?;
    let config = LogConfig {
        flush: match flush {
            Flush::Never => FlushPolicy::Never,
            Flush::Always => FlushPolicy::Always,
        },
        max_message_bytes: batch.len().max(shard::config::MAX_MESSAGE_BYTES_DEFAULT),
        retention_ms: None,
        ..LogConfig::default()
    };
    let cache = Rc::new(RefCell::new(BatchCache::new(shard::cache::BATCH_CACHE_BYTES_DEFAULT)));
    let options = OpenOptions {
        config,
        cache,
        now_ms: runtime::now_ms(),
        sync_latency_us: Rc::new(RefCell::new(shard::partition_log::latency_histogram())),
    };
    let log = Rc::new(
        PartitionLog::open(storage, &dir.join("bench-0"), options)
            .await
            .map_err(|e| e.to_string())?,
    );
    let latency = Rc::new(RefCell::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?,
    ));
    let remaining = Rc::new(std::cell::Cell::new(batches_total));
    let batch = Rc::new(batch);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let (log, latency, remaining, batch) =
            (log.clone(), latency.clone(), remaining.clone(), batch.clone());
        tasks.push(shard::runtime::spawn(async move {
            while remaining.get() > 0 {
                remaining.set(remaining.get() - 1);
                let copy = BytesMut::from(&batch[..]);
                let begin = Instant::now();
                log.append(copy, 0, runtime::now_ms()).await.map_err(|e| e.to_string())?;
                let micros = begin.elapsed().as_micros().max(1) as u64;
                latency.borrow_mut().saturating_record(micros);
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await?;
    }
    // The run ends when everything is on disk, whatever the flush policy.
    log.sync().await.map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    let syncs = log.syncs_completed();
    log.close().await.map_err(|e| e.to_string())?;
    let latency = latency.borrow().clone();
    Ok(Report {
        batches: batches_total,
        bytes: batches_total * batch.len() as u64,
        seconds,
        latency,
        syncs,
    })
}
