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

use crate::kafka::{self, Connection};
use bytes::Bytes;
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use kafka_protocol::messages::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wire::{BatchRecord, Compression, RecordBatchBuilder};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Produce,
    Consume,
    E2e,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    pub fn wire(self) -> Compression {
        match self {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

/// What record values hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Payload {
    Repeated,
    Text,
}

#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Connect over TLS (an SSL listener), trusting the CA certificates in this PEM file.
    #[arg(long)]
    pub tls_ca: Option<std::path::PathBuf>,
    #[arg(long, default_value = "strata-bench")]
    pub topic: String,
    /// Partitions to create the topic with (an existing topic keeps its own).
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    #[arg(long, default_value_t = 100)]
    pub message_size: usize,
    /// Records are grouped into batches of up to this many bytes.
    #[arg(long, default_value_t = 16384)]
    pub batch_bytes: usize,
    /// Under --rate: the longest a due message waits for its batch to fill.
    #[arg(long, default_value_t = 0)]
    pub linger_ms: u64,
    /// 0, 1 or all.
    #[arg(long, default_value = "1")]
    pub acks: String,
    #[arg(long, value_enum, default_value_t = Codec::None)]
    pub compression: Codec,
    /// Record values: one repeated byte (compresses ~100x), or varied text (~2-4x, like real
    /// payloads; see `payload::text_value`).
    #[arg(long, value_enum, default_value_t = Payload::Repeated)]
    pub payload: Payload,
    /// Target messages per second across all producers (open loop); 0 = as fast as possible.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Stop after this many messages (produced, or consumed in consume mode).
    #[arg(long)]
    pub messages: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds at the start whose results are not recorded.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Idempotent producers (InitProducerId, producer id + sequence on every batch; needs
    /// --acks all, as Kafka clients require).
    #[arg(long)]
    pub idempotent: bool,
    /// Transactional producers (KIP-98): each commits a transaction every this many batches
    /// (AddPartitionsToTxn for its partitions, the batches, EndTxn). Implies --idempotent.
    #[arg(long)]
    pub transactional: Option<u64>,
    /// Produce requests each producer keeps in flight.
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// Batches (each for a different partition) one produce request carries at most; 0 = one
    /// for each partition the producer writes to, as Kafka clients drain every ready batch for
    /// a broker into one request. Requests stay under `--max-request-bytes`.
    #[arg(long, default_value_t = 0)]
    pub batches_per_request: usize,
    /// A request takes no further batch once it holds this many bytes of records (the Java
    /// client's `max.request.size`).
    #[arg(long, default_value_t = 1 << 20)]
    pub max_request_bytes: usize,
    /// Consume mode: start at the beginning or the end of each partition.
    #[arg(long, default_value = "beginning")]
    pub from: String,
    /// Pinned executors to run producers and consumers on (default: all cores).
    #[arg(long)]
    pub cores: Option<usize>,
    /// Write an HDR histogram interval log (one interval per second) here.
    #[arg(long)]
    pub hdr_log: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// No per-second progress lines.
    #[arg(long)]
    pub quiet: bool,
}

/// What every task reports into (the bench may share across cores; the broker may not).
struct Shared {
    produced: AtomicU64,
    produced_bytes: AtomicU64,
    consumed: AtomicU64,
    consumed_bytes: AtomicU64,
    /// Every record consumed, warmup included (for --messages in consume mode).
    consumed_all: AtomicU64,
    errors: AtomicU64,
    total: Mutex<Histogram<u64>>,
    interval: Mutex<Histogram<u64>>,
    recording: AtomicBool,
    stop: AtomicBool,
    produce_done: AtomicBool,
    /// Transactions committed (transactional producers).
    transactions: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// e2e mode: only consumers record latency.
    e2e: bool,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or_default()
}

impl Shared {
    fn record(&self, micros: u64, count: u64) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut total) = self.total.lock() {
            total.saturating_record_n(micros.max(1), count);
        }
        if let Ok(mut interval) = self.interval.lock() {
            interval.saturating_record_n(micros.max(1), count);
        }
    }

    fn fail(&self, error: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first_error.lock() {
            first.get_or_insert(error);
        }
    }
}

pub fn run(mode: Mode, args: LoadArgs) -> Result<(), String> {
    if let Some(ca_file) = &args.tls_ca {
        crate::kafka::use_tls(ca_file)?;
    }
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
    let cores = args.cores.unwrap_or_else(shard::runtime::available_cores);
    let config = shard::runtime::RuntimeConfig {
        cores,
        pin: true,
        ..shard::runtime::RuntimeConfig::all_cores()
    };
    let shared = Arc::new(Shared {
        produced: AtomicU64::new(0),
        produced_bytes: AtomicU64::new(0),
        consumed: AtomicU64::new(0),
        consumed_bytes: AtomicU64::new(0),
        consumed_all: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        total: Mutex::new(histogram()),
        interval: Mutex::new(histogram()),
        recording: AtomicBool::new(args.warmup <= 0.0),
        stop: AtomicBool::new(false),
        produce_done: AtomicBool::new(false),
        transactions: AtomicU64::new(0),
        first_error: Mutex::new(None),
        e2e: mode == Mode::E2e,
    });
    // Set up the topic once, from a throwaway executor.
    let partitions = {
        let (bootstrap, topic, wanted) =
            (args.bootstrap.clone(), args.topic.clone(), args.partitions);
        shard::runtime::run_local(1 << 20, async move {
            let mut connection = Connection::connect(&bootstrap).await?;
            kafka::ensure_topic(&mut connection, &topic, wanted).await
        })
        .map_err(|e| e.to_string())??
    };
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
            let result = produce(mode, &args, acks, partitions, producer, &shared).await;
            if let Err(error) = &result {
                shared.fail(error.clone());
            }
            result
        }));
    }
    for consumer in (0..consumers).filter(|c| (c + producers) % shards == shard) {
        let (args, shared) = (args.clone(), shared.clone());
        tasks.push(shard::runtime::spawn(async move {
            let result = consume(mode, &args, partitions, consumer, &shared).await;
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

fn should_stop(
    args: &LoadArgs,
    shared: &Shared,
    started: Instant,
    sent: u64,
    my_limit: Option<u64>,
) -> bool {
    shared.stop.load(Ordering::Relaxed)
        || started.elapsed().as_secs_f64() >= args.duration + args.warmup
        || my_limit.is_some_and(|limit| sent >= limit)
}

fn build_batch(
    count: usize,
    size: usize,
    codec: Compression,
    payload: Payload,
    scheduled_nanos: &[u64],
) -> Result<Bytes, String> {
    let now_ms = (now_nanos() / 1_000_000) as i64;
    let mut builder = RecordBatchBuilder::new(now_ms);
    let mut value = vec![b'x'; size];
    for index in 0..count {
        if payload == Payload::Text {
            value = crate::payload::text_value(size, index as u64);
            value.resize(size.max(8), b' ');
        }
        let stamp = scheduled_nanos.get(index).copied().unwrap_or(0);
        value[..8].copy_from_slice(&stamp.to_be_bytes());
        builder.push(BatchRecord { key: None, value: Some(&value), timestamp_delta: 0 });
    }
    let bytes = if codec == Compression::None {
        builder.build()
    } else {
        builder.build_compressed(codec).map_err(|e| e.to_string())?
    };
    Ok(Bytes::from(bytes))
}

/// One produce request for `batches`, each (partition, records) for a different partition.
fn produce_request(
    topic: &str,
    batches: Vec<(i32, Bytes)>,
    acks: i16,
    transactional_id: Option<TransactionalId>,
) -> RequestKind {
    let mut topic_data = produce_request::TopicProduceData::default();
    topic_data.name = kafka::topic_name(topic);
    topic_data.partition_data = batches
        .into_iter()
        .map(|(partition, records)| {
            let mut data = produce_request::PartitionProduceData::default();
            data.index = partition;
            data.records = Some(records);
            data
        })
        .collect();
    let mut request = ProduceRequest::default();
    request.transactional_id = transactional_id;
    request.acks = acks;
    request.timeout_ms = 30_000;
    request.topic_data = vec![topic_data];
    RequestKind::Produce(request)
}

async fn produce(
    mode: Mode,
    args: &LoadArgs,
    acks: i16,
    partitions: i32,
    producer: usize,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let rate = if args.rate > 0 { Some(args.rate as f64 / args.producers as f64) } else { None };
    let on_ack: kafka::OnAck = {
        let shared = shared.clone();
        std::rc::Rc::new(move |scheduled, count| record_batch(&shared, scheduled, count, rate))
    };
    let mut coordinator = match args.transactional {
        Some(_) => {
            let id = format!("strata-bench-{}-{producer}", std::process::id());
            Some(kafka::TxnCoordinator::init(&args.bootstrap, &id).await?)
        }
        None => None,
    };
    let transactional_id = coordinator.as_ref().map(|c| c.transactional_id().clone());
    let idempotence = if let Some(coordinator) = &coordinator {
        Some(coordinator.producer)
    } else if args.idempotent {
        let mut connection = kafka::Connection::connect(&args.bootstrap).await?;
        Some(kafka::init_producer_id(&mut connection).await?)
    } else {
        None
    };
    // Batches in the open transaction (transactional producers).
    let mut in_txn: u64 = 0;
    // Next sequence number per partition (idempotent producers).
    let mut sequences: HashMap<i32, i32> = HashMap::new();
    let mut pipeline =
        kafka::ProducePipeline::connect(&args.bootstrap, args.in_flight, acks != 0, on_ack).await?;
    let codec = args.compression.wire();
    let per_batch = (args.batch_bytes / (args.message_size + 8)).max(1);
    let my_limit = args.messages.map(|total| {
        total / args.producers as u64 + u64::from((producer as u64) < total % args.producers as u64)
    });
    let mut templates: HashMap<usize, Bytes> = HashMap::new();
    // Producers split the partitions between them; extra producers share partitions.
    let my_partitions: Vec<i32> = if args.producers <= partitions as usize {
        (0..partitions).filter(|p| *p as usize % args.producers == producer).collect()
    } else {
        vec![(producer % partitions as usize) as i32]
    };
    let started = Instant::now();
    let start_nanos = now_nanos();
    let mut sent: u64 = 0;
    let mut next_partition = 0usize;
    let per_request = match args.batches_per_request {
        0 => my_partitions.len(),
        n => n.min(my_partitions.len()),
    };
    let mut pending = PendingRequest::default();
    while !should_stop(args, shared, started, sent, my_limit) {
        let (count, first_scheduled) = match rate {
            Some(rate) => {
                let elapsed = started.elapsed().as_secs_f64();
                let due = (elapsed * rate) as u64;
                let mut count = due.saturating_sub(sent).min(per_batch as u64) as usize;
                if let Some(limit) = my_limit {
                    count = count.min(limit.saturating_sub(sent) as usize);
                }
                // --linger-ms: let a partial batch wait for more due messages, up to the linger.
                let linger = args.linger_ms as f64 / 1000.0;
                let waited = elapsed - sent as f64 / rate;
                if count == 0 || (count < per_batch && waited < linger) {
                    // Nothing more is ready: what is packed goes now.
                    pending
                        .send(
                            &mut pipeline,
                            &args.topic,
                            acks,
                            transactional_id.clone(),
                            args,
                            shared,
                        )
                        .await?;
                    let next_due = (sent + 1) as f64 / rate - elapsed;
                    let wait = if count == 0 { next_due } else { linger - waited };
                    shard::runtime::sleep(Duration::from_secs_f64(wait.clamp(0.0, 0.05))).await;
                    continue;
                }
                (count, start_nanos + (sent as f64 / rate * 1e9) as u64)
            }
            None => {
                let count = my_limit.map_or(per_batch, |limit| {
                    limit.saturating_sub(sent).min(per_batch as u64) as usize
                });
                (count, now_nanos())
            }
        };
        let records = if mode == Mode::E2e {
            let spacing = rate.map_or(0.0, |r| 1e9 / r);
            let stamps: Vec<u64> =
                (0..count).map(|i| first_scheduled + (i as f64 * spacing) as u64).collect();
            build_batch(count, args.message_size, codec, args.payload, &stamps)?
        } else {
            match templates.get(&count) {
                Some(template) => template.clone(),
                None => {
                    let template = build_batch(count, args.message_size, codec, args.payload, &[])?;
                    templates.insert(count, template.clone());
                    template
                }
            }
        };
        let partition = my_partitions[next_partition % my_partitions.len()];
        next_partition += 1;
        if let (Some(coordinator), 0) = (coordinator.as_mut(), in_txn) {
            coordinator.add_partitions(&args.topic, &my_partitions).await?;
        }
        let records = match idempotence {
            Some((producer_id, epoch)) => {
                let sequence = sequences.entry(partition).or_insert(0);
                let mut bytes = bytes::BytesMut::from(&records[..]);
                if coordinator.is_some() {
                    // Attribute bit 4 (transactional), set before the CRC is recomputed.
                    let attributes = i16::from_be_bytes([bytes[21], bytes[22]])
                        | wire::record_batch::TRANSACTIONAL_FLAG;
                    bytes[21..23].copy_from_slice(&attributes.to_be_bytes());
                }
                wire::record_batch::RecordBatchMut::new(&mut bytes, kafka::RESPONSE_BYTES_MAX)
                    .map_err(|e| e.to_string())?
                    .set_producer_and_crc(producer_id, epoch, *sequence);
                *sequence = sequence.wrapping_add(count as i32) & i32::MAX;
                bytes.freeze()
            }
            None => records,
        };
        if pending.batches.is_empty() {
            pending.first_scheduled = first_scheduled;
        }
        pending.bytes += records.len();
        pending.count += count as u64;
        pending.batches.push((partition, records));
        sent += count as u64;
        in_txn += 1;
        let txn_full = args.transactional.is_some_and(|every| in_txn >= every);
        if pending.batches.len() >= per_request
            || pending.bytes >= args.max_request_bytes
            || txn_full
        {
            pending
                .send(&mut pipeline, &args.topic, acks, transactional_id.clone(), args, shared)
                .await?;
        }
        if let (Some(coordinator), true) = (coordinator.as_mut(), txn_full) {
            pipeline.drain().await?;
            coordinator.end(true).await?;
            shared.transactions.fetch_add(1, Ordering::Relaxed);
            in_txn = 0;
        }
    }
    pending.send(&mut pipeline, &args.topic, acks, transactional_id.clone(), args, shared).await?;
    pipeline.drain().await?;
    if let (Some(coordinator), true) = (coordinator.as_mut(), in_txn > 0) {
        coordinator.end(true).await?;
        shared.transactions.fetch_add(1, Ordering::Relaxed);
    }
    pipeline.finish().await?;
    shared.produce_done.store(true, Ordering::Relaxed);
    Ok(())
}

/// Batches packed into the next produce request (each for a different partition, in the order
/// they were built, so their scheduled times follow one another).
#[derive(Default)]
struct PendingRequest {
    batches: Vec<(i32, Bytes)>,
    first_scheduled: u64,
    count: u64,
    bytes: usize,
}

impl PendingRequest {
    async fn send(
        &mut self,
        pipeline: &mut kafka::ProducePipeline,
        topic: &str,
        acks: i16,
        transactional_id: Option<TransactionalId>,
        args: &LoadArgs,
        shared: &Shared,
    ) -> Result<(), String> {
        if self.batches.is_empty() {
            return Ok(());
        }
        let batches = std::mem::take(&mut self.batches);
        let (count, first_scheduled) = (self.count, self.first_scheduled);
        (self.count, self.bytes) = (0, 0);
        let request = produce_request(topic, batches, acks, transactional_id);
        pipeline.send(request, first_scheduled, count).await?;
        if shared.recording.load(Ordering::Relaxed) {
            shared.produced.fetch_add(count, Ordering::Relaxed);
            shared.produced_bytes.fetch_add(count * args.message_size as u64, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Records a batch's latency: each message from its scheduled time to the acknowledgement.
/// (In e2e mode the histogram holds publish-to-receive latency, recorded by the consumers.)
fn record_batch(shared: &Shared, first_scheduled: u64, count: u64, rate: Option<f64>) {
    if shared.e2e {
        return;
    }
    let now = now_nanos();
    match rate {
        Some(rate) => {
            let spacing = 1e9 / rate;
            for index in 0..count {
                let scheduled = first_scheduled + (index as f64 * spacing) as u64;
                shared.record(now.saturating_sub(scheduled) / 1000, 1);
            }
        }
        None => shared.record(now.saturating_sub(first_scheduled) / 1000, count),
    }
}

async fn consume(
    mode: Mode,
    args: &LoadArgs,
    partitions: i32,
    consumer: usize,
    shared: &Shared,
) -> Result<(), String> {
    let mut connection = Connection::connect(&args.bootstrap).await?;
    let mine: Vec<i32> =
        (0..partitions).filter(|p| *p as usize % args.consumers == consumer).collect();
    if mine.is_empty() {
        return Ok(());
    }
    let bounds = kafka::offsets(&mut connection, &args.topic, partitions).await?;
    let from_end = mode == Mode::E2e || args.from == "end";
    let mut positions: Vec<(i32, i64)> = mine
        .iter()
        .map(|p| (*p, if from_end { bounds[*p as usize].1 } else { bounds[*p as usize].0 }))
        .collect();
    let started = Instant::now();
    // Consume mode stops when all consumers together have read --messages.
    let limit = if mode == Mode::Consume { args.messages } else { None };
    loop {
        if shared.stop.load(Ordering::Relaxed)
            || limit.is_some_and(|limit| shared.consumed_all.load(Ordering::Relaxed) >= limit)
        {
            break;
        }
        let over = started.elapsed().as_secs_f64() >= args.duration + args.warmup;
        if over
            && (mode != Mode::E2e
                || shared.produce_done.load(Ordering::Relaxed)
                || started.elapsed().as_secs_f64() > args.duration + args.warmup + 5.0)
        {
            break;
        }
        let mut topic = fetch_request::FetchTopic::default();
        topic.topic = kafka::topic_name(&args.topic);
        topic.partitions = positions
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
        request.topics = vec![topic];
        let response = match connection.call(ApiKey::Fetch, 11, RequestKind::Fetch(request)).await?
        {
            ResponseKind::Fetch(response) => response,
            _ => return Err("unexpected answer to fetch".into()),
        };
        for data in response.responses.into_iter().flat_map(|t| t.partitions) {
            if data.error_code != 0 {
                return Err(format!(
                    "fetch error {} on partition {}",
                    data.error_code, data.partition_index
                ));
            }
            let Some(position) = positions.iter_mut().find(|(p, _)| *p == data.partition_index)
            else {
                continue;
            };
            let records = data.records.unwrap_or_default();
            let mut rest = &records[..];
            let now = now_nanos();
            while let Ok(header) =
                wire::RecordBatchHeader::parse(rest, shard::config::BATCH_BYTES_MAX)
            {
                rest = &rest[header.size_bytes()..];
                if header.last_offset() < position.1 {
                    continue;
                }
                let count =
                    (header.last_offset() + 1 - position.1.max(header.base_offset())) as u64;
                position.1 = header.last_offset() + 1;
                shared.consumed_all.fetch_add(count, Ordering::Relaxed);
                if shared.recording.load(Ordering::Relaxed) {
                    shared.consumed.fetch_add(count, Ordering::Relaxed);
                    shared.consumed_bytes.fetch_add(header.size_bytes() as u64, Ordering::Relaxed);
                }
                if mode == Mode::E2e {
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
                        let records =
                            wire::compression::records_of(&header).map_err(|e| e.to_string())?;
                        for record in records {
                            shared.record(
                                now.saturating_sub(stamp_of(record.value.as_deref())) / 1000,
                                1,
                            );
                        }
                    }
                }
            }
        }
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
            "latency_us": {
                "count": total.len(),
                "mean": total.mean(),
                "p50": latency(0.5),
                "p95": latency(0.95),
                "p99": latency(0.99),
                "p999": latency(0.999),
                "max": total.max(),
            },
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
    }
    if let Some(error) = first_error {
        return Err(format!("{errors} errors; first: {error}"));
    }
    Ok(())
}
