//! One producer of `strata-bench produce|e2e`: batches built (open or closed loop), packed
//! into produce requests per leader, one pipelined connection per broker, as the Java client
//! does (one batch per partition per request, every ready batch for a broker in one request).
//!
//! Failover: a batch answered with a retriable error, or in flight on a lost connection, is
//! sent again to its partition's leader of then (Metadata refreshed at most every 100 ms),
//! until `DELIVERY_TIMEOUT` (the Java client's `delivery.timeout.ms`). While a partition has
//! batches waiting to be sent again, new batches go to the other partitions. Each partition's
//! stall (from its last acknowledgement before a failure to the next one after it) is reported.
//! Runs on: one of the load generator's executors.

use crate::args::{LoadArgs, Mode, Payload};
use crate::kafka::{self, Batch, Outcomes, ProducePipeline};
use crate::routing::{self, Leaders};
use crate::shared::{now_nanos, Shared};
use bytes::Bytes;
use kafka_protocol::messages::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::{BatchRecord, Compression, RecordBatchBuilder};

/// How long a batch may take to be acknowledged from when it was built, retries included
/// (the Java client's `delivery.timeout.ms`).
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(120);
/// Batches waiting to be sent again, at most, before the producer stops building new ones.
pub const RETRY_BATCHES_MAX: usize = 4096;

/// What the producer's callbacks and its loop share (one executor: `RefCell`).
#[derive(Default)]
struct Failover {
    /// Batches to send again, oldest first.
    retry: VecDeque<Batch>,
    /// Partition -> when its last batch was acknowledged (ns since the epoch).
    last_ack_nanos: HashMap<i32, u64>,
    /// Partition -> when it stalled: its last acknowledgement before the failure.
    stalled_since: HashMap<i32, u64>,
    /// A lost connection or a stale-leader error since the last Metadata refresh.
    stale: bool,
}

fn outcomes(shared: &Arc<Shared>, failover: &Rc<RefCell<Failover>>, rate: Option<f64>) -> Outcomes {
    let acknowledged = {
        let (shared, failover) = (shared.clone(), failover.clone());
        Rc::new(move |batch: &Batch| {
            let now = now_nanos();
            let mut state = failover.borrow_mut();
            state.last_ack_nanos.insert(batch.partition, now);
            if let Some(since) = state.stalled_since.remove(&batch.partition) {
                shared.stalled(batch.partition, now.saturating_sub(since) / 1_000_000);
            }
            drop(state);
            shared.produced_all.fetch_add(batch.count, Ordering::Relaxed);
            if shared.recording.load(Ordering::Relaxed) {
                shared.produced.fetch_add(batch.count, Ordering::Relaxed);
                let bytes = batch.count * shared.message_size as u64;
                shared.produced_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            record_batch(&shared, batch.first_scheduled, batch.count, rate);
        })
    };
    let retry = {
        let (shared, failover) = (shared.clone(), failover.clone());
        Rc::new(move |batch: Batch, code: Option<i16>| {
            shared.retried(code);
            let mut state = failover.borrow_mut();
            let since = state
                .last_ack_nanos
                .get(&batch.partition)
                .copied()
                .unwrap_or(batch.first_scheduled);
            state.stalled_since.entry(batch.partition).or_insert(since);
            state.stale |= code.is_none_or(|code| routing::STALE_LEADER.contains(&code));
            state.retry.push_back(batch);
        })
    };
    Outcomes { acknowledged, retry }
}

/// The batches packed for one broker's next request.
#[derive(Default)]
struct Pending {
    batches: Vec<Batch>,
    bytes: usize,
}

/// A producer's connections and packing, per leader.
struct Router<'a> {
    args: &'a LoadArgs,
    acks: i16,
    transactional_id: Option<TransactionalId>,
    leaders: Leaders,
    pipelines: BTreeMap<i32, ProducePipeline>,
    pending: BTreeMap<i32, Pending>,
    /// Batches one request carries at most, per broker.
    per_request: BTreeMap<i32, usize>,
    /// The partitions this producer writes.
    mine: Vec<i32>,
    outcomes: Outcomes,
    failover: Rc<RefCell<Failover>>,
}

impl Router<'_> {
    /// Packs `batch` for its leader's next request, sending that when it is full; no leader
    /// known: the batch waits to be sent again.
    async fn add(&mut self, batch: Batch, txn_full: bool) -> Result<(), String> {
        let Some((leader, _)) = self.leaders.leader(batch.partition) else {
            (self.outcomes.retry)(batch, Some(5));
            return Ok(());
        };
        let pending = self.pending.entry(leader).or_default();
        pending.bytes += batch.records.len();
        pending.batches.push(batch);
        let full = pending.batches.len() >= self.per_request.get(&leader).copied().unwrap_or(1)
            || pending.bytes >= self.args.max_request_bytes
            || txn_full;
        if full {
            self.flush(leader).await?;
        }
        Ok(())
    }

    /// Sends what is packed for `leader`.
    async fn flush(&mut self, leader: i32) -> Result<(), String> {
        let Some(pending) = self.pending.remove(&leader) else { return Ok(()) };
        if pending.batches.is_empty() {
            return Ok(());
        }
        if !self.pipelines.contains_key(&leader) {
            let address = self.leaders.broker_address(leader).map(str::to_string);
            let connected = match address {
                Some(address) => ProducePipeline::connect(
                    &address,
                    self.args.in_flight,
                    self.acks != 0,
                    self.outcomes.clone(),
                )
                .await
                .ok(),
                None => None,
            };
            let Some(pipeline) = connected else {
                for batch in pending.batches {
                    (self.outcomes.retry)(batch, None);
                }
                return Ok(());
            };
            self.pipelines.insert(leader, pipeline);
        }
        let request = produce_request(
            &self.args.topic,
            &pending.batches,
            self.acks,
            self.transactional_id.clone(),
        );
        if let Some(pipeline) = self.pipelines.get_mut(&leader) {
            pipeline.send(request, pending.batches).await?;
            if pipeline.is_lost() {
                self.pipelines.remove(&leader);
            }
        }
        Ok(())
    }

    async fn flush_all(&mut self) -> Result<(), String> {
        let leaders: Vec<i32> = self.pending.keys().copied().collect();
        for leader in leaders {
            self.flush(leader).await?;
        }
        Ok(())
    }

    /// Sends again the batches given back, to their leaders of now (Metadata refreshed when a
    /// leader was stale); those still without a reachable leader wait for the next call.
    async fn resend(&mut self) -> Result<(), String> {
        if self.failover.borrow().retry.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.failover.borrow_mut().stale) {
            self.leaders.refresh_if_due().await;
            self.per_request = per_request(self.args, &self.leaders, &self.mine);
            // Connections to brokers that no longer lead anything of ours are kept: cheap.
        }
        let waiting: Vec<Batch> = self.failover.borrow_mut().retry.drain(..).collect();
        for batch in waiting {
            if batch.created.elapsed() > DELIVERY_TIMEOUT {
                return Err(format!(
                    "partition {}: not acknowledged within {} s",
                    batch.partition,
                    DELIVERY_TIMEOUT.as_secs()
                ));
            }
            match self.leaders.leader(batch.partition) {
                Some((leader, _)) => {
                    let pending = self.pending.entry(leader).or_default();
                    pending.bytes += batch.records.len();
                    pending.batches.push(batch);
                }
                None => self.failover.borrow_mut().retry.push_back(batch),
            }
        }
        self.flush_all().await?;
        // Not sent: look again after the refresh interval.
        if !self.failover.borrow().retry.is_empty() {
            self.failover.borrow_mut().stale = true;
        }
        Ok(())
    }

    /// Waits until every batch sent is acknowledged, sending again what comes back.
    async fn settle(&mut self) -> Result<(), String> {
        self.flush_all().await?;
        loop {
            for pipeline in self.pipelines.values_mut() {
                pipeline.drain().await?;
            }
            self.pipelines.retain(|_, pipeline| !pipeline.is_lost());
            if self.failover.borrow().retry.is_empty() {
                return Ok(());
            }
            shard::runtime::sleep(Duration::from_millis(20)).await;
            self.resend().await?;
        }
    }
}

/// Batches one request carries at most for each broker: one per partition of ours it leads
/// (or `--batches-per-request`).
fn per_request(args: &LoadArgs, leaders: &Leaders, mine: &[i32]) -> BTreeMap<i32, usize> {
    let mut counts: BTreeMap<i32, usize> = BTreeMap::new();
    for partition in mine {
        if let Some((leader, _)) = leaders.leader(*partition) {
            *counts.entry(leader).or_default() += 1;
        }
    }
    if args.batches_per_request > 0 {
        for count in counts.values_mut() {
            *count = (*count).min(args.batches_per_request);
        }
    }
    counts
}

pub async fn produce(
    mode: Mode,
    args: &LoadArgs,
    acks: i16,
    partitions: i32,
    producer: usize,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let rate = if args.rate > 0 { Some(args.rate as f64 / args.producers as f64) } else { None };
    let failover: Rc<RefCell<Failover>> = Default::default();
    let coordinator = txn_coordinator(args, producer).await?;
    let transactional_id = coordinator.as_ref().map(|c| c.transactional_id().clone());
    let idempotence = producer_id_and_epoch(args, coordinator.as_ref()).await?;
    // Producers split the partitions between them; extra producers share partitions.
    let my_partitions: Vec<i32> = if args.producers <= partitions as usize {
        (0..partitions).filter(|p| *p as usize % args.producers == producer).collect()
    } else {
        vec![(producer % partitions as usize) as i32]
    };
    let leaders = Leaders::discover(&args.bootstrap, &args.topic).await?;
    if mode == Mode::E2e {
        wait_for_consumers(args, shared).await?;
    }
    let router = Router {
        args,
        acks,
        transactional_id,
        per_request: per_request(args, &leaders, &my_partitions),
        mine: my_partitions.clone(),
        leaders,
        pipelines: BTreeMap::new(),
        pending: BTreeMap::new(),
        outcomes: outcomes(shared, &failover, rate),
        failover: failover.clone(),
    };
    let codec = args.compression.wire();
    let per_batch = (args.batch_bytes / (args.message_size + 8)).max(1);
    let my_limit = args.messages.map(|total| {
        total / args.producers as u64 + u64::from((producer as u64) < total % args.producers as u64)
    });
    let mut state = Producer {
        mode,
        args,
        shared,
        rate,
        failover,
        coordinator,
        idempotence,
        my_partitions,
        router,
        in_txn: 0,
        sequences: HashMap::new(),
        codec,
        per_batch,
        my_limit,
        templates: HashMap::new(),
        started: Instant::now(),
        start_nanos: now_nanos(),
        sent: 0,
        next_partition: 0,
    };
    state.run().await?;
    state.finish().await
}

/// The transaction coordinator of a transactional producer (`--transactional`).
async fn txn_coordinator(
    args: &LoadArgs,
    producer: usize,
) -> Result<Option<kafka::TxnCoordinator>, String> {
    let coordinator = match args.transactional {
        Some(_) => {
            let id = format!("strata-bench-{}-{producer}", std::process::id());
            Some(kafka::TxnCoordinator::init(&args.bootstrap, &id).await?)
        }
        None => None,
    };
    Ok(coordinator)
}

/// The producer id and epoch of a transactional or idempotent producer.
async fn producer_id_and_epoch(
    args: &LoadArgs,
    coordinator: Option<&kafka::TxnCoordinator>,
) -> Result<Option<(i64, i16)>, String> {
    let idempotence = if let Some(coordinator) = coordinator {
        Some(coordinator.producer)
    } else if args.idempotent {
        let mut connection = kafka::Connection::connect(&args.bootstrap).await?;
        Some(kafka::init_producer_id(&mut connection).await?)
    } else {
        None
    };
    Ok(idempotence)
}

/// Waits until every consumer has found where its partitions' logs end (e2e mode).
async fn wait_for_consumers(args: &LoadArgs, shared: &Shared) -> Result<(), String> {
    // Every message is to be received: the consumers first learn where the logs end.
    let deadline = Instant::now() + routing::LEADERS_PATIENCE;
    while shared.consumers_ready.load(Ordering::Relaxed) < args.consumers as u64 {
        if Instant::now() >= deadline {
            return Err("the consumers did not find their partitions' ends in time".into());
        }
        shard::runtime::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// One producer's state while it runs: its router, transaction, sequences and pacing.
struct Producer<'a> {
    mode: Mode,
    args: &'a LoadArgs,
    shared: &'a Arc<Shared>,
    /// Messages per second this producer offers (`--rate`); `None`: closed loop.
    rate: Option<f64>,
    failover: Rc<RefCell<Failover>>,
    /// The transaction coordinator (transactional producers).
    coordinator: Option<kafka::TxnCoordinator>,
    /// Producer id and epoch (idempotent producers).
    idempotence: Option<(i64, i16)>,
    my_partitions: Vec<i32>,
    router: Router<'a>,
    /// Batches in the open transaction (transactional producers).
    in_txn: u64,
    /// Next sequence number per partition (idempotent producers).
    sequences: HashMap<i32, i32>,
    codec: Compression,
    /// Messages a batch holds at most.
    per_batch: usize,
    /// Messages this producer sends at most (`--messages`).
    my_limit: Option<u64>,
    /// Records of a batch of each size, built once (not e2e).
    templates: HashMap<usize, Bytes>,
    started: Instant,
    start_nanos: u64,
    /// Messages sent so far.
    sent: u64,
    /// Where the round over `my_partitions` goes on.
    next_partition: usize,
}

impl Producer<'_> {
    /// Builds and sends batches until the run ends (stop, duration or message count).
    async fn run(&mut self) -> Result<(), String> {
        while !should_stop(self.args, self.shared, self.started, self.sent, self.my_limit) {
            self.router.resend().await?;
            // New batches go to partitions with nothing waiting to be sent again.
            let Some(partition) = self.healthy_partition() else {
                self.router.flush_all().await?;
                shard::runtime::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let Some((count, first_scheduled)) = self.due_batch().await? else { continue };
            let records = self.records(count, first_scheduled)?;
            self.next_partition =
                self.my_partitions.iter().position(|p| *p == partition).unwrap_or(0) + 1;
            if let (Some(coordinator), 0) = (self.coordinator.as_mut(), self.in_txn) {
                coordinator.add_partitions(&self.args.topic, &self.my_partitions).await?;
            }
            let records = self.stamp(partition, records, count)?;
            self.send(partition, records, first_scheduled, count).await?;
        }
        Ok(())
    }

    /// The next partition in turn with nothing waiting to be sent again, while retries have room.
    fn healthy_partition(&self) -> Option<i32> {
        let (my_partitions, next_partition) = (&self.my_partitions, self.next_partition);
        let state = self.failover.borrow();
        let next = (0..my_partitions.len())
            .map(|step| my_partitions[(next_partition + step) % my_partitions.len()])
            .find(|p| !state.stalled_since.contains_key(p));
        next.filter(|_| state.retry.len() < RETRY_BATCHES_MAX)
    }

    /// The next batch's message count and first scheduled time; `None` after waiting for more.
    async fn due_batch(&mut self) -> Result<Option<(usize, u64)>, String> {
        let (args, sent, per_batch, my_limit) =
            (self.args, self.sent, self.per_batch, self.my_limit);
        let scheduled = match self.rate {
            Some(rate) => {
                let elapsed = self.started.elapsed().as_secs_f64();
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
                    self.router.flush_all().await?;
                    let next_due = (sent + 1) as f64 / rate - elapsed;
                    let wait = if count == 0 { next_due } else { linger - waited };
                    shard::runtime::sleep(Duration::from_secs_f64(wait.clamp(0.0, 0.05))).await;
                    return Ok(None);
                }
                (count, self.start_nanos + (sent as f64 / rate * 1e9) as u64)
            }
            None => {
                let count = my_limit.map_or(per_batch, |limit| {
                    limit.saturating_sub(sent).min(per_batch as u64) as usize
                });
                (count, now_nanos())
            }
        };
        Ok(Some(scheduled))
    }

    /// The records of a batch of `count` messages: time-stamped (e2e) or a template per size.
    fn records(&mut self, count: usize, first_scheduled: u64) -> Result<Bytes, String> {
        let (args, codec) = (self.args, self.codec);
        let records = if self.mode == Mode::E2e {
            let spacing = self.rate.map_or(0.0, |r| 1e9 / r);
            let stamps: Vec<u64> =
                (0..count).map(|i| first_scheduled + (i as f64 * spacing) as u64).collect();
            build_batch(count, args.message_size, codec, args.payload, &stamps)?
        } else {
            match self.templates.get(&count) {
                Some(template) => template.clone(),
                None => {
                    let template = build_batch(count, args.message_size, codec, args.payload, &[])?;
                    self.templates.insert(count, template.clone());
                    template
                }
            }
        };
        Ok(records)
    }

    /// Sets an idempotent producer's id, epoch and next sequence in `records` (others: as is).
    fn stamp(&mut self, partition: i32, records: Bytes, count: usize) -> Result<Bytes, String> {
        let records = match self.idempotence {
            Some((producer_id, epoch)) => {
                let sequence = self.sequences.entry(partition).or_insert(0);
                let mut bytes = bytes::BytesMut::from(&records[..]);
                if self.coordinator.is_some() {
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
        Ok(records)
    }

    /// Hands a batch to the router, committing the transaction once it holds enough batches.
    async fn send(
        &mut self,
        partition: i32,
        records: Bytes,
        first_scheduled: u64,
        count: usize,
    ) -> Result<(), String> {
        self.sent += count as u64;
        self.in_txn += 1;
        let txn_full = self.args.transactional.is_some_and(|every| self.in_txn >= every);
        let created = Instant::now();
        let batch = Batch { partition, records, first_scheduled, count: count as u64, created };
        self.router.add(batch, txn_full).await?;
        if let (Some(coordinator), true) = (self.coordinator.as_mut(), txn_full) {
            self.router.settle().await?;
            coordinator.end(true).await?;
            self.shared.transactions.fetch_add(1, Ordering::Relaxed);
            self.in_txn = 0;
        }
        Ok(())
    }

    /// Waits for every batch to be acknowledged, commits the open transaction, closes up.
    async fn finish(&mut self) -> Result<(), String> {
        self.router.settle().await?;
        if let (Some(coordinator), true) = (self.coordinator.as_mut(), self.in_txn > 0) {
            coordinator.end(true).await?;
            self.shared.transactions.fetch_add(1, Ordering::Relaxed);
        }
        for (_, pipeline) in std::mem::take(&mut self.router.pipelines) {
            pipeline.finish().await?;
        }
        self.shared.producers_done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
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

/// One produce request for `batches`, each for a different partition.
fn produce_request(
    topic: &str,
    batches: &[Batch],
    acks: i16,
    transactional_id: Option<TransactionalId>,
) -> RequestKind {
    let mut topic_data = produce_request::TopicProduceData::default();
    topic_data.name = kafka::topic_name(topic);
    topic_data.partition_data = batches
        .iter()
        .map(|batch| {
            let mut data = produce_request::PartitionProduceData::default();
            data.index = batch.partition;
            data.records = Some(batch.records.clone());
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
