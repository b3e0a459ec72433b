//! Produce (key 0): appends each partition's batches on the shard that owns the partition,
//! concurrently across partitions, with one cross-core message per owner shard.
//!
//! Durability rule: acks=-1 (all) returns once the batches are durable under the topic's flush
//! policy (`always`: group-committed fdatasync; `interval:<ms>`/`never`: in the log); acks=1
//! returns once they are in the log; acks=0 sends no response at all.
//! Versions 3+ only: they carry v2 record batches, the only format strata stores. Internal
//! topics (`__consumer_offsets`) refuse client batches with INVALID_TOPIC_EXCEPTION.

use super::error_fields;
use crate::authorization::{AclOperation, Resource};
use crate::error::{BrokerError, Result, NONE};
use crate::metadata::internal::is_internal;
use crate::metadata::quotas::PRODUCER_BYTE_RATE;
use crate::node::Node;
use crate::request_context::RequestContext;

use crate::services::partitions::{requests, split_batches, AppendResult, Batches};
use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    BrokerId, ProduceRequest, ProduceResponse, TopicName, TransactionalId,
};
use shard::io::Storage;
use shard::runtime::ShardId;
use wire::ids::TopicPartition;

/// v10+ answer NOT_LEADER_OR_FOLLOWER with the leader this broker knows and its endpoint
/// (KIP-951). v11 answers as v10: a failed partition verification that v11 could name
/// TRANSACTION_ABORTABLE is NOT_ENOUGH_REPLICAS (retried) or INVALID_TXN_STATE there too.
pub const VERSIONS: (i16, i16) = (3, 11);
/// The first version with leader hints (KIP-951).
pub const LEADER_HINT_VERSION: i16 = 10;

/// Produce versions before this may not carry zstd batches (KIP-110).
const ZSTD_PRODUCE_VERSION_MIN: i16 = 7;

/// Why `partition` cannot be appended to, before it is routed.
fn refusal(
    partition: &TopicPartition,
    acks: i16,
    version: i16,
    batches: &Batches,
    transactional_id: bool,
) -> Option<BrokerError> {
    if !(-1..=1).contains(&acks) {
        return Some(BrokerError::InvalidRequiredAcks(acks));
    }
    // As Kafka's ProduceRequest.validateRecords, on the (first) batch: zstd needs Produce v7
    // (UNSUPPORTED_COMPRESSION_TYPE). Records that are not batches are answered after the
    // partition's leadership is checked.
    let first = batches.as_ref().ok().and_then(|batches| batches.first()).map(|b| b.header());
    let zstd = first.as_ref().is_some_and(|header| header.compression() == wire::Compression::Zstd);
    let transactional = first.as_ref().is_some_and(|header| header.is_transactional());
    if !transactional_id && transactional {
        return Some(BrokerError::TransactionalBatchWithoutId);
    }
    if version < ZSTD_PRODUCE_VERSION_MIN && zstd {
        return Some(BrokerError::UnsupportedCompression(format!(
            "Produce requests with version {version} are not allowed to use ZStandard compression"
        )));
    }
    // Only the broker writes its internal topics (a forged record would become a group's
    // committed offset after a restart), as in Kafka.
    if is_internal(&partition.topic) {
        return Some(BrokerError::InvalidTopic(format!(
            "{} is internal: clients cannot produce to it",
            partition.topic
        )));
    }
    None
}

/// The longest an acks=all produce waits for its in-sync replicas, whatever it asks.
pub const PRODUCE_TIMEOUT_MS_MAX: u64 = 300_000;

/// One owner shard's part of a request: its partitions' records and their places in the
/// answer.
type Route = (ShardId, Vec<(TopicPartition, Batches)>, Vec<usize>);

/// The request's partitions sorted into one message per owner shard.
struct Routed {
    /// Per partition, in the request's order: refused already (`Some`), or sent (`None`).
    outcomes: Vec<Option<Result<AppendResult>>>,
    routes: Vec<Route>,
    /// A request carrying several partitions' records keeps a slice of each until every
    /// answer is in: then no partition's records become the frame's only slice (when the
    /// others are done), and the log copies them instead of taking over the whole frame for
    /// one small batch (the cache counts the batch, not the frame it would pin).
    frame_guard: Vec<Bytes>,
}

/// The request's partitions, routed: one message per owner shard (started in the request's
/// order, so this connection's next request comes after them in every partition's append
/// order), then the answers in the request's order (of `topic_data`, then `partition_data`).
async fn append_all<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &mut ProduceRequest,
) -> Vec<Result<AppendResult>> {
    let transactional_id = request.transactional_id.as_ref().map(|id| id.0.to_string());
    let Routed { mut outcomes, routes, frame_guard } = route(node, context, request);
    let timeout_ms = u64::try_from(request.timeout_ms).unwrap_or(0).min(PRODUCE_TIMEOUT_MS_MAX);
    let mut calls = Vec::with_capacity(routes.len());
    for (owner, partitions, places) in routes {
        let sync = request.acks == -1;
        let transactional_id = transactional_id.clone();
        let request = requests::Append { partitions, sync, timeout_ms, transactional_id };
        calls.push((node.partitions.start(owner, request).await, places));
    }
    context.admission.admit();
    let answers = futures_util::future::join_all(calls.into_iter().map(|(call, places)| async {
        let answers = match call {
            Ok(call) => call.await,
            Err(error) => Err(error),
        };
        (answers, places)
    }))
    .await;
    drop(frame_guard);
    for (answers, places) in answers {
        // One result per partition sent, in order (`PartitionService::append_all`).
        let results: Vec<Result<AppendResult>> = match answers {
            Ok(results) => results,
            Err(error) => places.iter().map(|_| Err(BrokerError::from(error.clone()))).collect(),
        };
        for (place, result) in places.into_iter().zip(results) {
            if let Some(slot) = outcomes.get_mut(place) {
                *slot = Some(result);
            }
        }
    }
    outcomes.into_iter().map(|outcome| outcome.unwrap_or_else(|| Err(unanswered()))).collect()
}

/// Sorts the request's partitions: refused here (authorization, `refusal`, placement), or
/// taken out of the request into their owner shard's message.
fn route<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &mut ProduceRequest,
) -> Routed {
    let acks = request.acks;
    let mut routed = Routed { outcomes: Vec::new(), routes: Vec::new(), frame_guard: Vec::new() };
    let shared_frame = request
        .topic_data
        .iter()
        .flat_map(|topic| topic.partition_data.iter())
        .filter(|data| data.records.is_some())
        .nth(1)
        .is_some();
    // As Kafka: WRITE on the transactional id for the whole request, then WRITE per topic.
    let id_refused = request.transactional_id.as_ref().is_some_and(|id| {
        !node.allowed(context, AclOperation::Write, Resource::TransactionalId(&id.0))
    });
    let transactional_id = request.transactional_id.as_ref().map(|id| id.0.to_string());
    for topic in &mut request.topic_data {
        let topic_refused = !id_refused
            && !node.allowed(context, AclOperation::Write, Resource::Topic(&topic.name.0));
        for data in &mut topic.partition_data {
            let partition = TopicPartition::new(topic.name.0.to_string(), data.index);
            // Taken, not cloned: see `detach_from_frame`. Split and checked here, once.
            let records = data.records.take().unwrap_or_default();
            if shared_frame {
                routed.frame_guard.push(records.clone());
            }
            let batches = split_batches(records);
            let refused = if id_refused {
                let id = transactional_id.clone();
                Some(BrokerError::TransactionalIdAuthorizationFailed(id.unwrap_or_default()))
            } else if topic_refused {
                Some(BrokerError::TopicAuthorizationFailed(partition.topic.clone()))
            } else {
                let transactional = transactional_id.is_some();
                refusal(&partition, acks, context.api_version, &batches, transactional)
            };
            let owner = match refused {
                Some(error) => Err(error),
                None => node.partitions.owner(&partition),
            };
            match owner {
                Err(error) => routed.outcomes.push(Some(Err(error))),
                Ok(owner) => routed.add(owner, partition, batches),
            }
        }
    }
    routed
}

impl Routed {
    /// Adds one partition's batches to its owner shard's message.
    fn add(&mut self, owner: ShardId, partition: TopicPartition, batches: Batches) {
        let place = self.outcomes.len();
        let index = match self.routes.iter().position(|route| route.0 == owner) {
            Some(index) => index,
            None => {
                self.routes.push((owner, Vec::new(), Vec::new()));
                self.routes.len() - 1
            }
        };
        if let Some(route) = self.routes.get_mut(index) {
            route.1.push((partition, batches));
            route.2.push(place);
        }
        self.outcomes.push(None);
    }
}

/// Leaves the request holding no slice of its frame but the records: names are copied out and
/// unknown tagged fields dropped. When the request carries one partition's records, made of
/// one batch, that batch is then the frame's only slice, and the log takes it over and patches
/// it in place instead of copying it (`CheckedBatch::into_mut`, in `services::partitions::append`):
/// one copy of every byte fewer for such requests, which librdkafka's sticky partitioner
/// sends. Requests with more records keep them shared (`append_all`), so they are copied.
fn detach_from_frame(request: &mut ProduceRequest) {
    request.transactional_id =
        request.transactional_id.take().map(|id| TransactionalId(super::str_bytes(&id.0)));
    request.unknown_tagged_fields.clear();
    for topic in &mut request.topic_data {
        topic.name = TopicName(super::str_bytes(&topic.name.0));
        topic.unknown_tagged_fields.clear();
        for data in &mut topic.partition_data {
            data.unknown_tagged_fields.clear();
        }
    }
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    mut request: ProduceRequest,
) -> Option<ProduceResponse> {
    detach_from_frame(&mut request);
    let acks = request.acks;
    let throttle_ms = charge_quota(node, context, &request);
    let mut outcomes = append_all(node, context, &mut request).await.into_iter();
    // The outcomes follow the request's order: its topics and partitions name them.
    let keys = request
        .topic_data
        .iter()
        .flat_map(|topic| topic.partition_data.iter().map(move |data| (&topic.name, data.index)));
    if acks == 0 {
        // As Kafka: no answer, and on any failure the connection is closed once this request
        // is done, so the producer refreshes its metadata (a leader moved, a topic is gone).
        for ((topic, index), outcome) in keys.zip(outcomes) {
            if let Err(error) = outcome {
                tracing::debug!(topic = %topic.0, partition = index, %error, "acks=0 produce failed");
                context.hang_up.set(true);
            }
        }
        return None;
    }
    let mut response = ProduceResponse::default();
    response.throttle_time_ms = throttle_ms;
    for (topic_name, index) in keys {
        let outcome = outcomes.next().unwrap_or_else(|| Err(unanswered()));
        let partition =
            answer_partition(node, context, &mut response, (topic_name, index), outcome);
        match response.responses.iter_mut().find(|topic| topic.name == *topic_name) {
            Some(topic) => topic.partition_responses.push(partition),
            None => {
                let mut topic = TopicProduceResponse::default();
                topic.name = topic_name.clone();
                topic.partition_responses.push(partition);
                response.responses.push(topic);
            }
        }
    }
    Some(response)
}

/// The producer byte-rate quota (`services::quotas`), charged before the append so that the
/// connection's next request already waits out the throttle (KIP-219); the throttle time goes
/// in the answer, and holds for acks=0 too.
fn charge_quota<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &ProduceRequest,
) -> i32 {
    let bytes: usize = request
        .topic_data
        .iter()
        .flat_map(|topic| topic.partition_data.iter())
        .map(|data| data.records.as_ref().map_or(0, Bytes::len))
        .sum();
    let client_id = context.client_id.as_deref().unwrap_or("");
    let principal = context.principal.name();
    let throttle_ms =
        node.quotas.record_bytes(&node.metadata(), PRODUCER_BYTE_RATE, principal, client_id, bytes);
    context.throttle(throttle_ms);
    throttle_ms
}

/// One partition's answer; a refused one names its leader (KIP-951) in `response`'s
/// endpoints.
fn answer_partition<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    response: &mut ProduceResponse,
    (topic_name, index): (&TopicName, i32),
    outcome: Result<AppendResult>,
) -> PartitionProduceResponse {
    let version = context.api_version;
    let mut partition = PartitionProduceResponse::default();
    partition.index = index;
    partition.log_append_time_ms = -1;
    let error = match outcome {
        Ok(result) => {
            partition.error_code = NONE;
            partition.base_offset = result.base_offset.0;
            if version >= 2 {
                partition.log_append_time_ms = result.log_append_time_ms;
            }
            if version >= 5 {
                partition.log_start_offset = result.log_start_offset.0;
            }
            return partition;
        }
        Err(error) => error,
    };
    let (error_code, message) = error_fields(&error);
    node.stats.count_error(error_code);
    partition.error_code = error_code;
    if version >= 8 {
        partition.error_message = message;
        partition.record_errors = error
            .record_errors()
            .into_iter()
            .map(|(index, message)| {
                let mut record = BatchIndexAndErrorMessage::default();
                record.batch_index = index;
                record.batch_index_error_message = Some(super::str_bytes(&message));
                record
            })
            .collect();
    }
    partition.base_offset = -1;
    if version >= LEADER_HINT_VERSION {
        let key = TopicPartition::new(topic_name.0.to_string(), index);
        add_leader_hint(node, response, &mut partition, &key, error_code);
    }
    partition
}

/// KIP-951: the leader this broker knows for a refused partition, and its endpoint.
fn add_leader_hint<S: Storage>(
    node: &Node<S>,
    response: &mut ProduceResponse,
    partition: &mut PartitionProduceResponse,
    key: &TopicPartition,
    error_code: i16,
) {
    let Some((leader, epoch, endpoint)) = node.leader_hint(key, error_code) else { return };
    partition.current_leader.leader_id = BrokerId(leader.0);
    partition.current_leader.leader_epoch = epoch;
    let Some(endpoint) = endpoint else { return };
    if !response.node_endpoints.iter().any(|e| e.node_id.0 == leader.0) {
        let mut known = NodeEndpoint::default();
        known.node_id = BrokerId(leader.0);
        known.host = super::str_bytes(&endpoint.host);
        known.port = endpoint.port;
        known.rack = endpoint.rack.as_deref().map(super::str_bytes);
        response.node_endpoints.push(known);
    }
}

/// A partition of the request left without a result (an owner shard answered fewer
/// partitions than it was sent: a bug, answered as a server error rather than a panic).
fn unanswered() -> BrokerError {
    BrokerError::MetadataUnavailable("no result for the partition".into())
}
