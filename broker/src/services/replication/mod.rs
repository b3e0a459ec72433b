//! The follower side of replication: per shard, one peer stream per leader broker.
//!
//! Owns: the streams of this shard (leader broker → the partitions this shard follows from it,
//! with the leader epoch each is followed at). Each stream is a task holding one long-lived
//! TCP connection to the leader's Kafka listener; it sends Kafka replica Fetches (v12,
//! `replica_id` = this node, `last_fetched_epoch` per partition) for all of its partitions at
//! once, which the leader parks until there is data (`REPLICA_FETCH_WAIT_MS`). The stream
//! keeps a fetch session with the leader (KIP-227): after the first, full fetch it sends only
//! the partitions whose fetch state changed, and the leader answers only the partitions with
//! something new. A refused session, or a new connection, starts again with a full fetch.
//! Per partition the answer is appended byte for byte (`PartitionLog::append_replica`: offsets,
//! epochs and producer state as the leader wrote them) and made durable under the topic's
//! flush policy by a background sync while the next fetch goes out; every fetch tells the
//! leader the durable end in a strata tag (`wire::strata_tags::DURABLE_END_TAG`), and the
//! leader's high watermark counts only that. While a sync runs, fetches are not parked, and
//! an answer with nothing new waits for the sync before the next fetch, so the leader learns a
//! sync's end within one round trip. The leader's high watermark is taken up to what this
//! replica has. A `diverging_epoch` answer
//! truncates the log to where it agrees with the leader first.
//! Invariants: a partition is fetched only while the adopted image names this node a follower
//! of it on this shard, and its batches are appended only while it still is.
//! Runs on: every shard, for the partitions it follows.

use crate::error::answered;
use crate::metadata::MetadataImage;
use crate::peer::PeerStream;
use crate::services::fetch_sessions::INITIAL_EPOCH;
use crate::services::partitions::{Partition, PartitionService};
use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, RequestHeader, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use wire::ids::{NodeId, TopicPartition};
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// The Fetch version followers send (replica id, current leader epoch, last fetched epoch and
/// diverging epoch are all in v12).
pub const REPLICA_FETCH_VERSION: i16 = 12;
/// How long the leader may park a follower's fetch with no data.
pub const REPLICA_FETCH_WAIT_MS: i32 = 500;
/// Bytes per partition and per fetch a follower asks for.
pub const REPLICA_FETCH_PARTITION_BYTES: i32 = 1 << 20;
pub const REPLICA_FETCH_BYTES: i32 = 16 << 20;
/// A follower fetches again while the syncs of an answer run only when the answer brought at
/// least this much; after a smaller one it waits for them (see `fetch_once`).
pub const OVERLAPPED_FETCH_BYTES_MIN: usize = 256 << 10;
/// Largest fetch response a follower accepts.
pub const REPLICA_RESPONSE_BYTES_MAX: usize = 64 << 20;
/// Connecting, and a fetch's answer beyond its wait, may take this long.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(10);
/// Waits after a failed connection or fetch, doubling up to the maximum.
pub const RETRY_BACKOFF_MS_MIN: u64 = 50;
pub const RETRY_BACKOFF_MS_MAX: u64 = 2_000;

/// One leader broker's stream on this shard.
struct Stream {
    leader: NodeId,
    /// Followed partitions → the leader epoch the image has for them.
    partitions: RefCell<BTreeMap<TopicPartition, i32>>,
    /// The leader's Kafka listener (host, port).
    endpoint: RefCell<(String, u16)>,
    stopped: Cell<bool>,
    /// Woken when the stream's partitions or endpoint change.
    changed: event_listener::Event,
    /// Partitions whose appended batches a background sync is making durable now.
    syncing: RefCell<std::collections::BTreeSet<TopicPartition>>,
    /// Woken when such a sync ends.
    synced: event_listener::Event,
}

/// What one partition's fetch tells the leader; the session holds the last one sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FetchState {
    leader_epoch: i32,
    fetch_offset: i64,
    last_fetched_epoch: i32,
    log_start_offset: i64,
    /// What is synced (`wire::strata_tags::DURABLE_END_TAG`).
    durable_end: i64,
}

/// A stream's fetch session with its leader (KIP-227): id 0 means none, so the next fetch is
/// a full one that asks for a session (epoch 0).
#[derive(Debug, Default)]
struct Session {
    id: i32,
    /// The epoch of the next incremental fetch.
    epoch: i32,
    /// The fetch state the leader's session holds, per partition.
    sent: BTreeMap<TopicPartition, FetchState>,
}

impl Session {
    /// Takes in what the leader's session holds once it answered a fetch with `session_id`:
    /// nothing (no session), or what was sent (over what it held, or as a new session's first).
    fn sent_and_answered(
        &mut self,
        session_id: i32,
        incremental: bool,
        forgotten: &[TopicPartition],
        states: BTreeMap<TopicPartition, FetchState>,
    ) {
        if session_id == 0 {
            *self = Session::default();
        } else if incremental {
            self.epoch = if self.epoch == i32::MAX { 1 } else { self.epoch + 1 };
            for key in forgotten {
                self.sent.remove(key);
            }
            self.sent.extend(states);
        } else {
            *self = Session { id: session_id, epoch: 1, sent: states };
        }
    }
}

pub struct ReplicaFetchers<S: Storage> {
    node: NodeId,
    shard: ShardId,
    partitions: Rc<PartitionService<S>>,
    streams: RefCell<BTreeMap<NodeId, Rc<Stream>>>,
    /// Round trips of follower fetches (microseconds), for `/metrics`.
    round_trip_us: Rc<RefCell<hdrhistogram::Histogram<u64>>>,
}

impl<S: Storage> ReplicaFetchers<S> {
    pub fn new(node: NodeId, shard: ShardId, partitions: Rc<PartitionService<S>>) -> Self {
        ReplicaFetchers {
            node,
            shard,
            partitions,
            streams: RefCell::default(),
            round_trip_us: Rc::new(RefCell::new(shard::partition_log::latency_histogram())),
        }
    }

    pub fn round_trip_us(&self) -> hdrhistogram::Histogram<u64> {
        self.round_trip_us.borrow().clone()
    }

    /// Follows what `image` has this shard follow: a stream per leader broker (started when
    /// new, stopped when it has nothing left to fetch).
    pub fn follow(self: &Rc<Self>, image: &MetadataImage) {
        let mut wanted: BTreeMap<NodeId, BTreeMap<TopicPartition, i32>> = BTreeMap::new();
        for topic in image.topics.values() {
            for index in 0..topic.partition_count() {
                let Some(placement) = topic.placement(index) else { continue };
                if placement.leader == self.node || placement.leader.0 < 0 {
                    continue;
                }
                let key = TopicPartition::new(topic.name.clone(), index);
                if image.replica_shard(&key, self.node) != Some(self.shard) {
                    continue;
                }
                wanted.entry(placement.leader).or_default().insert(key, placement.leader_epoch.0);
            }
        }
        let mut streams = self.streams.borrow_mut();
        for (leader, stream) in streams.iter() {
            if !wanted.contains_key(leader) {
                stream.stopped.set(true);
                stream.changed.notify(usize::MAX);
            }
        }
        streams.retain(|leader, _| wanted.contains_key(leader));
        for (leader, partitions) in wanted {
            let endpoint = image
                .brokers
                .get(&leader)
                .map(|broker| (broker.registration.host.clone(), broker.registration.port))
                .unwrap_or_default();
            match streams.get(&leader) {
                Some(stream) => {
                    *stream.partitions.borrow_mut() = partitions;
                    *stream.endpoint.borrow_mut() = endpoint;
                    stream.changed.notify(usize::MAX);
                }
                None => {
                    let stream = Rc::new(Stream {
                        leader,
                        partitions: RefCell::new(partitions),
                        endpoint: RefCell::new(endpoint),
                        stopped: Cell::new(false),
                        changed: event_listener::Event::new(),
                        syncing: RefCell::default(),
                        synced: event_listener::Event::new(),
                    });
                    streams.insert(leader, stream.clone());
                    let fetchers = self.clone();
                    shard::runtime::spawn(async move { fetchers.run(stream).await }).detach();
                }
            }
        }
    }

    /// Stops every stream (shutdown).
    pub fn stop_all(&self) {
        for stream in self.streams.borrow().values() {
            stream.stopped.set(true);
            stream.changed.notify(usize::MAX);
        }
        self.streams.borrow_mut().clear();
    }

    /// The stream's loop: connect, fetch, apply, until stopped; failures back off.
    async fn run(self: Rc<Self>, stream: Rc<Stream>) {
        tracing::info!(shard = self.shard.0, leader = stream.leader.0, "replica fetcher started");
        let mut connection: Option<PeerStream> = None;
        let mut session = Session::default();
        let mut correlation_id = 0i32;
        let mut backoff_ms = RETRY_BACKOFF_MS_MIN;
        while !stream.stopped.get() {
            let outcome =
                self.fetch_once(&stream, &mut connection, &mut session, &mut correlation_id).await;
            match outcome {
                Ok(true) => backoff_ms = RETRY_BACKOFF_MS_MIN,
                Ok(false) => {
                    // Nothing fetchable now (leader errors): wait for a change or a moment.
                    self.pause(&stream, backoff_ms).await;
                    backoff_ms = (backoff_ms * 2).min(RETRY_BACKOFF_MS_MAX);
                }
                Err(error) => {
                    // A new connection may reach another shard of the leader, which does not
                    // have the session.
                    connection = None;
                    session = Session::default();
                    tracing::debug!(leader = stream.leader.0, %error, "replica fetch failed");
                    self.pause(&stream, backoff_ms).await;
                    backoff_ms = (backoff_ms * 2).min(RETRY_BACKOFF_MS_MAX);
                }
            }
        }
        tracing::info!(shard = self.shard.0, leader = stream.leader.0, "replica fetcher stopped");
    }

    async fn pause(&self, stream: &Stream, ms: u64) {
        let listener = stream.changed.listen();
        if stream.stopped.get() {
            return;
        }
        futures_lite::future::or(
            async {
                listener.await;
            },
            shard::runtime::sleep(Duration::from_millis(ms)),
        )
        .await;
    }

    /// One fetch round trip and its application; `Ok(false)` when no partition made progress
    /// because of errors the leader answered.
    async fn fetch_once(
        &self,
        stream: &Rc<Stream>,
        connection: &mut Option<PeerStream>,
        session: &mut Session,
        correlation_id: &mut i32,
    ) -> Result<bool, String> {
        let states = self.fetch_states(stream);
        if states.is_empty() {
            return Ok(false);
        }
        let incremental = session.id != 0;
        let (request, forgotten) = self.fetch_request(stream, session, &states);
        let response = self.round_trip(stream, connection, correlation_id, request).await?;
        if answered::ends_fetch_session(response.error_code) {
            tracing::debug!(
                leader = stream.leader.0,
                session = session.id,
                error = response.error_code,
                "fetch session refused; fetching in full"
            );
            *session = Session::default();
            return Ok(true);
        }
        if response.error_code != 0 {
            return Err(format!("the leader answered error {}", response.error_code));
        }
        // The leader's session now holds what was sent.
        session.sent_and_answered(response.session_id, incremental, &forgotten, states);
        // An incremental answer lists only partitions with news: none means the leader
        // waited and nothing changed, which is not a failure.
        let nothing_new = response.responses.is_empty();
        let (applied, appended_bytes) = self.apply_answer(stream, response.responses).await;
        if appended_bytes < OVERLAPPED_FETCH_BYTES_MIN {
            // Little or nothing new: before asking again, let the running syncs end, so the
            // next fetch carries their durable ends and is parked at the leader until there is
            // more (bounded: a sync that never ends fails the peer timeout, and the next fetch
            // tells what is durable then). Only answers this large are worth a fetch that
            // overlaps the sync: under a light load, fetching on would only spin.
            wait_for_syncs(stream).await;
        }
        Ok(nothing_new || applied)
    }

    /// What each followed partition that is open and online here tells the leader.
    fn fetch_states(&self, stream: &Stream) -> BTreeMap<TopicPartition, FetchState> {
        let followed: Vec<(TopicPartition, i32)> =
            stream.partitions.borrow().iter().map(|(key, epoch)| (key.clone(), *epoch)).collect();
        let mut states: BTreeMap<TopicPartition, FetchState> = BTreeMap::new();
        for (key, epoch) in followed {
            let Some(local) = self.partitions.local(&key) else { continue };
            if local.log.is_offline() {
                continue;
            }
            let state = FetchState {
                leader_epoch: epoch,
                fetch_offset: local.log.log_end_offset(),
                last_fetched_epoch: local.log.latest_epoch().unwrap_or(-1),
                log_start_offset: local.log.log_start_offset(),
                durable_end: durable_end(&local),
            };
            states.insert(key, state);
        }
        states
    }

    /// The fetch for `states`: every partition in a full fetch; in an incremental one, those
    /// whose state the leader's session does not hold yet, and the session's partitions no
    /// longer followed as forgotten (returned too).
    fn fetch_request(
        &self,
        stream: &Stream,
        session: &Session,
        states: &BTreeMap<TopicPartition, FetchState>,
    ) -> (FetchRequest, Vec<TopicPartition>) {
        let incremental = session.id != 0;
        let mut request = FetchRequest::default();
        request.replica_id = BrokerId(self.node.0);
        // While a sync runs, the answer is not parked: the sync's end must reach the leader in
        // the next fetch, not after a wait for new data.
        request.max_wait_ms =
            if stream.syncing.borrow().is_empty() { REPLICA_FETCH_WAIT_MS } else { 0 };
        request.min_bytes = 1;
        request.max_bytes = REPLICA_FETCH_BYTES;
        request.isolation_level = 0;
        request.session_id = session.id;
        request.session_epoch = if incremental { session.epoch } else { INITIAL_EPOCH };
        for (key, state) in states {
            if incremental && session.sent.get(key) == Some(state) {
                continue;
            }
            add_fetch_partition(&mut request, key, state);
        }
        let forgotten: Vec<TopicPartition> = if incremental {
            session.sent.keys().filter(|key| !states.contains_key(*key)).cloned().collect()
        } else {
            Vec::new()
        };
        for key in &forgotten {
            add_forgotten_partition(&mut request, key);
        }
        (request, forgotten)
    }

    /// Sends `request` on the stream's connection (made first if there is none) and reads its
    /// answer, recording the round trip.
    async fn round_trip(
        &self,
        stream: &Stream,
        connection: &mut Option<PeerStream>,
        correlation_id: &mut i32,
        request: FetchRequest,
    ) -> Result<kafka_protocol::messages::FetchResponse, String> {
        if connection.is_none() {
            let (host, port) = stream.endpoint.borrow().clone();
            *connection = Some(connect(&host, port).await?);
        }
        let Some(socket) = connection.as_mut() else { return Err("no connection".into()) };
        *correlation_id = correlation_id.wrapping_add(1);
        let started = std::time::Instant::now();
        let response = call(socket, *correlation_id, request).await?;
        self.round_trip_us
            .borrow_mut()
            .saturating_record(started.elapsed().as_micros().max(1) as u64);
        Ok(response)
    }

    /// Appends every partition's batches; their syncs run in the background while the next
    /// fetch goes out, and each fetch tells the leader what is durable by then. Returns whether
    /// any partition's answer was applied, and the bytes appended.
    async fn apply_answer(
        &self,
        stream: &Rc<Stream>,
        responses: Vec<FetchableTopicResponse>,
    ) -> (bool, usize) {
        let mut applied_any = false;
        let mut appended_bytes = 0usize;
        for topic in responses {
            let name = topic.topic.0.to_string();
            for partition in topic.partitions {
                let key = TopicPartition::new(name.clone(), partition.partition_index);
                // Still followed from this leader (the image may have moved meanwhile)?
                if !stream.partitions.borrow().contains_key(&key) || stream.stopped.get() {
                    continue;
                }
                let applied = match self.append_fetched(&key, stream.leader, partition).await {
                    Ok(Some(fetched)) => {
                        appended_bytes += fetched.appended_bytes;
                        if fetched.appended_bytes > 0 {
                            sync_in_background(stream, &key, &fetched.local);
                        }
                        fetched.finish().await
                    }
                    Ok(None) => Ok(()),
                    Err(error) => Err(error),
                };
                match applied {
                    Ok(()) => applied_any = true,
                    Err(error) => {
                        tracing::debug!(partition = %key, leader = stream.leader.0, %error, "follower fetch not applied")
                    }
                }
            }
        }
        (applied_any, appended_bytes)
    }

    /// Applies one partition's part of a fetch answer up to its sync: a truncation or a
    /// restart at the leader's log start is done here (`None`); batches are appended, and
    /// what is left to do once they are durable is returned.
    async fn append_fetched(
        &self,
        key: &TopicPartition,
        leader: NodeId,
        data: PartitionData,
    ) -> Result<Option<Fetched<S>>, String> {
        let Some(local) = self.partitions.local(key) else { return Err("not open here".into()) };
        if local.role().leader != leader {
            return Err("no longer follows that leader".into());
        }
        if answered::is_offset_out_of_range(data.error_code)
            && data.log_start_offset > local.log.log_end_offset()
        {
            // The leader's log starts past this replica's end (retention or DeleteRecords moved
            // it while this replica was away, or this is a new replica of an old partition):
            // start again, empty, where the leader's log starts (Kafka's
            // truncateFullyAndStartAt).
            tracing::info!(partition = %key, leader = leader.0, from = local.log.log_end_offset(), to = data.log_start_offset, "restarting the replica at the leader's log start");
            local.log.restart_at(data.log_start_offset).await.map_err(|error| error.to_string())?;
            return Ok(None);
        }
        if data.error_code != 0 {
            return Err(format!("error {}", data.error_code));
        }
        if data.diverging_epoch.epoch >= 0 && data.diverging_epoch.end_offset >= 0 {
            let (epoch, end) = local.log.end_offset_for_epoch(data.diverging_epoch.epoch, None);
            let local_end = if epoch < 0 { local.log.log_start_offset() } else { end };
            let cut =
                data.diverging_epoch.end_offset.min(local_end).max(local.log.log_start_offset());
            tracing::info!(partition = %key, leader = leader.0, from = local.log.log_end_offset(), to = cut, "truncating to the leader's log (diverging epoch)");
            local.log.truncate_to(cut).await.map_err(|error| error.to_string())?;
            return Ok(None);
        }
        let records = data.records.unwrap_or_default();
        let mut appended_bytes = 0;
        for (base, batch) in batches_of(records)? {
            if local.role().leader != leader {
                return Err("leadership moved while appending".into());
            }
            // A log that has just started at the leader's log start gets the batch holding
            // that offset, which may begin below it (the log start can fall inside a batch):
            // start again at that batch (Kafka's UnexpectedAppendOffsetException handling).
            let end = local.log.log_end_offset();
            if base < end && local.log.log_start_offset() == end {
                local.log.restart_at(base).await.map_err(|error| error.to_string())?;
            }
            let now = shard::runtime::now_ms();
            appended_bytes += batch.len();
            local.log.append_replica(batch, now).await.map_err(|error| error.to_string())?;
        }
        Ok(Some(Fetched {
            local,
            appended_bytes,
            log_start_offset: data.log_start_offset,
            high_watermark: data.high_watermark,
        }))
    }
}

/// One partition's fetched answer, appended and waiting to be made durable.
struct Fetched<S: Storage> {
    local: Rc<Partition<S>>,
    /// Bytes of batches appended from the answer.
    appended_bytes: usize,
    /// The leader's log start and high watermark in the answer.
    log_start_offset: i64,
    high_watermark: i64,
}

impl<S: Storage> Fetched<S> {
    /// After the append: wakes readers, and follows the leader's log start and high watermark
    /// (which never passes this replica's durable end as the leader knew it).
    async fn finish(&self) -> Result<(), String> {
        let local = &self.local;
        if self.appended_bytes > 0 {
            local.notify_appended();
        }
        // The leader's log start (moved by DeleteRecords or retention), up to what this replica
        // has: records deleted on the leader are gone here too (Kafka's
        // maybeIncrementLogStartOffset), so a failover never brings them back.
        let log_start = self.log_start_offset.min(local.log.log_end_offset());
        if log_start > local.log.log_start_offset() {
            local.delete_records_before(log_start).await.map_err(|error| error.to_string())?;
        }
        // The leader's high watermark, up to what this replica has.
        let high_watermark = self.high_watermark.min(local.log.log_end_offset());
        if high_watermark > local.log.high_watermark() {
            local.log.set_high_watermark(high_watermark);
        }
        Ok(())
    }
}

/// What a follower's fetch reports as durable: what is synced under `flush.policy=always`,
/// else what is appended (the policy accepts that window, as on a leader).
fn durable_end<S: Storage>(local: &Partition<S>) -> i64 {
    if local.log.config().flush == shard::FlushPolicy::Always {
        local.log.durable_end_offset()
    } else {
        local.log.log_end_offset()
    }
}

/// Makes what was appended to `local` durable in the background, one sync task per partition
/// at a time (a running task goes on until it has caught up with the log end).
fn sync_in_background<S: Storage>(
    stream: &Rc<Stream>,
    key: &TopicPartition,
    local: &Rc<Partition<S>>,
) {
    if local.log.config().flush != shard::FlushPolicy::Always
        || !stream.syncing.borrow_mut().insert(key.clone())
    {
        return;
    }
    let (stream, key, local) = (stream.clone(), key.clone(), local.clone());
    shard::runtime::spawn(async move {
        loop {
            let target = local.log.log_end_offset();
            if local.log.durable_end_offset() >= target || local.log.is_offline() {
                break;
            }
            if let Err(error) = local.log.sync_to(target).await {
                tracing::warn!(partition = %key, %error, "follower sync failed");
                break;
            }
        }
        stream.syncing.borrow_mut().remove(&key);
        stream.synced.notify(usize::MAX);
    })
    .detach();
}

/// Adds one partition's fetch state to `request`, under its topic.
fn add_fetch_partition(request: &mut FetchRequest, key: &TopicPartition, state: &FetchState) {
    let mut partition = FetchPartition::default();
    partition.partition = key.partition.0;
    partition.current_leader_epoch = state.leader_epoch;
    partition.fetch_offset = state.fetch_offset;
    partition.last_fetched_epoch = state.last_fetched_epoch;
    partition.log_start_offset = state.log_start_offset;
    partition.partition_max_bytes = REPLICA_FETCH_PARTITION_BYTES;
    partition.unknown_tagged_fields.insert(
        wire::strata_tags::DURABLE_END_TAG,
        wire::strata_tags::encode_i64(state.durable_end),
    );
    let name = key.topic.as_str();
    match request.topics.iter_mut().find(|topic| topic.topic.0.as_str() == name) {
        Some(topic) => topic.partitions.push(partition),
        None => {
            let mut topic = FetchTopic::default();
            topic.topic = TopicName(StrBytes::from_string(name.to_string()));
            topic.partitions.push(partition);
            request.topics.push(topic);
        }
    }
}

/// Adds a partition the leader's session is to forget to `request`, under its topic.
fn add_forgotten_partition(request: &mut FetchRequest, key: &TopicPartition) {
    let name = key.topic.as_str();
    match request.forgotten_topics_data.iter_mut().find(|t| t.topic.0.as_str() == name) {
        Some(topic) => topic.partitions.push(key.partition.0),
        None => {
            let mut topic = ForgottenTopic::default();
            topic.topic = TopicName(StrBytes::from_string(name.to_string()));
            topic.partitions.push(key.partition.0);
            request.forgotten_topics_data.push(topic);
        }
    }
}

/// Waits until the stream's running syncs have ended, at most `PEER_TIMEOUT`.
async fn wait_for_syncs(stream: &Stream) {
    let all_synced = async {
        loop {
            let listener = stream.synced.listen();
            if stream.syncing.borrow().is_empty() {
                return;
            }
            listener.await;
        }
    };
    futures_lite::future::or(all_synced, shard::runtime::sleep(PEER_TIMEOUT)).await;
}

/// The record batches of a fetched partition with their base offsets (whole batches only: a
/// trailing partial one, which a leader does not send, is dropped).
fn batches_of(records: Bytes) -> Result<Vec<(i64, Bytes)>, String> {
    let mut batches = Vec::new();
    let mut rest = records;
    while rest.len() >= wire::BATCH_HEADER_BYTES {
        let peek = wire::record_batch::peek_batch(&rest, shard::config::BATCH_BYTES_MAX)
            .map_err(|error| error.to_string())?;
        if peek.size_bytes > rest.len() {
            break;
        }
        batches.push((peek.base_offset, rest.split_to(peek.size_bytes)));
    }
    Ok(batches)
}

async fn connect(host: &str, port: u16) -> Result<PeerStream, String> {
    crate::peer::connect(host, port, PEER_TIMEOUT, "strata-replica").await
}

/// Sends one Fetch and reads its answer (bounded in size and time).
async fn call(
    socket: &mut PeerStream,
    correlation_id: i32,
    request: FetchRequest,
) -> Result<kafka_protocol::messages::FetchResponse, String> {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(REPLICA_FETCH_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("strata-replica")));
    let frame = protocol::encode_request(&header, &RequestKind::Fetch(request))?;
    let exchange = async {
        socket.write_all(&frame).await.map_err(|e| format!("sending a fetch: {e}"))?;
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        socket.read_exact(&mut prefix).await.map_err(|e| format!("reading a fetch answer: {e}"))?;
        let len =
            protocol::frame_len(prefix, REPLICA_RESPONSE_BYTES_MAX).map_err(|e| e.to_string())?;
        let body =
            socket.read_body(len).await.map_err(|e| format!("reading a fetch answer: {e}"))?;
        Ok::<bytes::BytesMut, String>(body)
    };
    let timeout = PEER_TIMEOUT + Duration::from_millis(REPLICA_FETCH_WAIT_MS as u64);
    let body = futures_lite::future::or(exchange, async {
        shard::runtime::sleep(timeout).await;
        Err(format!("no fetch answer within {} ms", timeout.as_millis()))
    })
    .await?;
    let (header, response) =
        protocol::decode_response(ApiKey::Fetch, REPLICA_FETCH_VERSION, body.freeze())
            .map_err(|e| e.to_string())?;
    if header.correlation_id != correlation_id {
        return Err(format!("correlation id {} for {correlation_id}", header.correlation_id));
    }
    match response {
        ResponseKind::Fetch(response) => Ok(response),
        _ => Err("not a fetch answer".into()),
    }
}
