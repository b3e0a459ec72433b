//! Fetch (key 1): reads each partition on its owner shard, returning stored batches unchanged.
//! Honors `max_bytes` (capped at `FETCH_BYTES_MAX`; 0 means one batch), per-partition
//! `partition_max_bytes` (at least one batch is always returned, KIP-74), lists each partition
//! once however often it is asked for, and long polling: when fewer than `min_bytes` are available the request
//! waits, up to `max_wait_ms`, for new appends. Fetch sessions (KIP-227, v7+): epoch 0 makes
//! one, later epochs send and answer only what changed (`services::fetch_sessions`).

use super::error_fields;
use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, NONE};
use crate::metadata::quotas::CONSUMER_BYTE_RATE;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::fetch_sessions::{
    Answered, Context as SessionContext, Opening, PartitionFetch, SessionError,
};
use crate::services::partitions::requests::{Read, ReplicaRead};
use crate::services::partitions::{count_out, ReadResult};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, TopicName};
use shard::io::Storage;
use std::time::{Duration, Instant};
use wire::ids::{NodeId, Offset, TopicPartition};

/// v13+ name topics by id (KIP-516); v15+ carry the follower's id in `replica_state`; v16+
/// answer NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the leader as this broker knows
/// it and its endpoint (KIP-951); v17's replica directory id is not used.
pub const VERSIONS: (i16, i16) = (4, 17);
/// The first version that names topics by id.
pub const TOPIC_ID_VERSION: i16 = 13;
/// The first version with leader hints (KIP-951).
pub const LEADER_HINT_VERSION: i16 = 16;
/// Upper bound on how long a fetch may wait, whatever the client asks.
pub const FETCH_WAIT_MS_MAX: u64 = 30_000;
/// Partitions of one fetch that long-poll for appends (the rest are seen on the re-read).
pub const FETCH_WAIT_PARTITIONS_MAX: usize = 256;
/// The most a fetch answers, whatever it asks (Kafka's `fetch.max.bytes` default, 55 MiB); at
/// most one batch (at most `BATCH_BYTES_MAX`) goes past it, so a response always fits the i32
/// frame length.
pub const FETCH_BYTES_MAX: usize = 55 << 20;
const _: () = assert!(FETCH_BYTES_MAX + shard::config::BATCH_BYTES_MAX < i32::MAX as usize);

struct Wanted {
    partition: TopicPartition,
    fetch: PartitionFetch,
}

/// The partitions a fetch asks for, each once: a partition listed again is one partition, as
/// in Kafka (the first listing's place and offset), so one request cannot make the broker read
/// the same data over and over.
fn wanted_partitions(
    request: &FetchRequest,
    version: i16,
    image: &crate::metadata::MetadataImage,
) -> Vec<Wanted> {
    let mut seen = std::collections::HashSet::new();
    request
        .topics
        .iter()
        .flat_map(|topic| {
            let (name, topic_id, unknown_id) = if version >= TOPIC_ID_VERSION {
                match image.topic_by_id(topic.topic_id.as_bytes()) {
                    Some(known) => (known.name.clone(), topic.topic_id, false),
                    // Answered UNKNOWN_TOPIC_ID under its id (the name is not on the wire).
                    None => {
                        (format!("<unknown topic id {}>", topic.topic_id), topic.topic_id, true)
                    }
                }
            } else {
                (topic.topic.0.to_string(), uuid::Uuid::nil(), false)
            };
            topic.partitions.iter().map(move |partition| Wanted {
                partition: TopicPartition::new(name.clone(), partition.partition),
                fetch: PartitionFetch {
                    offset: partition.fetch_offset,
                    partition_max_bytes: partition.partition_max_bytes.max(0) as usize,
                    current_leader_epoch: partition.current_leader_epoch,
                    last_fetched_epoch: partition.last_fetched_epoch,
                    durable_end: partition
                        .unknown_tagged_fields
                        .get(&wire::strata_tags::DURABLE_END_TAG)
                        .and_then(|value| wire::strata_tags::decode_i64(value)),
                    topic_id,
                    unknown_id,
                },
            })
        })
        .filter(|wanted| seen.insert(wanted.partition.clone()))
        .collect()
}

/// The partitions an incremental fetch drops from its session (v13+ name topics by id; an
/// unknown id names nothing the session can hold but its own "unknown" entries).
fn forgotten_partitions(
    request: &FetchRequest,
    version: i16,
    image: &crate::metadata::MetadataImage,
) -> Vec<TopicPartition> {
    request
        .forgotten_topics_data
        .iter()
        .flat_map(|topic| {
            let name = if version >= TOPIC_ID_VERSION {
                match image.topic_by_id(topic.topic_id.as_bytes()) {
                    Some(known) => known.name.clone(),
                    None => format!("<unknown topic id {}>", topic.topic_id),
                }
            } else {
                topic.topic.0.to_string()
            };
            topic.partitions.iter().map(move |p| TopicPartition::new(name.clone(), *p))
        })
        .collect()
}

/// Who fetches: a consumer (reads below the high watermark) or a follower broker (replica
/// id >= 0: reads to the log end, and its fetch offset counts as its durable end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fetcher {
    Consumer,
    Follower(NodeId),
}

fn fetcher_of(request: &FetchRequest) -> Fetcher {
    let replica = if request.replica_state.replica_id.0 >= 0 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    if replica >= 0 {
        Fetcher::Follower(NodeId(replica))
    } else {
        Fetcher::Consumer
    }
}

/// Whether the fetcher may read `topic`: a consumer needs READ on it, a follower CLUSTER_ACTION
/// on the cluster (Kafka answers an unauthorized follower TOPIC_AUTHORIZATION_FAILED too).
fn may_read<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    fetcher: Fetcher,
    topic: &str,
) -> bool {
    match fetcher {
        Fetcher::Consumer => node.allowed(context, AclOperation::Read, Resource::Topic(topic)),
        Fetcher::Follower(_) => {
            node.allowed(context, AclOperation::ClusterAction, Resource::Cluster)
        }
    }
}

async fn read_one<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    fetcher: Fetcher,
    wanted: &Wanted,
    max_bytes: usize,
    read_committed: bool,
) -> Result<ReadResult, BrokerError> {
    if wanted.fetch.unknown_id {
        return Err(BrokerError::UnknownTopicId(wanted.fetch.topic_id.to_string()));
    }
    if !may_read(node, context, fetcher, &wanted.partition.topic) {
        return Err(BrokerError::TopicAuthorizationFailed(wanted.partition.topic.clone()));
    }
    let (partition, offset) = (wanted.partition.clone(), Offset(wanted.fetch.offset));
    node.check_leader_epoch(&wanted.partition, wanted.fetch.current_leader_epoch)?;
    match fetcher {
        Fetcher::Consumer => {
            let read = Read { partition, offset, max_bytes, read_committed };
            node.partitions.call(&wanted.partition, read).await?
        }
        Fetcher::Follower(replica) => {
            let durable_end = wanted.fetch.durable_end.map_or(offset.0, |end| end.min(offset.0));
            let read = ReplicaRead {
                partition,
                replica,
                offset,
                last_fetched_epoch: wanted.fetch.last_fetched_epoch,
                durable_end: Offset(durable_end),
                max_bytes,
            };
            node.partitions.call(&wanted.partition, read).await?
        }
    }
}

/// Reads every wanted partition once, within the request's byte budget. As in Kafka (KIP-74),
/// only the first batch of the first partition with data may go past a limit (the response's
/// `max_bytes` or its partition's `partition_max_bytes`), so that a batch larger than the
/// limits can still be consumed; after it, a partition whose next batch does not fit what is
/// left answers no records this time (its offsets still go back).
///
/// One partition after another. Reading a window of them at once made a Fetch of 10,000
/// partitions under nofile 4096 3.5x faster (bench/fetch_many.py), but then librdkafka 2.12.1
/// stalled reading 25,000 partitions (BENCHMARKS.md, "Fetch over many partitions").
async fn read_all<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    fetcher: Fetcher,
    wanted: &[Wanted],
    max_bytes: usize,
    read_committed: bool,
) -> (Vec<Result<ReadResult, BrokerError>>, usize) {
    let mut results = Vec::with_capacity(wanted.len());
    let mut total = 0usize;
    for item in wanted {
        let budget = item.fetch.partition_max_bytes.min(max_bytes.saturating_sub(total));
        let result = if budget == 0 && total > 0 {
            Ok(nothing_read())
        } else {
            let mut result =
                read_one(node, context, fetcher, item, budget.max(1), read_committed).await;
            if let Ok(read) = &mut result {
                // The log always answers at least one batch: past the first partition with
                // data, one that does not fit is not sent.
                if total > 0 && read.batches.first().is_some_and(|batch| batch.len() > budget) {
                    read.batches.clear();
                }
                if fetcher == Fetcher::Consumer {
                    // What is sent, as sent (`strata_topic_*_out_total`).
                    count_out(&node.stats, &item.partition.topic, &read.batches);
                }
            }
            result
        };
        if let Ok(read) = &result {
            total += read.batches.iter().map(Bytes::len).sum::<usize>();
        }
        results.push(result);
    }
    (results, total)
}

/// A partition past the response's budget: no records this time, its offsets unknown (-1).
fn nothing_read() -> ReadResult {
    ReadResult {
        batches: Vec::new(),
        high_watermark: Offset(-1),
        last_stable_offset: Offset(-1),
        aborted: None,
        log_start_offset: Offset(-1),
        diverging: None,
    }
}

/// How much a fetch may answer, and how long it may wait for enough.
struct Limits {
    max_bytes: usize,
    min_bytes: usize,
    deadline: Instant,
    read_committed: bool,
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: FetchRequest,
) -> FetchResponse {
    let version = context.api_version;
    let fetcher = fetcher_of(&request);
    let (session, wanted) = match open_session(node, &request, version, fetcher) {
        Ok(opened) => opened,
        Err(error) => {
            return session_refused(node, request.session_id, request.session_epoch, error)
        }
    };
    let limits = limits_of(node, context, &request, fetcher);
    let results = read_until_ready(node, context, fetcher, &wanted, &limits).await;
    // An incremental fetch answers only the partitions with something new.
    let answers: Vec<Answered> = results.iter().map(answered).collect();
    let keys: Vec<TopicPartition> = wanted.iter().map(|item| item.partition.clone()).collect();
    let listed = node.fetch_sessions.borrow_mut().close(session, &keys, &answers);
    let (wanted, results): (Vec<Wanted>, Vec<_>) = wanted
        .into_iter()
        .zip(results)
        .zip(listed)
        .filter_map(|(pair, listed)| listed.then_some(pair))
        .unzip();
    let mut response = respond(node, version, fetcher, &wanted, results);
    response.session_id = session.id();
    if fetcher == Fetcher::Consumer {
        charge_consumer_quota(node, context, &mut response);
    }
    response
}

/// Resolves the request's session metadata: the session and the partitions to read, in order.
fn open_session<S: Storage>(
    node: &Node<S>,
    request: &FetchRequest,
    version: i16,
    fetcher: Fetcher,
) -> Result<(SessionContext, Vec<Wanted>), SessionError> {
    let image = node.metadata();
    let opening = Opening {
        session_id: request.session_id,
        epoch: request.session_epoch,
        follower: fetcher != Fetcher::Consumer,
        uses_topic_ids: version >= TOPIC_ID_VERSION,
        partitions: wanted_partitions(request, version, &image)
            .into_iter()
            .map(|wanted| (wanted.partition, wanted.fetch))
            .collect(),
        forgotten: forgotten_partitions(request, version, &image),
        now_ms: node.clock.now_ms().max(0) as u64,
    };
    let (session, partitions) = node.fetch_sessions.borrow_mut().open(opening)?;
    let wanted = partitions.into_iter().map(|(partition, fetch)| Wanted { partition, fetch });
    Ok((session, wanted.collect()))
}

/// The fetch's limits: its byte budget (the broker's cap and the consumer's quota applied),
/// the bytes worth answering, until when to wait for them, and its isolation.
fn limits_of<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &FetchRequest,
    fetcher: Fetcher,
) -> Limits {
    // 0 is a real limit (one batch, KIP-74), not "unlimited"; the broker caps every fetch.
    let max_bytes = (request.max_bytes.max(0) as usize).min(FETCH_BYTES_MAX);
    // A consumer under a byte-rate quota gets at most half a second of it per fetch (Kafka caps
    // a fetch at the quota's window), so throttles stay short and the rate even.
    let quota_cap = match fetcher {
        Fetcher::Consumer => crate::metadata::quotas::resolve(
            &node.metadata(),
            context.principal.name(),
            context.client_id.as_deref().unwrap_or(""),
            CONSUMER_BYTE_RATE,
        )
        .map(|(quota, _)| (quota / 2.0).max(1.0) as usize),
        Fetcher::Follower(_) => None,
    };
    let max_bytes = quota_cap.map_or(max_bytes, |cap| max_bytes.min(cap));
    let min_bytes = request.min_bytes.max(0) as usize;
    let wait = Duration::from_millis((request.max_wait_ms.max(0) as u64).min(FETCH_WAIT_MS_MAX));
    let deadline = Instant::now() + wait;
    // isolation_level 1 (READ_COMMITTED, v4+): stop at the last stable offset (KIP-98).
    let read_committed = request.isolation_level == 1;
    Limits { max_bytes, min_bytes, deadline, read_committed }
}

/// Reads the wanted partitions until `min_bytes` are there, one answers an error or a
/// diverging epoch, or the deadline passes, long-polling for appends in between.
async fn read_until_ready<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    fetcher: Fetcher,
    wanted: &[Wanted],
    limits: &Limits,
) -> Vec<Result<ReadResult, BrokerError>> {
    let (max_bytes, read_committed) = (limits.max_bytes, limits.read_committed);
    loop {
        let (results, total) =
            read_all(node, context, fetcher, wanted, max_bytes, read_committed).await;
        let now = Instant::now();
        // A follower told where its log diverges truncates before anything else: no wait.
        let any_error = results
            .iter()
            .any(|result| result.as_ref().map_or(true, |read| read.diverging.is_some()));
        if total >= limits.min_bytes || any_error || now >= limits.deadline || wanted.is_empty() {
            return results;
        }
        wait_for_appends(node, fetcher, wanted, &results, limits.deadline - now).await;
    }
}

/// Long poll: every owner waits for an append past what was just seen (the high watermark, so
/// a partial result below min_bytes does not spin), at most the time left; the first to see one
/// wakes us, then everything is read again. The other waits end on their own by the deadline.
async fn wait_for_appends<S: Storage>(
    node: &Node<S>,
    fetcher: Fetcher,
    wanted: &[Wanted],
    results: &[Result<ReadResult, BrokerError>],
    remaining: Duration,
) {
    let remaining_ms = remaining.as_millis().max(1) as u64;
    let waits: Vec<_> = wanted
        .iter()
        .zip(results)
        .take(FETCH_WAIT_PARTITIONS_MAX)
        .map(|(item, result)| {
            let seen = match result {
                Ok(read) if read.high_watermark.0 >= 0 && fetcher == Fetcher::Consumer => {
                    read.high_watermark
                }
                _ => Offset(item.fetch.offset),
            };
            let log_end = fetcher != Fetcher::Consumer;
            Box::pin(node.partitions.wait_for_append(&item.partition, seen, remaining_ms, log_end))
        })
        .collect();
    if !waits.is_empty() {
        let _ = futures_util::future::select_all(waits).await;
    }
}

/// The consumer byte-rate quota (`services::quotas`), charged with the records answered: over
/// it, the answer carries the throttle time and the connection reads nothing more for that long
/// (KIP-219). Followers are not charged (Kafka's replication quotas are separate).
fn charge_consumer_quota<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    response: &mut FetchResponse,
) {
    let bytes: usize = response
        .responses
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .map(|partition| partition.records.as_ref().map_or(0, Bytes::len))
        .sum();
    let client_id = context.client_id.as_deref().unwrap_or("");
    let throttle_ms = node.quotas.record_bytes(
        &node.metadata(),
        CONSUMER_BYTE_RATE,
        context.principal.name(),
        client_id,
        bytes,
    );
    response.throttle_time_ms = throttle_ms;
    context.throttle(throttle_ms);
}

/// What a partition's answer holds, as its session compares it with the last one.
fn answered(result: &Result<ReadResult, BrokerError>) -> Answered {
    match result {
        Ok(read) => Answered {
            // Left out for the byte budget (`read_all`): not read this time.
            skipped: read.high_watermark.0 < 0 && read.batches.is_empty(),
            has_records: !read.batches.is_empty(),
            error: false,
            diverging: read.diverging.is_some(),
            high_watermark: read.high_watermark.0,
            log_start_offset: read.log_start_offset.0,
        },
        Err(_) => Answered {
            skipped: false,
            has_records: false,
            error: true,
            diverging: false,
            high_watermark: -1,
            log_start_offset: -1,
        },
    }
}

/// A request whose session metadata is refused: the error, and no partitions (the fetcher
/// sends a full fetch next).
fn session_refused<S: Storage>(
    node: &Node<S>,
    session_id: i32,
    epoch: i32,
    error: SessionError,
) -> FetchResponse {
    let error = match error {
        SessionError::IdNotFound => BrokerError::FetchSessionIdNotFound(session_id),
        SessionError::InvalidEpoch => BrokerError::InvalidFetchSessionEpoch(epoch),
        SessionError::TopicIdError => BrokerError::FetchSessionTopicIdError(session_id),
    };
    let mut response = FetchResponse::default();
    response.error_code = error_code(&error);
    response.session_id = 0;
    node.stats.count_error(response.error_code);
    response
}

/// The response: each listed partition's answer, under its topic.
fn respond<S: Storage>(
    node: &Node<S>,
    version: i16,
    fetcher: Fetcher,
    wanted: &[Wanted],
    results: Vec<Result<ReadResult, BrokerError>>,
) -> FetchResponse {
    let mut response = FetchResponse::default();
    response.error_code = NONE;
    for (item, result) in wanted.iter().zip(results) {
        let mut partition = PartitionData::default();
        partition.partition_index = item.partition.partition.0;
        partition.preferred_read_replica = BrokerId(-1);
        match result {
            Ok(read) => answer_read(&mut partition, version, read),
            Err(error) => {
                answer_error(node, version, fetcher, &error, &mut partition);
                if version >= LEADER_HINT_VERSION {
                    add_leader_hint(node, &item.partition, &mut partition, &mut response);
                }
            }
        }
        add_to_topic(&mut response, version, item, partition);
    }
    response
}

/// A partition's answer to a read: its offsets, aborted transactions, diverging epoch, records.
fn answer_read(partition: &mut PartitionData, version: i16, read: ReadResult) {
    partition.error_code = NONE;
    partition.high_watermark = read.high_watermark.0;
    partition.last_stable_offset = read.last_stable_offset.0;
    partition.aborted_transactions = read.aborted.map(|aborted| {
        aborted
            .into_iter()
            .map(|(producer_id, first_offset)| {
                let mut txn = AbortedTransaction::default();
                txn.producer_id = ProducerId(producer_id);
                txn.first_offset = first_offset;
                txn
            })
            .collect()
    });
    if version >= 5 {
        partition.log_start_offset = read.log_start_offset.0;
    }
    if let Some((epoch, end_offset)) = read.diverging {
        partition.diverging_epoch.epoch = epoch;
        partition.diverging_epoch.end_offset = end_offset;
    }
    partition.records = Some(concat(read.batches));
}

/// A partition's answer to a failed read: the error's code, counted, and no records.
fn answer_error<S: Storage>(
    node: &Node<S>,
    version: i16,
    fetcher: Fetcher,
    error: &BrokerError,
    partition: &mut PartitionData,
) {
    partition.error_code = error_fields(error).0;
    node.stats.count_error(partition.error_code);
    partition.high_watermark = -1;
    partition.last_stable_offset = -1;
    // Where the log starts, for a follower fetching below it (it starts again there,
    // `services::replication`); consumers get -1, as from Kafka.
    if let BrokerError::Storage(shard::StorageError::OffsetOutOfRange {
        log_start_offset, ..
    }) = error
    {
        if version >= 5 && fetcher != Fetcher::Consumer {
            partition.log_start_offset = *log_start_offset;
        }
    }
    partition.records = Some(Bytes::new());
}

/// The leader as this broker knows it (KIP-951), for an error that names a new one, with its
/// endpoint listed once in the response.
fn add_leader_hint<S: Storage>(
    node: &Node<S>,
    topic_partition: &TopicPartition,
    partition: &mut PartitionData,
    response: &mut FetchResponse,
) {
    if let Some((leader, epoch, endpoint)) = node.leader_hint(topic_partition, partition.error_code)
    {
        partition.current_leader.leader_id = BrokerId(leader.0);
        partition.current_leader.leader_epoch = epoch;
        if let Some(endpoint) = endpoint {
            if !response.node_endpoints.iter().any(|e| e.node_id.0 == leader.0) {
                let mut known = NodeEndpoint::default();
                known.node_id = BrokerId(leader.0);
                known.host = super::str_bytes(&endpoint.host);
                known.port = endpoint.port;
                known.rack = endpoint.rack.as_deref().map(super::str_bytes);
                response.node_endpoints.push(known);
            }
        }
    }
}

/// Adds a partition's answer under its topic (by id from v13), the topic listed once.
fn add_to_topic(
    response: &mut FetchResponse,
    version: i16,
    item: &Wanted,
    partition: PartitionData,
) {
    let topic_name = item.partition.topic.as_str();
    let same = |topic: &&mut FetchableTopicResponse| {
        if version >= TOPIC_ID_VERSION {
            topic.topic_id == item.fetch.topic_id
        } else {
            topic.topic.0.as_str() == topic_name
        }
    };
    match response.responses.iter_mut().find(same) {
        Some(topic) => topic.partitions.push(partition),
        None => {
            let mut topic = FetchableTopicResponse::default();
            topic.topic = TopicName(super::str_bytes(topic_name));
            topic.topic_id = item.fetch.topic_id;
            topic.partitions.push(partition);
            response.responses.push(topic);
        }
    }
}

fn concat(batches: Vec<Bytes>) -> Bytes {
    match batches.len() {
        0 => Bytes::new(),
        1 => batches.into_iter().next().unwrap_or_default(),
        _ => {
            let mut out = BytesMut::with_capacity(batches.iter().map(Bytes::len).sum());
            for batch in batches {
                out.extend_from_slice(&batch);
            }
            out.freeze()
        }
    }
}
