//! ShareFetch (key 78, KIP-932): a share consumer's fetch from the partitions this broker
//! leads, with acknowledgements of what it fetched before piggybacked on it.
//!
//! The share session (`services::share_sessions`) says which partitions are fetched: epoch 0
//! opens it with the request's partitions (acknowledgements are not allowed then:
//! INVALID_REQUEST), a later epoch adds the request's partitions and drops the forgotten ones,
//! -1 closes it after its acknowledgements (nothing is fetched, and what the member still holds
//! on the session's partitions is released). Each partition's acknowledgements are applied,
//! all or none (AcknowledgeErrorCode), then records are acquired from the group's share
//! partition on the leader's shard (`services::shares`) until `MaxRecords` across the
//! partitions; the response holds the batches with acquired records and the acquired ranges.
//! With nothing acquired, the fetch waits up to `MaxWaitMs` for an append or a release.
//! Authorization as Kafka: READ on the group (else the whole request fails), READ on each topic
//! (else TOPIC_AUTHORIZATION_FAILED for its partitions).
//! References: KIP-932; Kafka `KafkaApis.handleShareFetchRequest`, `SharePartitionManager`.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, NONE};
use crate::metadata::group_config;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::share_sessions::{SessionKey, ShareSession, FINAL_EPOCH, INITIAL_EPOCH};
use crate::services::shares::requests::{ReleaseMember, SharePartitionFetch, WaitForRelease};
use crate::services::shares::state::{AckType, Acquired};
use crate::services::shares::{AckRange, FetchLimits, PartitionAnswer};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareFetchRequest, ShareFetchResponse};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use wire::ids::{Offset, TopicPartition};

pub const VERSIONS: (i16, i16) = (1, 1);

/// A fetch with nothing to give waits at most this long between looks (records released by
/// another member or a lock timeout do not wake it).
const WAIT_SLICE_MS: u64 = 200;
/// ShareFetch's MaxWaitMs is capped here (as Fetch's is by Kafka's request timeout).
const WAIT_MS_MAX: u64 = 30_000;
/// Records one fetch acquires at most when the request sets no MaxRecords.
const RECORDS_DEFAULT: usize = 500;

/// One partition a request names: its topic id, and its acknowledgements.
pub(super) struct Named {
    pub partition: TopicPartition,
    pub topic_id: uuid::Uuid,
    pub acks: Vec<AckRange>,
}

/// A partition's answer in the response.
pub(super) struct Answered {
    pub partition: TopicPartition,
    pub topic_id: uuid::Uuid,
    /// (Kafka code, message) of the partition's error and of its acknowledgements'.
    pub error: Option<(i16, String)>,
    pub ack_error: Option<(i16, String)>,
    /// Whether acknowledgements were sent for it (its AcknowledgeErrorCode is meaningful).
    pub acknowledged: bool,
    pub batches: Vec<Bytes>,
    pub acquired: Vec<Acquired>,
}

/// An error as a response carries it.
pub(super) fn coded(error: &BrokerError) -> (i16, String) {
    (error_code(error), error.to_string())
}

/// The acknowledgement batches of a request partition, checked.
pub(super) fn ack_ranges(
    batches: impl Iterator<Item = (i64, i64, Vec<i8>)>,
) -> Result<Vec<AckRange>, BrokerError> {
    let mut ranges = Vec::new();
    for (first_offset, last_offset, ids) in batches {
        let types = ids
            .iter()
            .map(|id| AckType::from_id(*id))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| BrokerError::InvalidRequest(format!("acknowledge types {ids:?}")))?;
        ranges.push(AckRange { first_offset, last_offset, types });
    }
    Ok(ranges)
}

/// The topic of a topic id, and whether the principal may READ it.
pub(super) fn topic_of<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    topic_id: &uuid::Uuid,
) -> Result<String, BrokerError> {
    let image = node.metadata();
    let topic = image
        .topic_by_id(topic_id.as_bytes())
        .ok_or_else(|| BrokerError::UnknownTopicId(topic_id.to_string()))?;
    if !node.allowed(context, AclOperation::Read, Resource::Topic(&topic.name)) {
        return Err(BrokerError::TopicAuthorizationFailed(topic.name.clone()));
    }
    Ok(topic.name.clone())
}

/// Releases what a member holds on `partitions` (its session ended).
pub(super) async fn release<S: Storage>(
    node: &Node<S>,
    key: &SessionKey,
    partitions: impl Iterator<Item = TopicPartition>,
) {
    let mut by_partition: Vec<TopicPartition> = partitions.collect();
    by_partition.sort();
    for partition in by_partition {
        let request = ReleaseMember {
            group: key.0.clone(),
            member: key.1.clone(),
            partitions: vec![partition.clone()],
        };
        // A partition no longer led here holds nothing of the member's any more.
        let _ = node.shares.call(&partition, request).await;
    }
}

/// Acknowledgements, then (with `fetch`) an acquisition, on one partition (`revalidate`: the
/// first of a new share session).
pub(super) async fn on_partition<S: Storage>(
    node: &Node<S>,
    key: &SessionKey,
    partition: &TopicPartition,
    acks: Vec<AckRange>,
    fetch: Option<FetchLimits>,
    revalidate: bool,
) -> Result<PartitionAnswer, BrokerError> {
    let request = SharePartitionFetch {
        group: key.0.clone(),
        member: key.1.clone(),
        partition: partition.clone(),
        acks,
        fetch,
        revalidate,
    };
    node.shares.call(partition, request).await?
}

/// The group's acquisition lock duration (the response's AcquisitionLockTimeoutMs).
pub(super) fn lock_ms<S: Storage>(node: &Node<S>, group: &str) -> i32 {
    let image = node.metadata();
    let value = group_config::value_of(
        image.group_configs.get(group),
        "share.record.lock.duration.ms",
        &|_| None,
    );
    value.and_then(|v| v.parse().ok()).unwrap_or(30_000)
}

fn failed(error: &BrokerError) -> ShareFetchResponse {
    let mut response = ShareFetchResponse::default();
    response.error_code = error_code(error);
    response.error_message = Some(StrBytes::from_string(error.to_string()));
    response
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ShareFetchRequest,
) -> ShareFetchResponse {
    let group = request.group_id.as_ref().map(|g| g.0.to_string()).unwrap_or_default();
    let member = request.member_id.as_ref().map(|m| m.to_string()).unwrap_or_default();
    if group.is_empty() || member.is_empty() {
        return failed(&BrokerError::InvalidRequest("GroupId and MemberId are required".into()));
    }
    if !node.allowed(context, AclOperation::Read, Resource::Group(&group)) {
        return failed(&BrokerError::GroupAuthorizationFailed(group));
    }
    let key: SessionKey = (group.clone(), member);
    let (named, mut answered) = match named_partitions(node, context, &request) {
        Ok(named) => named,
        Err(error) => return failed(&error),
    };
    let epoch = request.share_session_epoch;
    let (fetching, closing) = match session_step(node, context, &key, &request, &named) {
        Ok(step) => step,
        Err(error) => return failed(&error),
    };
    let fetched = fetch_all(node, &key, &request, named, fetching).await;
    answered.extend(fetched);
    if let Some(session) = closing {
        release(node, &key, session.partitions.into_keys()).await;
    }
    respond(node, &group, answered, epoch == INITIAL_EPOCH)
}

/// The request's partitions with their acknowledgements, and the answers already known
/// (unknown or forbidden topics).
fn named_partitions<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &ShareFetchRequest,
) -> Result<(Vec<Named>, Vec<Answered>), BrokerError> {
    let mut named: Vec<Named> = Vec::new();
    let mut answered: Vec<Answered> = Vec::new();
    for topic in &request.topics {
        let name = topic_of(node, context, &topic.topic_id);
        for partition in &topic.partitions {
            let batches = partition.acknowledgement_batches.iter().map(|batch| {
                (batch.first_offset, batch.last_offset, batch.acknowledge_types.clone())
            });
            let acks = ack_ranges(batches)?;
            match &name {
                Ok(name) => named.push(Named {
                    partition: TopicPartition::new(name.clone(), partition.partition_index),
                    topic_id: topic.topic_id,
                    acks,
                }),
                Err(error) => answered.push(Answered {
                    partition: TopicPartition::new(
                        topic.topic_id.to_string(),
                        partition.partition_index,
                    ),
                    topic_id: topic.topic_id,
                    error: Some(coded(error)),
                    ack_error: None,
                    acknowledged: !acks.is_empty(),
                    batches: Vec::new(),
                    acquired: Vec::new(),
                }),
            }
        }
    }
    Ok((named, answered))
}

/// The share session's step for this request: the partitions to fetch from (the session's),
/// and the session closed by the final epoch.
#[allow(clippy::type_complexity)]
fn session_step<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    key: &SessionKey,
    request: &ShareFetchRequest,
    named: &[Named],
) -> Result<(Vec<(TopicPartition, uuid::Uuid)>, Option<ShareSession>), BrokerError> {
    let listed = || named.iter().map(|n| (n.partition.clone(), n.topic_id)).collect::<Vec<_>>();
    let mut sessions = node.share_sessions.borrow_mut();
    match request.share_session_epoch {
        INITIAL_EPOCH if named.iter().any(|n| !n.acks.is_empty()) => {
            Err(BrokerError::InvalidRequest(
                "acknowledgements in a share fetch that opens a session".into(),
            ))
        }
        INITIAL_EPOCH => {
            sessions.open(key.clone(), context.connection_id, listed())?;
            Ok((listed(), None))
        }
        FINAL_EPOCH => Ok((Vec::new(), Some(sessions.close(key)?))),
        epoch => {
            let forgotten = forgotten(node, context, request);
            let session = sessions.advance(key, epoch, listed(), &forgotten)?;
            Ok((session.partitions.iter().map(|(p, id)| (p.clone(), *id)).collect(), None))
        }
    }
}

/// The request's forgotten partitions (by topic id; unknown ids are ignored).
fn forgotten<S: Storage>(
    node: &Node<S>,
    _context: &RequestContext,
    request: &ShareFetchRequest,
) -> Vec<TopicPartition> {
    let image = node.metadata();
    request
        .forgotten_topics_data
        .iter()
        .filter_map(|topic| {
            let name = image.topic_by_id(topic.topic_id.as_bytes())?.name.clone();
            Some(topic.partitions.iter().map(move |p| TopicPartition::new(name.clone(), *p)))
        })
        .flatten()
        .collect()
}

fn blank(partition: &TopicPartition, topic_id: uuid::Uuid) -> Answered {
    Answered {
        partition: partition.clone(),
        topic_id,
        error: None,
        ack_error: None,
        acknowledged: false,
        batches: Vec::new(),
        acquired: Vec::new(),
    }
}

/// Acknowledgements on every named partition (once), then acquisitions on the session's
/// partitions until MaxRecords, waiting up to MaxWaitMs while nothing is acquired.
async fn fetch_all<S: Storage>(
    node: &Node<S>,
    key: &SessionKey,
    request: &ShareFetchRequest,
    named: Vec<Named>,
    fetching: Vec<(TopicPartition, uuid::Uuid)>,
) -> Vec<Answered> {
    let (mut answers, mut pending_acks) = acknowledge_unfetched(node, key, named, &fetching).await;
    let mut budget = Budget {
        records_max: match request.max_records {
            n if n > 0 => n as usize,
            _ => RECORDS_DEFAULT,
        },
        records: 0,
        // MaxBytes 0 fetches nothing (Kafka: fetchMaxBytes = min(MaxBytes, fetch.max.bytes)).
        bytes_left: (request.max_bytes.max(0) as usize)
            .min(crate::handlers::fetch::FETCH_BYTES_MAX),
    };
    let wait_ms = (request.max_wait_ms.max(0) as u64).min(WAIT_MS_MAX);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    // A new session's first round checks each partition's state against its coordinator's.
    let mut revalidate = request.share_session_epoch == INITIAL_EPOCH;
    // The acknowledgements go out all at once, beside the acquisitions (which go partition by
    // partition, within the budget), so their state writes share the share coordinators'
    // syncs instead of following one another. They are sent first: on each partition's shard
    // they are applied before its acquisition, which can take what they released. A new
    // session's first round keeps them with its acquisitions, after the state check.
    let acks_apart = if revalidate { BTreeMap::new() } else { std::mem::take(&mut pending_acks) };
    let acknowledging = acknowledge_each(node, key, acks_apart);
    let acquiring = async {
        let mut answers = BTreeMap::new();
        loop {
            let mut waits: Vec<(TopicPartition, Option<i64>)> = Vec::new();
            for (partition, topic_id) in &fetching {
                let acks = pending_acks.remove(partition).unwrap_or_default();
                let answer =
                    answers.entry(partition.clone()).or_insert_with(|| blank(partition, *topic_id));
                let step = Step { acks, revalidate };
                if let Some(wait) = fetch_one(node, key, partition, step, &mut budget, answer).await
                {
                    waits.push((partition.clone(), wait));
                }
            }
            revalidate = false;
            let now = Instant::now();
            if budget.records > 0 || now >= deadline || fetching.is_empty() {
                break;
            }
            let slice =
                deadline.saturating_duration_since(now).min(Duration::from_millis(WAIT_SLICE_MS));
            wait_for_any(node, &waits, slice).await;
        }
        answers
    };
    let (acknowledged, acquired) = futures_util::future::join(acknowledging, acquiring).await;
    answers.extend(acquired);
    for (partition, ack_error) in acknowledged {
        let topic_id = fetching.iter().find(|(p, _)| *p == partition).map(|(_, id)| *id);
        let answer = answers
            .entry(partition.clone())
            .or_insert_with(|| blank(&partition, topic_id.unwrap_or_default()));
        answer.acknowledged = true;
        answer.ack_error = ack_error;
    }
    if budget.records > 0 {
        let served = fetching
            .iter()
            .filter(|(p, _)| answers.get(p).is_some_and(|a| !a.acquired.is_empty()))
            .count();
        node.share_sessions.borrow_mut().rotate(key, served);
    }
    answers.into_values().collect()
}

/// What a fetch may still acquire.
struct Budget {
    records_max: usize,
    records: usize,
    bytes_left: usize,
}

/// The acknowledgements of partitions not fetched from now (all of them for the final epoch)
/// are applied at once; those of fetched partitions go with their first acquisition.
async fn acknowledge_unfetched<S: Storage>(
    node: &Node<S>,
    key: &SessionKey,
    named: Vec<Named>,
    fetching: &[(TopicPartition, uuid::Uuid)],
) -> (BTreeMap<TopicPartition, Answered>, BTreeMap<TopicPartition, Vec<AckRange>>) {
    let mut answers: BTreeMap<TopicPartition, Answered> = BTreeMap::new();
    let fetched: std::collections::HashSet<&TopicPartition> =
        fetching.iter().map(|(p, _)| p).collect();
    let mut pending_acks: BTreeMap<TopicPartition, Vec<AckRange>> = BTreeMap::new();
    let mut unfetched = BTreeMap::new();
    for item in named {
        if item.acks.is_empty() {
            continue;
        }
        if fetched.contains(&item.partition) {
            pending_acks.insert(item.partition.clone(), item.acks);
            continue;
        }
        answers.insert(item.partition.clone(), blank(&item.partition, item.topic_id));
        unfetched.insert(item.partition, item.acks);
    }
    for (partition, ack_error) in acknowledge_each(node, key, unfetched).await {
        if let Some(answer) = answers.get_mut(&partition) {
            answer.acknowledged = true;
            answer.ack_error = ack_error;
        }
    }
    (answers, pending_acks)
}

/// Each partition's acknowledgements, all at once (their state writes share the
/// coordinators' syncs); each partition's error, if they were refused.
pub(super) async fn acknowledge_each<S: Storage>(
    node: &Node<S>,
    key: &SessionKey,
    acks: BTreeMap<TopicPartition, Vec<AckRange>>,
) -> Vec<(TopicPartition, Option<(i16, String)>)> {
    let calls = acks.into_iter().map(|(partition, acks)| async move {
        let error = match on_partition(node, key, &partition, acks, None, false).await {
            Ok(done) => done.ack_error.as_ref().map(coded),
            Err(error) => Some(coded(&error)),
        };
        (partition, error)
    });
    futures_util::future::join_all(calls).await
}

/// What one partition's step of a fetch round carries besides the acquisition.
struct Step {
    /// Its acknowledgements (the first round only).
    acks: Vec<AckRange>,
    /// The first round of a new share session.
    revalidate: bool,
}

/// One partition's step of a fetch round: its acknowledgements (the first round only), then
/// an acquisition within the budget. When it acquired nothing, answers what a long poll waits
/// for: `Some(Some(offset))`, an append past the offset (the log holds nothing more to take)
/// or a release; `Some(None)`, a release only (its window is full).
async fn fetch_one<S: Storage>(
    node: &Node<S>,
    key: &SessionKey,
    partition: &TopicPartition,
    step: Step,
    budget: &mut Budget,
    answer: &mut Answered,
) -> Option<Option<i64>> {
    let Step { acks, revalidate } = step;
    let acknowledged = !acks.is_empty();
    let limits =
        (budget.records < budget.records_max && budget.bytes_left > 0).then_some(FetchLimits {
            max_records: budget.records_max - budget.records,
            max_bytes: budget.bytes_left,
        });
    if limits.is_none() && !acknowledged {
        return None;
    }
    answer.acknowledged |= acknowledged;
    match on_partition(node, key, partition, acks, limits, revalidate).await {
        Ok(done) => {
            if acknowledged {
                answer.ack_error = done.ack_error.as_ref().map(coded);
            }
            let nothing = limits.is_some() && done.acquired.is_empty();
            for run in &done.acquired {
                budget.records += (run.last_offset - run.first_offset + 1) as usize;
            }
            budget.bytes_left =
                budget.bytes_left.saturating_sub(done.batches.iter().map(Bytes::len).sum());
            answer.batches.extend(done.batches);
            answer.acquired.extend(done.acquired);
            answer.error = None;
            nothing.then_some(done.wait_offset)
        }
        Err(error) => {
            if acknowledged {
                answer.ack_error = Some(coded(&error));
            }
            answer.error = Some(coded(&error));
            None
        }
    }
}

/// Waits until one of the partitions gets an append past its offset (if it has one), records
/// are released or acknowledged on a shard leading one of them (a full window may have moved
/// on), or `slice` passes.
async fn wait_for_any<S: Storage>(
    node: &Node<S>,
    waits: &[(TopicPartition, Option<i64>)],
    slice: Duration,
) {
    let wait_ms = slice.as_millis() as u64;
    if waits.is_empty() {
        shard::runtime::sleep(slice).await;
        return;
    }
    let appends = waits.iter().filter_map(|(partition, offset)| Some((partition, (*offset)?))).map(
        |(partition, offset)| {
            let wait = node.partitions.wait_for_append(partition, Offset(offset), wait_ms, false);
            Box::pin(wait) as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>
        },
    );
    let mut shards = std::collections::BTreeSet::new();
    let releases = waits
        .iter()
        .filter(|(partition, _)| {
            node.partitions.owner(partition).is_ok_and(|shard| shards.insert(shard.0))
        })
        .map(|(partition, _)| {
            let wait = async move {
                let _ = node.shares.call(partition, WaitForRelease { wait_ms }).await;
            };
            Box::pin(wait) as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>
        })
        .collect::<Vec<_>>();
    futures_util::future::select_all(appends.chain(releases)).await;
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

/// The response: partitions with records, an error or acknowledgements (on a session's first
/// fetch, every partition), under their topics.
fn respond<S: Storage>(
    node: &Node<S>,
    group: &str,
    answered: Vec<Answered>,
    full: bool,
) -> ShareFetchResponse {
    let mut response = ShareFetchResponse::default();
    response.acquisition_lock_timeout_ms = lock_ms(node, group);
    for answer in answered {
        let worth =
            full || !answer.acquired.is_empty() || answer.error.is_some() || answer.acknowledged;
        if !worth {
            continue;
        }
        let mut partition = PartitionData::default();
        partition.partition_index = answer.partition.partition.0;
        if let Some((code, message)) = &answer.error {
            partition.error_code = *code;
            partition.error_message = Some(StrBytes::from_string(message.clone()));
            add_leader_hint(node, &answer.partition, &mut partition, &mut response.node_endpoints);
        }
        if let Some((code, message)) = &answer.ack_error {
            partition.acknowledge_error_code = *code;
            partition.acknowledge_error_message = Some(StrBytes::from_string(message.clone()));
        }
        partition.acquired_records = answer
            .acquired
            .iter()
            .map(|run| {
                let mut acquired = AcquiredRecords::default();
                acquired.first_offset = run.first_offset;
                acquired.last_offset = run.last_offset;
                acquired.delivery_count = run.delivery_count;
                acquired
            })
            .collect();
        partition.records = Some(concat(answer.batches));
        match response.responses.iter_mut().find(|t| t.topic_id == answer.topic_id) {
            Some(topic) => topic.partitions.push(partition),
            None => {
                let mut topic = ShareFetchableTopicResponse::default();
                topic.topic_id = answer.topic_id;
                topic.partitions.push(partition);
                response.responses.push(topic);
            }
        }
    }
    response
}

/// The partition's leader as this broker knows it, for NOT_LEADER_OR_FOLLOWER and the like,
/// with its endpoint listed once.
fn add_leader_hint<S: Storage>(
    node: &Node<S>,
    topic_partition: &TopicPartition,
    partition: &mut PartitionData,
    endpoints: &mut Vec<NodeEndpoint>,
) {
    if partition.error_code == NONE {
        return;
    }
    let Some((leader, epoch, endpoint)) = node.leader_hint(topic_partition, partition.error_code)
    else {
        return;
    };
    partition.current_leader.leader_id = leader.0;
    partition.current_leader.leader_epoch = epoch;
    if let Some(endpoint) = endpoint {
        if !endpoints.iter().any(|e| e.node_id.0 == leader.0) {
            let mut known = NodeEndpoint::default();
            known.node_id = BrokerId(leader.0);
            known.host = super::str_bytes(&endpoint.host);
            known.port = endpoint.port;
            known.rack = endpoint.rack.as_deref().map(super::str_bytes);
            endpoints.push(known);
        }
    }
}
