//! Every Kafka API handler, called in process (`broker::in_process`: one shard on the simulated
//! disk, a manual clock, no sockets) with a decoded request, its whole response compared with
//! the one Kafka's protocol calls for. Fields that are random by design (member ids) are read
//! from the actual response and copied into the expected one before comparing; topic ids and
//! the cluster id are taken from the node's metadata image, so a response that carried another
//! id would fail.
//!
//! Tests marked `#[ignore = "bug: ..."]` state what Kafka answers where strata differs today
//! (`cargo test -p broker --test handlers_in_process -- --ignored` shows them failing).
//! References: Kafka protocol guide, one section per API; Kafka 4.0's group coordinator
//! (`GroupMetadataManager`, `OffsetMetadataManager`) and controller for the behaviour the
//! ignored tests expect.

mod requests;

use broker::config::BrokerConfig;
use broker::in_process::{test_config, InProcess, SIM_DATA_DIR};
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use requests::fetch_request;
use std::time::Duration;
use uuid::Uuid;
use wire::{BatchRecord, RecordBatchBuilder};

/// Calls `$broker` at `$version` and unwraps the response of kind `$kind`.
macro_rules! call {
    ($broker:expr, $version:expr, $request:expr, $kind:ident) => {
        match $broker.call($version, $request).await {
            Some(ResponseKind::$kind(response)) => response,
            other => panic!("expected a {} response, got {other:?}", stringify!($kind)),
        }
    };
}

/// The client id and host of `RequestContext::internal`, which `InProcess::call` uses.
const CLIENT_ID: &str = "strata-internal";
const CLIENT_HOST: &str = "/127.0.0.1";
/// A fixed record timestamp (ListOffsets by time); producer-state tests use the clock instead.
const BASE_TIMESTAMP_MS: i64 = 1_700_000_000_000;
const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 20_000;
const PROTOCOL_TYPE: &str = "consumer";
const PROTOCOL: &str = "range";
/// Kafka's topic-config defaults, as DescribeConfigs and CreateTopics v5+ report them.
/// Kafka 4.0's topic configs, strata's flush.policy and KIP-1191's dead-letter opt-in: (name,
/// default, DescribeConfigs v3+ config type: 1 boolean, 2 string, 3 int, 5 long, 6 double, 7
/// list).
const TOPIC_DEFAULTS: [(&str, &str, i8); 35] = [
    ("cleanup.policy", "delete", 7),
    ("compression.gzip.level", "-1", 3),
    ("compression.lz4.level", "9", 3),
    ("compression.type", "producer", 2),
    ("compression.zstd.level", "3", 3),
    ("delete.retention.ms", "86400000", 5),
    ("errors.deadletterqueue.group.enable", "false", 1),
    ("file.delete.delay.ms", "60000", 5),
    ("flush.messages", "9223372036854775807", 5),
    ("flush.ms", "9223372036854775807", 5),
    ("flush.policy", "always", 2),
    ("follower.replication.throttled.replicas", "", 7),
    ("index.interval.bytes", "4096", 3),
    ("leader.replication.throttled.replicas", "", 7),
    ("local.retention.bytes", "-2", 5),
    ("local.retention.ms", "-2", 5),
    ("max.compaction.lag.ms", "9223372036854775807", 5),
    ("max.message.bytes", "1048588", 3),
    ("message.timestamp.after.max.ms", "3600000", 5),
    ("message.timestamp.before.max.ms", "9223372036854775807", 5),
    ("message.timestamp.type", "CreateTime", 2),
    ("min.cleanable.dirty.ratio", "0.5", 6),
    ("min.compaction.lag.ms", "0", 5),
    ("min.insync.replicas", "1", 3),
    ("preallocate", "false", 1),
    ("remote.log.copy.disable", "false", 1),
    ("remote.log.delete.on.disable", "false", 1),
    ("remote.storage.enable", "false", 1),
    ("retention.bytes", "-1", 5),
    ("retention.ms", "604800000", 5),
    ("segment.bytes", "1073741824", 3),
    ("segment.index.bytes", "10485760", 3),
    ("segment.jitter.ms", "0", 5),
    ("segment.ms", "604800000", 5),
    ("unclean.leader.election.enable", "false", 1),
];
/// ConfigResource types and config sources (Kafka's `ConfigResource.Type`, `ConfigSource`).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
/// A ListOffsets answer for one partition: (error code, timestamp, offset, leader epoch).
type Listed = (i16, i64, i64, i32);
/// An expected error: (code, message), `None` for success.
type Failure<'a> = Option<(i16, &'a str)>;
/// An AlterConfigs resource: (type, name, (key, value) configs).
type AlteredResource<'a> = (i8, &'a str, &'a [(&'a str, &'a str)]);

// ---------------------------------------------------------------------------------------------
// Helpers: names, topics, batches.

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

fn topic(name: &str) -> TopicName {
    TopicName(text(name))
}

fn group(name: &str) -> GroupId {
    GroupId(text(name))
}

/// The topic id the node's metadata image holds for `name`.
fn topic_id_of(broker: &InProcess, name: &str) -> Uuid {
    let image = broker.node.metadata();
    let meta = image.topic(name).unwrap_or_else(|| panic!("{name} exists"));
    Uuid::from_bytes(meta.topic_id)
}

fn cluster_id_of(broker: &InProcess) -> StrBytes {
    text(&broker.node.metadata().cluster_id)
}

fn creatable(
    name: &str,
    partitions: i32,
    replication_factor: i16,
) -> create_topics_request::CreatableTopic {
    let mut topic_request = create_topics_request::CreatableTopic::default();
    topic_request.name = topic(name);
    topic_request.num_partitions = partitions;
    topic_request.replication_factor = replication_factor;
    topic_request
}

/// Creates `name` with `partitions` partitions and checks that it was created.
async fn create_topic(broker: &InProcess, name: &str, partitions: i32) {
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable(name, partitions, -1)];
    let response = call!(broker, 4, request, CreateTopics);
    let mut result = create_topics_response::CreatableTopicResult::default();
    result.name = topic(name);
    result.error_code = 0;
    result.error_message = None;
    let mut expected = CreateTopicsResponse::default();
    expected.topics = vec![result];
    assert_eq!(response, expected, "creating {name}");
}

/// One uncompressed v2 batch holding a record per (value, timestamp delta).
fn batch(base_timestamp_ms: i64, records: &[(&str, i64)]) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(base_timestamp_ms);
    for (value, timestamp_delta) in records {
        builder.push(BatchRecord {
            key: None,
            value: Some(value.as_bytes()),
            timestamp_delta: *timestamp_delta,
        });
    }
    builder.build()
}

/// A batch written by idempotent producer `producer_id` in `epoch`, from `base_sequence`.
fn idempotent_batch(
    producer: (i64, i16),
    base_sequence: i32,
    base_timestamp_ms: i64,
    records: &[(&str, i64)],
) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(base_timestamp_ms);
    builder.producer(producer.0, producer.1, base_sequence);
    for (value, timestamp_delta) in records {
        builder.push(BatchRecord {
            key: None,
            value: Some(value.as_bytes()),
            timestamp_delta: *timestamp_delta,
        });
    }
    builder.build()
}

/// A batch as the log stores and Fetch returns it: the producer's bytes with the base offset
/// the broker assigned and the partition's leader epoch (0) stamped in; both fields lie outside
/// the CRC, so every other byte must be the producer's.
fn stored(produced: &[u8], base_offset: i64) -> Vec<u8> {
    let mut bytes = produced.to_vec();
    bytes[0..8].copy_from_slice(&base_offset.to_be_bytes());
    bytes[12..16].copy_from_slice(&0i32.to_be_bytes());
    bytes
}

/// A produce request with `acks` of (topic, partition, records), grouped by topic in order.
fn produce_request(acks: i16, data: Vec<(&str, i32, Vec<u8>)>) -> ProduceRequest {
    let mut request = ProduceRequest::default();
    request.transactional_id = None;
    request.acks = acks;
    request.timeout_ms = 10_000;
    for (name, index, records) in data {
        let mut partition = produce_request::PartitionProduceData::default();
        partition.index = index;
        partition.records = Some(Bytes::from(records));
        match request.topic_data.iter_mut().find(|t| t.name.0.as_str() == name) {
            Some(topic_data) => topic_data.partition_data.push(partition),
            None => {
                let mut topic_data = produce_request::TopicProduceData::default();
                topic_data.name = topic(name);
                topic_data.partition_data = vec![partition];
                request.topic_data.push(topic_data);
            }
        }
    }
    request
}

fn produced(
    index: i32,
    base_offset: i64,
    log_start_offset: i64,
) -> produce_response::PartitionProduceResponse {
    let mut partition = produce_response::PartitionProduceResponse::default();
    partition.index = index;
    partition.error_code = 0;
    partition.base_offset = base_offset;
    partition.log_append_time_ms = -1;
    partition.log_start_offset = log_start_offset;
    partition.record_errors = vec![];
    partition.error_message = None;
    partition
}

fn produce_failed(
    index: i32,
    error_code: i16,
    error_message: &str,
) -> produce_response::PartitionProduceResponse {
    let mut partition = produce_response::PartitionProduceResponse::default();
    partition.index = index;
    partition.error_code = error_code;
    partition.base_offset = -1;
    partition.log_append_time_ms = -1;
    partition.log_start_offset = -1;
    partition.error_message = Some(text(error_message));
    partition
}

fn produce_response(
    topics: Vec<(&str, Vec<produce_response::PartitionProduceResponse>)>,
) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    response.responses = topics
        .into_iter()
        .map(|(name, partitions)| {
            let mut topic_response = produce_response::TopicProduceResponse::default();
            topic_response.name = topic(name);
            topic_response.partition_responses = partitions;
            topic_response
        })
        .collect();
    response
}

/// Produces `records` to one partition with acks=all and returns the base offset.
async fn produce(broker: &InProcess, name: &str, partition: i32, records: Vec<u8>) -> i64 {
    let request = produce_request(-1, vec![(name, partition, records)]);
    let response = call!(broker, 9, request, Produce);
    let base_offset = response.responses[0].partition_responses[0].base_offset;
    let expected = produce_response(vec![(name, vec![produced(partition, base_offset, 0)])]);
    assert_eq!(response, expected, "producing to {name}-{partition}");
    base_offset
}

/// The topic id the in-process startup image gives `__transaction_state` (the internal
/// topics' id, `[0x5e; 16]`, with its last byte flipped).
const TRANSACTION_STATE_ID: [u8; 16] = {
    let mut id = [0x5e; 16];
    id[15] ^= 0xff;
    id
};

fn fetch_response(name: &str, partition: fetch_response::PartitionData) -> FetchResponse {
    let mut fetched_topic = fetch_response::FetchableTopicResponse::default();
    fetched_topic.topic = topic(name);
    fetched_topic.partitions = vec![partition];
    let mut response = FetchResponse::default();
    response.error_code = 0;
    response.session_id = 0;
    response.responses = vec![fetched_topic];
    response
}

fn fetched(
    index: i32,
    high_watermark: i64,
    log_start_offset: i64,
    records: Vec<u8>,
) -> fetch_response::PartitionData {
    let mut partition = fetch_response::PartitionData::default();
    partition.partition_index = index;
    partition.error_code = 0;
    partition.high_watermark = high_watermark;
    partition.last_stable_offset = high_watermark;
    partition.log_start_offset = log_start_offset;
    partition.preferred_read_replica = BrokerId(-1);
    // read_uncommitted: no aborted-transactions list (null), as Kafka answers.
    partition.aborted_transactions = None;
    partition.records = Some(Bytes::from(records));
    partition
}

fn fetch_failed(index: i32, error_code: i16) -> fetch_response::PartitionData {
    let mut partition = fetch_response::PartitionData::default();
    partition.partition_index = index;
    partition.error_code = error_code;
    partition.high_watermark = -1;
    partition.last_stable_offset = -1;
    partition.log_start_offset = -1;
    partition.preferred_read_replica = BrokerId(-1);
    partition.records = Some(Bytes::new());
    partition
}

fn list_offsets_request(name: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    let mut wanted = list_offsets_request::ListOffsetsPartition::default();
    wanted.partition_index = partition;
    wanted.timestamp = timestamp;
    let mut list_topic = list_offsets_request::ListOffsetsTopic::default();
    list_topic.name = topic(name);
    list_topic.partitions = vec![wanted];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![list_topic];
    request
}

/// (error code, timestamp, offset, leader epoch) of one partition.
fn list_offsets_response(
    name: &str,
    partition: i32,
    (error_code, timestamp, offset, leader_epoch): Listed,
) -> ListOffsetsResponse {
    let mut entry = list_offsets_response::ListOffsetsPartitionResponse::default();
    entry.partition_index = partition;
    entry.error_code = error_code;
    entry.timestamp = timestamp;
    entry.offset = offset;
    entry.leader_epoch = leader_epoch;
    let mut listed = list_offsets_response::ListOffsetsTopicResponse::default();
    listed.name = topic(name);
    listed.partitions = vec![entry];
    let mut response = ListOffsetsResponse::default();
    response.topics = vec![listed];
    response
}

// ---------------------------------------------------------------------------------------------
// Helpers: groups and offsets.

fn join_request(group_name: &str, member_id: &str, metadata: &'static [u8]) -> JoinGroupRequest {
    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = text(PROTOCOL);
    protocol.metadata = Bytes::from_static(metadata);
    let mut request = JoinGroupRequest::default();
    request.group_id = group(group_name);
    request.session_timeout_ms = SESSION_TIMEOUT_MS;
    request.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
    request.member_id = text(member_id);
    request.group_instance_id = None;
    request.protocol_type = text(PROTOCOL_TYPE);
    request.protocols = vec![protocol];
    request
}

/// JoinGroup v4+ without a member id (KIP-394): MEMBER_ID_REQUIRED (79) with a new member id,
/// which this returns. Compared at v5: from v7 Kafka sends a null ProtocolType on errors where
/// strata sends an empty string.
async fn new_member_id(broker: &InProcess, group_name: &str) -> String {
    let response = call!(broker, 5, join_request(group_name, "", b"m"), JoinGroup);
    let member_id = response.member_id.to_string();
    assert!(
        member_id.starts_with(&format!("{CLIENT_ID}-")),
        "Kafka's ids start with the client id"
    );
    let mut expected = JoinGroupResponse::default();
    expected.error_code = 79;
    expected.generation_id = -1;
    expected.protocol_type = None;
    expected.protocol_name = Some(text(""));
    expected.leader = text("");
    expected.member_id = text(&member_id);
    expected.members = vec![];
    assert_eq!(response, expected);
    member_id
}

/// A successful JoinGroup v7 answer; `members` (id, metadata) only for the leader.
fn joined(
    generation: i32,
    member_id: &str,
    leader: &str,
    members: &[(&str, &[u8])],
) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    response.error_code = 0;
    response.generation_id = generation;
    response.protocol_type = Some(text(PROTOCOL_TYPE));
    response.protocol_name = Some(text(PROTOCOL));
    response.leader = text(leader);
    response.skip_assignment = false;
    response.member_id = text(member_id);
    response.members = members
        .iter()
        .map(|(id, metadata)| {
            let mut member = join_group_response::JoinGroupResponseMember::default();
            member.member_id = text(id);
            member.group_instance_id = None;
            member.metadata = Bytes::copy_from_slice(metadata);
            member
        })
        .collect();
    response
}

fn sync_request(
    group_name: &str,
    generation: i32,
    member_id: &str,
    assignments: &[(&str, &'static [u8])],
) -> SyncGroupRequest {
    let mut request = SyncGroupRequest::default();
    request.group_id = group(group_name);
    request.generation_id = generation;
    request.member_id = text(member_id);
    request.protocol_type = Some(text(PROTOCOL_TYPE));
    request.protocol_name = Some(text(PROTOCOL));
    request.assignments = assignments
        .iter()
        .map(|(id, assignment)| {
            let mut entry = sync_group_request::SyncGroupRequestAssignment::default();
            entry.member_id = text(id);
            entry.assignment = Bytes::from_static(assignment);
            entry
        })
        .collect();
    request
}

fn synced(assignment: &[u8]) -> SyncGroupResponse {
    let mut response = SyncGroupResponse::default();
    response.error_code = 0;
    response.protocol_type = Some(text(PROTOCOL_TYPE));
    response.protocol_name = Some(text(PROTOCOL));
    response.assignment = Bytes::copy_from_slice(assignment);
    response
}

/// A group whose only member (returned) joined with `metadata` and got `assignment`: Stable in
/// generation 1.
async fn stable_group(
    broker: &InProcess,
    group_name: &str,
    metadata: &'static [u8],
    assignment: &'static [u8],
) -> String {
    let member = new_member_id(broker, group_name).await;
    let response = call!(broker, 7, join_request(group_name, &member, metadata), JoinGroup);
    assert_eq!(response, joined(1, &member, &member, &[(&member, metadata)]));
    let request = sync_request(group_name, 1, &member, &[(&member, assignment)]);
    assert_eq!(call!(broker, 5, request, SyncGroup), synced(assignment));
    member
}

fn heartbeat_request(group_name: &str, generation: i32, member_id: &str) -> HeartbeatRequest {
    let mut request = HeartbeatRequest::default();
    request.group_id = group(group_name);
    request.generation_id = generation;
    request.member_id = text(member_id);
    request
}

fn heartbeat_answer(error_code: i16) -> HeartbeatResponse {
    let mut response = HeartbeatResponse::default();
    response.error_code = error_code;
    response
}

fn described_member(
    member_id: &str,
    metadata: &[u8],
    assignment: &[u8],
) -> describe_groups_response::DescribedGroupMember {
    let mut member = describe_groups_response::DescribedGroupMember::default();
    member.member_id = text(member_id);
    member.group_instance_id = None;
    member.client_id = text(CLIENT_ID);
    member.client_host = text(CLIENT_HOST);
    member.member_metadata = Bytes::copy_from_slice(metadata);
    member.member_assignment = Bytes::copy_from_slice(assignment);
    member
}

fn described_group(
    group_name: &str,
    state: &str,
    protocol_type: &str,
    protocol: &str,
    members: Vec<describe_groups_response::DescribedGroupMember>,
) -> describe_groups_response::DescribedGroup {
    let mut described = describe_groups_response::DescribedGroup::default();
    described.error_code = 0;
    described.error_message = None;
    described.group_id = group(group_name);
    described.group_state = text(state);
    described.protocol_type = text(protocol_type);
    described.protocol_data = text(protocol);
    described.members = members;
    described
}

fn describe_groups_request(names: &[&str]) -> DescribeGroupsRequest {
    let mut request = DescribeGroupsRequest::default();
    request.groups = names.iter().map(|name| group(name)).collect();
    request
}

fn listed_group(
    group_name: &str,
    protocol_type: &str,
    state: &str,
) -> list_groups_response::ListedGroup {
    let mut listed = list_groups_response::ListedGroup::default();
    listed.group_id = group(group_name);
    listed.protocol_type = text(protocol_type);
    listed.group_state = text(state);
    listed
}

fn list_groups_response(groups: Vec<list_groups_response::ListedGroup>) -> ListGroupsResponse {
    let mut response = ListGroupsResponse::default();
    response.error_code = 0;
    response.groups = groups;
    response
}

/// A standalone OffsetCommit (no member id, generation -1) of (topic, partition, offset,
/// metadata), grouped by topic in order.
fn commit_request(
    group_name: &str,
    offsets: &[(&str, i32, i64, Option<&str>)],
) -> OffsetCommitRequest {
    let mut request = OffsetCommitRequest::default();
    request.group_id = group(group_name);
    request.generation_id_or_member_epoch = -1;
    request.member_id = text("");
    for (name, index, offset, metadata) in offsets {
        let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
        partition.partition_index = *index;
        partition.committed_offset = *offset;
        partition.committed_metadata = metadata.map(text);
        match request.topics.iter_mut().find(|t| t.name.0.as_str() == *name) {
            Some(commit_topic) => commit_topic.partitions.push(partition),
            None => {
                let mut commit_topic = offset_commit_request::OffsetCommitRequestTopic::default();
                commit_topic.name = topic(name);
                commit_topic.partitions = vec![partition];
                request.topics.push(commit_topic);
            }
        }
    }
    request
}

/// The OffsetCommit answer of (topic, partition, error code), grouped by topic in order.
fn commit_response(outcomes: &[(&str, i32, i16)]) -> OffsetCommitResponse {
    let mut response = OffsetCommitResponse::default();
    for (name, index, error_code) in outcomes {
        let mut partition = offset_commit_response::OffsetCommitResponsePartition::default();
        partition.partition_index = *index;
        partition.error_code = *error_code;
        match response.topics.iter_mut().find(|t| t.name.0.as_str() == *name) {
            Some(committed_topic) => committed_topic.partitions.push(partition),
            None => {
                let mut committed_topic =
                    offset_commit_response::OffsetCommitResponseTopic::default();
                committed_topic.name = topic(name);
                committed_topic.partitions = vec![partition];
                response.topics.push(committed_topic);
            }
        }
    }
    response
}

/// Commits offsets standalone and checks that every partition was committed.
async fn commit(broker: &InProcess, group_name: &str, offsets: &[(&str, i32, i64, Option<&str>)]) {
    let response = call!(broker, 8, commit_request(group_name, offsets), OffsetCommit);
    let outcomes: Vec<(&str, i32, i16)> =
        offsets.iter().map(|(name, index, _, _)| (*name, *index, 0)).collect();
    assert_eq!(response, commit_response(&outcomes), "committing for {group_name}");
}

/// OffsetFetch v1-7: `wanted` None asks for every committed partition.
fn offset_fetch_request(group_name: &str, wanted: Option<&[(&str, &[i32])]>) -> OffsetFetchRequest {
    let mut request = OffsetFetchRequest::default();
    request.group_id = group(group_name);
    request.topics = wanted.map(|topics| {
        topics
            .iter()
            .map(|(name, partitions)| {
                let mut fetch_topic = offset_fetch_request::OffsetFetchRequestTopic::default();
                fetch_topic.name = topic(name);
                fetch_topic.partition_indexes = partitions.to_vec();
                fetch_topic
            })
            .collect()
    });
    request
}

/// OffsetFetch v1-7 topics of (topic, partition, committed offset, metadata), grouped by topic.
fn fetched_offsets(
    rows: &[(&str, i32, i64, &str)],
) -> Vec<offset_fetch_response::OffsetFetchResponseTopic> {
    let mut topics: Vec<offset_fetch_response::OffsetFetchResponseTopic> = Vec::new();
    for (name, index, offset, metadata) in rows {
        let mut partition = offset_fetch_response::OffsetFetchResponsePartition::default();
        partition.partition_index = *index;
        partition.committed_offset = *offset;
        partition.committed_leader_epoch = -1;
        partition.metadata = Some(text(metadata));
        partition.error_code = 0;
        match topics.iter_mut().find(|t| t.name.0.as_str() == *name) {
            Some(fetched_topic) => fetched_topic.partitions.push(partition),
            None => {
                let mut fetched_topic = offset_fetch_response::OffsetFetchResponseTopic::default();
                fetched_topic.name = topic(name);
                fetched_topic.partitions = vec![partition];
                topics.push(fetched_topic);
            }
        }
    }
    topics
}

fn offset_fetch_response(rows: &[(&str, i32, i64, &str)]) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    response.error_code = 0;
    response.topics = fetched_offsets(rows);
    response
}

/// OffsetFetch v8 group of (topic, partition, committed offset, metadata), grouped by topic.
fn fetched_group(
    group_name: &str,
    rows: &[(&str, i32, i64, &str)],
) -> offset_fetch_response::OffsetFetchResponseGroup {
    let mut fetched = offset_fetch_response::OffsetFetchResponseGroup::default();
    fetched.group_id = group(group_name);
    fetched.error_code = 0;
    for (name, index, offset, metadata) in rows {
        let mut partition = offset_fetch_response::OffsetFetchResponsePartitions::default();
        partition.partition_index = *index;
        partition.committed_offset = *offset;
        partition.committed_leader_epoch = -1;
        partition.metadata = Some(text(metadata));
        partition.error_code = 0;
        match fetched.topics.iter_mut().find(|t| t.name.0.as_str() == *name) {
            Some(fetched_topic) => fetched_topic.partitions.push(partition),
            None => {
                let mut fetched_topic = offset_fetch_response::OffsetFetchResponseTopics::default();
                fetched_topic.name = topic(name);
                fetched_topic.partitions = vec![partition];
                fetched.topics.push(fetched_topic);
            }
        }
    }
    fetched
}

fn offset_delete_request(group_name: &str, name: &str, partitions: &[i32]) -> OffsetDeleteRequest {
    let mut delete_topic = offset_delete_request::OffsetDeleteRequestTopic::default();
    delete_topic.name = topic(name);
    delete_topic.partitions = partitions
        .iter()
        .map(|index| {
            let mut partition = offset_delete_request::OffsetDeleteRequestPartition::default();
            partition.partition_index = *index;
            partition
        })
        .collect();
    let mut request = OffsetDeleteRequest::default();
    request.group_id = group(group_name);
    request.topics = vec![delete_topic];
    request
}

// ---------------------------------------------------------------------------------------------
// Helpers: metadata and configs.

fn metadata_request(names: Option<&[&str]>, allow_auto_topic_creation: bool) -> MetadataRequest {
    let mut request = MetadataRequest::default();
    request.topics = names.map(|names| {
        names
            .iter()
            .map(|name| {
                let mut wanted = metadata_request::MetadataRequestTopic::default();
                wanted.name = Some(topic(name));
                wanted
            })
            .collect()
    });
    request.allow_auto_topic_creation = allow_auto_topic_creation;
    request
}

/// `count` partitions led by `node`, its only replica, in `leader_epoch` (-1 before v7).
fn placed_partitions(
    count: i32,
    node: i32,
    leader_epoch: i32,
) -> Vec<metadata_response::MetadataResponsePartition> {
    (0..count)
        .map(|index| {
            let mut partition = metadata_response::MetadataResponsePartition::default();
            partition.error_code = 0;
            partition.partition_index = index;
            partition.leader_id = BrokerId(node);
            partition.leader_epoch = leader_epoch;
            partition.replica_nodes = vec![BrokerId(node)];
            partition.isr_nodes = vec![BrokerId(node)];
            partition.offline_replicas = vec![];
            partition
        })
        .collect()
}

fn metadata_topic(
    name: &str,
    topic_id: Uuid,
    is_internal: bool,
    partitions: Vec<metadata_response::MetadataResponsePartition>,
) -> metadata_response::MetadataResponseTopic {
    let mut described = metadata_response::MetadataResponseTopic::default();
    described.error_code = 0;
    described.name = Some(topic(name));
    described.topic_id = topic_id;
    described.is_internal = is_internal;
    described.partitions = partitions;
    described
}

fn missing_metadata_topic(name: &str, error_code: i16) -> metadata_response::MetadataResponseTopic {
    let mut missing = metadata_topic(name, Uuid::nil(), false, vec![]);
    missing.error_code = error_code;
    missing
}

/// A Metadata answer of this broker (as configured) with `cluster_id` (v2+) and `topics`.
fn metadata_response(
    config: &BrokerConfig,
    cluster_id: Option<StrBytes>,
    topics: Vec<metadata_response::MetadataResponseTopic>,
) -> MetadataResponse {
    let mut node = metadata_response::MetadataResponseBroker::default();
    node.node_id = BrokerId(config.node_id);
    node.host = text(&config.advertise_host);
    node.port = config.advertise_port;
    node.rack = None;
    let mut response = MetadataResponse::default();
    response.brokers = vec![node];
    response.cluster_id = cluster_id;
    response.controller_id = BrokerId(config.node_id);
    response.topics = topics;
    response
}

/// Every topic config with its value and source: the defaults, except `overrides`.
fn topic_configs(
    overrides: &[(&str, &str)],
) -> Vec<describe_configs_response::DescribeConfigsResourceResult> {
    TOPIC_DEFAULTS
        .iter()
        .map(|(name, default, config_type)| {
            let overridden = overrides.iter().find(|(key, _)| key == name);
            let mut config = describe_configs_response::DescribeConfigsResourceResult::default();
            config.name = text(name);
            config.value = Some(text(overridden.map_or(*default, |(_, value)| *value)));
            config.config_source = if overridden.is_some() { SOURCE_TOPIC } else { SOURCE_DEFAULT };
            config.read_only = false;
            config.is_sensitive = false;
            config.config_type = *config_type;
            // Documentation only when the request asks for it (these do not).
            config.documentation = None;
            config
        })
        .collect()
}

fn describe_configs_request(resources: &[(i8, &str, Option<&[&str]>)]) -> DescribeConfigsRequest {
    let mut request = DescribeConfigsRequest::default();
    request.resources = resources
        .iter()
        .map(|(resource_type, name, keys)| {
            let mut resource = describe_configs_request::DescribeConfigsResource::default();
            resource.resource_type = *resource_type;
            resource.resource_name = text(name);
            resource.configuration_keys =
                keys.map(|keys| keys.iter().map(|key| text(key)).collect());
            resource
        })
        .collect();
    request
}

fn described_configs(
    resource_type: i8,
    name: &str,
    configs: Vec<describe_configs_response::DescribeConfigsResourceResult>,
) -> describe_configs_response::DescribeConfigsResult {
    let mut result = describe_configs_response::DescribeConfigsResult::default();
    result.error_code = 0;
    result.resource_type = resource_type;
    result.resource_name = text(name);
    result.configs = configs;
    result
}

/// The configs of topic `name` as DescribeConfigs v4 reports them now.
async fn describe_topic_configs(broker: &InProcess, name: &str) -> DescribeConfigsResponse {
    call!(broker, 4, describe_configs_request(&[(RESOURCE_TOPIC, name, None)]), DescribeConfigs)
}

fn describe_configs_response(
    results: Vec<describe_configs_response::DescribeConfigsResult>,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    response.results = results;
    response
}

fn incremental_request(
    name: &str,
    operations: &[(&str, i8, Option<&str>)],
) -> IncrementalAlterConfigsRequest {
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = RESOURCE_TOPIC;
    resource.resource_name = text(name);
    resource.configs = operations
        .iter()
        .map(|(key, operation, value)| {
            let mut config = incremental_alter_configs_request::AlterableConfig::default();
            config.name = text(key);
            config.config_operation = *operation;
            config.value = value.map(text);
            config
        })
        .collect();
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    request
}

fn incremental_response(name: &str, error: Failure) -> IncrementalAlterConfigsResponse {
    let mut result = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
    result.error_code = error.map_or(0, |(code, _)| code);
    result.error_message = error.map(|(_, message)| text(message));
    result.resource_type = RESOURCE_TOPIC;
    result.resource_name = text(name);
    let mut response = IncrementalAlterConfigsResponse::default();
    response.responses = vec![result];
    response
}

// =============================================================================================
// ApiVersions (key 18)

/// Every API the registry lists, with the range its own handler module declares.
fn registry() -> Vec<(ApiKey, i16, i16)> {
    use broker::handlers::*;
    let ranges = [
        (ApiKey::Produce, produce::VERSIONS),
        (ApiKey::Fetch, fetch::VERSIONS),
        (ApiKey::ListOffsets, list_offsets::VERSIONS),
        (ApiKey::Metadata, metadata::VERSIONS),
        (ApiKey::OffsetCommit, offset_commit::VERSIONS),
        (ApiKey::OffsetFetch, offset_fetch::VERSIONS),
        (ApiKey::FindCoordinator, find_coordinator::VERSIONS),
        (ApiKey::JoinGroup, join_group::VERSIONS),
        (ApiKey::Heartbeat, heartbeat::VERSIONS),
        (ApiKey::ConsumerGroupHeartbeat, consumer_group_heartbeat::VERSIONS),
        (ApiKey::ConsumerGroupDescribe, consumer_group_describe::VERSIONS),
        (ApiKey::ShareGroupHeartbeat, share_group_heartbeat::VERSIONS),
        (ApiKey::ShareGroupDescribe, share_group_describe::VERSIONS),
        (ApiKey::ShareFetch, share_fetch::VERSIONS),
        (ApiKey::ShareAcknowledge, share_acknowledge::VERSIONS),
        (ApiKey::InitializeShareGroupState, initialize_share_group_state::VERSIONS),
        (ApiKey::ReadShareGroupState, read_share_group_state::VERSIONS),
        (ApiKey::ReadShareGroupStateSummary, read_share_group_state_summary::VERSIONS),
        (ApiKey::WriteShareGroupState, write_share_group_state::VERSIONS),
        (ApiKey::DeleteShareGroupState, delete_share_group_state::VERSIONS),
        (ApiKey::DescribeShareGroupOffsets, describe_share_group_offsets::VERSIONS),
        (ApiKey::AlterShareGroupOffsets, alter_share_group_offsets::VERSIONS),
        (ApiKey::DeleteShareGroupOffsets, delete_share_group_offsets::VERSIONS),
        (ApiKey::LeaveGroup, leave_group::VERSIONS),
        (ApiKey::SyncGroup, sync_group::VERSIONS),
        (ApiKey::DescribeGroups, describe_groups::VERSIONS),
        (ApiKey::ListGroups, list_groups::VERSIONS),
        (ApiKey::SaslHandshake, sasl_handshake::VERSIONS),
        (ApiKey::ApiVersions, api_versions::VERSIONS),
        (ApiKey::CreateTopics, create_topics::VERSIONS),
        (ApiKey::DeleteTopics, delete_topics::VERSIONS),
        (ApiKey::DeleteRecords, delete_records::VERSIONS),
        (ApiKey::InitProducerId, init_producer_id::VERSIONS),
        (ApiKey::AddPartitionsToTxn, add_partitions_to_txn::VERSIONS),
        (ApiKey::AddOffsetsToTxn, add_offsets_to_txn::VERSIONS),
        (ApiKey::EndTxn, end_txn::VERSIONS),
        (ApiKey::WriteTxnMarkers, write_txn_markers::VERSIONS),
        (ApiKey::TxnOffsetCommit, txn_offset_commit::VERSIONS),
        (ApiKey::DescribeConfigs, describe_configs::VERSIONS),
        (ApiKey::AlterConfigs, alter_configs::VERSIONS),
        (ApiKey::DescribeLogDirs, describe_log_dirs::VERSIONS),
        (ApiKey::SaslAuthenticate, sasl_authenticate::VERSIONS),
        (ApiKey::CreatePartitions, create_partitions::VERSIONS),
        (ApiKey::DeleteGroups, delete_groups::VERSIONS),
        (ApiKey::IncrementalAlterConfigs, incremental_alter_configs::VERSIONS),
        (ApiKey::OffsetDelete, offset_delete::VERSIONS),
        (ApiKey::DescribeCluster, describe_cluster::VERSIONS),
        (ApiKey::DescribeProducers, describe_producers::VERSIONS),
        (ApiKey::DescribeTransactions, describe_transactions::VERSIONS),
        (ApiKey::ListTransactions, list_transactions::VERSIONS),
        (ApiKey::DescribeQuorum, describe_quorum::VERSIONS),
        (ApiKey::OffsetForLeaderEpoch, offset_for_leader_epoch::VERSIONS),
        (ApiKey::ElectLeaders, elect_leaders::VERSIONS),
        (ApiKey::AlterPartitionReassignments, alter_partition_reassignments::VERSIONS),
        (ApiKey::ListPartitionReassignments, list_partition_reassignments::VERSIONS),
        (ApiKey::DescribeUserScramCredentials, describe_user_scram_credentials::VERSIONS),
        (ApiKey::AlterUserScramCredentials, alter_user_scram_credentials::VERSIONS),
        (ApiKey::DescribeClientQuotas, describe_client_quotas::VERSIONS),
        (ApiKey::AlterClientQuotas, alter_client_quotas::VERSIONS),
        (ApiKey::DescribeAcls, describe_acls::VERSIONS),
        (ApiKey::CreateAcls, create_acls::VERSIONS),
        (ApiKey::DeleteAcls, delete_acls::VERSIONS),
        (ApiKey::Envelope, envelope::VERSIONS),
    ];
    ranges.into_iter().map(|(key, (min, max))| (key, min, max)).collect()
}

fn api_versions_response(supported: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = 0;
    response.api_keys = supported
        .iter()
        .map(|&(key, min, max)| {
            let mut entry = api_versions_response::ApiVersion::default();
            entry.api_key = key as i16;
            entry.min_version = min;
            entry.max_version = max;
            entry
        })
        .collect();
    response
}

/// A produce parses each batch's header once, from the handler to the log: the handler frames
/// it (`wire::FramedBatch`), the owner shard verifies its CRC (`CheckedBatch`), and everything
/// after reads the checked header.
#[test]
fn a_produce_parses_each_batch_header_once() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "once", 3).await;
        let mut two = batch(BASE_TIMESTAMP_MS, &[("a", 0)]);
        two.extend(batch(BASE_TIMESTAMP_MS, &[("b", 0), ("c", 1)]));
        let one = |value| batch(BASE_TIMESTAMP_MS, &[(value, 0)]);
        for acks in [-1, 1] {
            let data = vec![("once", 0, two.clone()), ("once", 1, one("d")), ("once", 2, one("e"))];
            let request = produce_request(acks, data);
            let before = wire::record_batch::header_parses();
            let response = call!(broker, 9, request, Produce);
            let parses = wire::record_batch::header_parses() - before;
            let codes: Vec<i16> = response.responses[0]
                .partition_responses
                .iter()
                .map(|partition| partition.error_code)
                .collect();
            assert_eq!(codes, [0, 0, 0], "acks={acks}");
            assert_eq!(parses, 4, "acks={acks}: four batches, each header parsed once");
        }
    });
}

#[test]
fn api_versions_v0_lists_every_registered_api_with_its_handlers_range_and_no_features() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        assert_eq!(broker::api::SUPPORTED, registry().as_slice(), "63 APIs, each its own range");
        // Envelope is served (between brokers) and not advertised, as Kafka's brokers do.
        let advertised = broker::api::advertised();
        assert_eq!(advertised.len(), 62);
        assert!(!advertised.iter().any(|(key, _, _)| *key == ApiKey::Envelope));
        let response = call!(broker, 0, ApiVersionsRequest::default(), ApiVersions);
        assert_eq!(response, api_versions_response(&advertised));
    });
}

#[test]
fn api_versions_v3_finalizes_metadata_version_7_at_the_metadata_image_version() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let expected_at = |epoch: u64| {
            let mut expected = api_versions_response(&broker::api::advertised());
            let mut supported = api_versions_response::SupportedFeatureKey::default();
            supported.name = text("metadata.version");
            supported.min_version = 7;
            supported.max_version = 7;
            expected.supported_features = vec![supported];
            let mut finalized = api_versions_response::FinalizedFeatureKey::default();
            finalized.name = text("metadata.version");
            finalized.min_version_level = 7;
            finalized.max_version_level = 7;
            expected.finalized_features = vec![finalized];
            expected.finalized_features_epoch = epoch as i64;
            expected
        };
        let version = broker.node.metadata().version;
        let response = call!(broker, 3, ApiVersionsRequest::default(), ApiVersions);
        assert_eq!(response, expected_at(version));
        // A topic of two partitions is three records (the topic and each partition): the epoch
        // follows the image.
        create_topic(&broker, "epoch", 2).await;
        let response = call!(broker, 3, ApiVersionsRequest::default(), ApiVersions);
        assert_eq!(response, expected_at(version + 3));
    });
}

// =============================================================================================
// Metadata (key 3)

#[test]
fn metadata_v12_lists_this_broker_and_every_topic_with_its_partitions_led_here() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.node_id = 7;
        let broker = InProcess::start(config.clone(), 1).await;
        create_topic(&broker, "orders", 3).await;
        let response = call!(broker, 12, metadata_request(None, false), Metadata);
        let expected = metadata_response(
            &config,
            Some(cluster_id_of(&broker)),
            vec![
                metadata_topic(
                    "__consumer_offsets",
                    Uuid::from_bytes([0x5e; 16]),
                    true,
                    placed_partitions(50, 7, 0),
                ),
                metadata_topic(
                    "__transaction_state",
                    Uuid::from_bytes(TRANSACTION_STATE_ID),
                    true,
                    placed_partitions(50, 7, 0),
                ),
                metadata_topic(
                    "orders",
                    topic_id_of(&broker, "orders"),
                    false,
                    placed_partitions(3, 7, 0),
                ),
            ],
        );
        assert_eq!(response, expected);
    });
}

#[test]
fn metadata_v12_answers_topics_asked_for_by_id_and_an_unknown_id_with_unknown_topic_id() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.node_id = 7;
        config.auto_create_topics = true;
        let broker = InProcess::start(config.clone(), 1).await;
        create_topic(&broker, "orders", 2).await;
        let orders = topic_id_of(&broker, "orders");
        let unknown = Uuid::from_bytes([0x42; 16]);
        let mut request = metadata_request(Some(&[]), true);
        for topic_id in [orders, unknown] {
            let mut wanted = metadata_request::MetadataRequestTopic::default();
            wanted.name = None;
            wanted.topic_id = topic_id;
            request.topics.as_mut().expect("topics").push(wanted);
        }
        let response = call!(broker, 12, request, Metadata);
        // Kafka's answer to an unknown id: UNKNOWN_TOPIC_ID (100), no name, the id; and an id
        // is never auto-created.
        let mut missing = metadata_response::MetadataResponseTopic::default();
        missing.error_code = 100;
        missing.name = None;
        missing.topic_id = unknown;
        let expected = metadata_response(
            &config,
            Some(cluster_id_of(&broker)),
            vec![metadata_topic("orders", orders, false, placed_partitions(2, 7, 0)), missing],
        );
        assert_eq!(response, expected);
        assert!(broker.node.metadata().topic_by_id(unknown.as_bytes()).is_none());
    });
}

#[test]
fn metadata_v12_auto_creates_a_requested_topic_with_num_partitions_once() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.auto_create_topics = true;
        config.num_partitions = 3;
        let broker = InProcess::start(config.clone(), 1).await;
        let response = call!(broker, 12, metadata_request(Some(&["fresh"]), true), Metadata);
        let fresh = metadata_topic(
            "fresh",
            topic_id_of(&broker, "fresh"),
            false,
            placed_partitions(3, 0, 0),
        );
        let expected = metadata_response(&config, Some(cluster_id_of(&broker)), vec![fresh]);
        assert_eq!(response, expected);
        // Asked again, the same topic (same id) is described, not created anew.
        let again = call!(broker, 12, metadata_request(Some(&["fresh"]), true), Metadata);
        assert_eq!(again, expected);
    });
}

#[test]
fn metadata_v1_auto_creates_whatever_the_client_flag_says_and_has_no_later_fields() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.auto_create_topics = true;
        config.num_partitions = 2;
        let broker = InProcess::start(config.clone(), 1).await;
        // Before v4 the request has no flag and Kafka always auto-creates.
        let response = call!(broker, 1, metadata_request(Some(&["old-client"]), false), Metadata);
        // v1: no cluster id (v2), no leader epoch (v7), no topic id (v10).
        let created = metadata_topic("old-client", Uuid::nil(), false, placed_partitions(2, 0, -1));
        assert_eq!(response, metadata_response(&config, None, vec![created]));
        assert!(broker.node.metadata().topic("old-client").is_some());
    });
}

#[test]
fn metadata_answers_3_for_a_topic_it_may_not_create_and_17_for_an_invalid_name() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.auto_create_topics = true;
        let broker = InProcess::start(config.clone(), 1).await;
        let response =
            call!(broker, 12, metadata_request(Some(&["missing", "bad/name"]), false), Metadata);
        let expected = metadata_response(
            &config,
            Some(cluster_id_of(&broker)),
            vec![missing_metadata_topic("missing", 3), missing_metadata_topic("bad/name", 17)],
        );
        assert_eq!(response, expected);
        assert!(broker.node.metadata().topic("missing").is_none(), "not created");
        // Allowed to create, a bad name still cannot be.
        let response = call!(broker, 12, metadata_request(Some(&["bad/name"]), true), Metadata);
        let expected = metadata_response(
            &config,
            Some(cluster_id_of(&broker)),
            vec![missing_metadata_topic("bad/name", 17)],
        );
        assert_eq!(response, expected);
    });
}

#[test]
fn metadata_never_creates_topics_when_auto_create_is_disabled() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.auto_create_topics = false;
        let broker = InProcess::start(config.clone(), 1).await;
        let response = call!(broker, 12, metadata_request(Some(&["missing"]), true), Metadata);
        let expected = metadata_response(
            &config,
            Some(cluster_id_of(&broker)),
            vec![missing_metadata_topic("missing", 3)],
        );
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// CreateTopics (key 19)

fn created_configs(
    overrides: &[(&str, &str)],
) -> Vec<create_topics_response::CreatableTopicConfigs> {
    topic_configs(overrides)
        .into_iter()
        .map(|described| {
            let mut config = create_topics_response::CreatableTopicConfigs::default();
            config.name = described.name;
            config.value = described.value;
            config.read_only = false;
            config.config_source = described.config_source;
            config.is_sensitive = false;
            config
        })
        .collect()
}

fn create_failed(
    name: &str,
    error_code: i16,
    message: &str,
) -> create_topics_response::CreatableTopicResult {
    let mut result = create_topics_response::CreatableTopicResult::default();
    result.name = topic(name);
    result.topic_id = Uuid::nil();
    result.error_code = error_code;
    result.error_message = Some(text(message));
    result.num_partitions = -1;
    result.replication_factor = -1;
    result
}

#[test]
fn create_topics_v7_reports_new_topics_in_full_and_refuses_existing_36_bad_count_37_and_rf_38() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.num_partitions = 2;
        let broker = InProcess::start(config, 1).await;
        let mut orders = creatable("orders", 3, 1);
        let mut retention = create_topics_request::CreatableTopicConfig::default();
        retention.name = text("retention.ms");
        retention.value = Some(text("1000"));
        orders.configs = vec![retention];
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![
            orders,
            creatable("defaulted", -1, -1),
            creatable("__consumer_offsets", 1, 1),
            creatable("empty", 0, 1),
            creatable("replicated", 1, 3),
        ];
        let response = call!(broker, 7, request, CreateTopics);
        let created = |name: &str, partitions: i32, overrides: &[(&str, &str)]| {
            let mut result = create_topics_response::CreatableTopicResult::default();
            result.name = topic(name);
            result.topic_id = topic_id_of(&broker, name);
            result.error_code = 0;
            result.error_message = None;
            result.topic_config_error_code = 0;
            result.num_partitions = partitions;
            result.replication_factor = 1;
            result.configs = Some(created_configs(overrides));
            result
        };
        let mut expected = CreateTopicsResponse::default();
        expected.topics = vec![
            created("orders", 3, &[("retention.ms", "1000")]),
            created("defaulted", 2, &[]),
            create_failed("__consumer_offsets", 36, "topic __consumer_offsets already exists"),
            create_failed("empty", 37, "invalid partitions: 0 partitions; must be 1..=10000"),
            create_failed(
                "replicated",
                38,
                "invalid replication factor: Unable to replicate the partition 3 time(s): the \
                 cluster has 1 broker",
            ),
        ];
        assert_eq!(response, expected);
        let image = broker.node.metadata();
        assert!(image.topic("empty").is_none() && image.topic("replicated").is_none());
    });
}

#[test]
fn create_topics_v4_validate_only_answers_success_without_creating_the_topic() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let version = broker.node.metadata().version;
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![creatable("dry-run", 4, 1), creatable("bad/name", 1, 1)];
        request.validate_only = true;
        let response = call!(broker, 4, request, CreateTopics);
        let mut valid = create_topics_response::CreatableTopicResult::default();
        valid.name = topic("dry-run");
        valid.error_code = 0;
        valid.error_message = None;
        let mut expected = CreateTopicsResponse::default();
        expected.topics = vec![
            valid,
            create_failed(
                "bad/name",
                17,
                "invalid topic: topic name \"bad/name\" has characters outside [a-zA-Z0-9._-]",
            ),
        ];
        assert_eq!(response, expected);
        assert!(broker.node.metadata().topic("dry-run").is_none());
        assert_eq!(broker.node.metadata().version, version, "nothing was recorded");
    });
}

#[test]
/// Kafka's controller answers validate_only with the topic it validated: a (never recorded) id,
/// the resolved partition count and replication factor, and the configs.
fn create_topics_v7_validate_only_reports_the_partition_count_and_configs_the_topic_would_get() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.num_partitions = 6;
        let broker = InProcess::start(config, 1).await;
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![creatable("dry-run", -1, -1)];
        request.validate_only = true;
        let response = call!(broker, 7, request, CreateTopics);
        let mut would_be = create_topics_response::CreatableTopicResult::default();
        would_be.name = topic("dry-run");
        // Kafka's controller draws an id for the topic it validated (never recorded).
        would_be.topic_id = response.topics[0].topic_id;
        would_be.error_code = 0;
        would_be.error_message = None;
        would_be.num_partitions = 6;
        would_be.replication_factor = 1;
        would_be.configs = Some(created_configs(&[]));
        let mut expected = CreateTopicsResponse::default();
        expected.topics = vec![would_be];
        assert_eq!(response, expected);
        assert_ne!(response.topics[0].topic_id, Uuid::nil());
    });
}

// =============================================================================================
// DeleteTopics (key 20)

fn deleted(
    name: Option<&str>,
    topic_id: Uuid,
    error: Failure,
) -> delete_topics_response::DeletableTopicResult {
    let mut result = delete_topics_response::DeletableTopicResult::default();
    result.name = name.map(topic);
    result.topic_id = topic_id;
    result.error_code = error.map_or(0, |(code, _)| code);
    result.error_message = error.map(|(_, message)| text(message));
    result
}

fn delete_by_name(name: &str) -> delete_topics_request::DeleteTopicState {
    let mut state = delete_topics_request::DeleteTopicState::default();
    state.name = Some(topic(name));
    state
}

fn delete_by_id(topic_id: Uuid) -> delete_topics_request::DeleteTopicState {
    let mut state = delete_topics_request::DeleteTopicState::default();
    state.name = None;
    state.topic_id = topic_id;
    state
}

#[test]
fn delete_topics_v6_deletes_by_name_and_by_id_and_answers_unknown_topic_3() {
    InProcess::run(|| async {
        let config = test_config();
        let broker = InProcess::start(config.clone(), 1).await;
        create_topic(&broker, "doomed", 2).await;
        create_topic(&broker, "by-id", 1).await;
        let (doomed_id, by_id) = (topic_id_of(&broker, "doomed"), topic_id_of(&broker, "by-id"));
        let mut request = DeleteTopicsRequest::default();
        request.topics =
            vec![delete_by_name("doomed"), delete_by_id(by_id), delete_by_name("ghost")];
        let response = call!(broker, 6, request, DeleteTopics);
        let mut expected = DeleteTopicsResponse::default();
        expected.responses = vec![
            deleted(Some("doomed"), doomed_id, None),
            deleted(Some("by-id"), by_id, None),
            deleted(Some("ghost"), Uuid::nil(), Some((3, "unknown topic or partition ghost"))),
        ];
        assert_eq!(response, expected);
        let response =
            call!(broker, 12, metadata_request(Some(&["doomed", "by-id"]), false), Metadata);
        let gone = vec![missing_metadata_topic("doomed", 3), missing_metadata_topic("by-id", 3)];
        assert_eq!(response, metadata_response(&config, Some(cluster_id_of(&broker)), gone));
    });
}

#[test]
fn delete_topics_v1_deletes_named_topics_without_ids_or_messages() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "old-style", 1).await;
        let mut request = DeleteTopicsRequest::default();
        request.topic_names = vec![topic("old-style"), topic("ghost")];
        let response = call!(broker, 1, request, DeleteTopics);
        let mut expected = DeleteTopicsResponse::default();
        // v1 has neither topic ids (v6) nor error messages (v5).
        let mut ghost = deleted(Some("ghost"), Uuid::nil(), None);
        ghost.error_code = 3;
        expected.responses = vec![deleted(Some("old-style"), Uuid::nil(), None), ghost];
        assert_eq!(response, expected);
        assert!(broker.node.metadata().topic("old-style").is_none());
    });
}

#[test]
/// Kafka (`ControllerApis.deleteTopics`) answers an id it cannot resolve with UNKNOWN_TOPIC_ID, a
/// null name and the id; strata answers 3 for the topic named "" with a nil id.
fn delete_topics_v6_answers_unknown_topic_id_100_with_the_id_for_an_unknown_id() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let unknown = Uuid::from_bytes([7; 16]);
        let mut request = DeleteTopicsRequest::default();
        request.topics = vec![delete_by_id(unknown)];
        let response = call!(broker, 6, request, DeleteTopics);
        let mut expected = DeleteTopicsResponse::default();
        expected.responses = vec![deleted(None, unknown, Some((100, "")))];
        // The message is the server's own text; only its presence is Kafka's.
        expected.responses[0].error_message = response.responses[0].error_message.clone();
        assert_eq!(response, expected);
        assert!(response.responses[0].error_message.is_some());
    });
}

// =============================================================================================
// CreatePartitions (key 37)

fn create_partitions_request(
    changes: &[(&str, i32)],
    validate_only: bool,
) -> CreatePartitionsRequest {
    let mut request = CreatePartitionsRequest::default();
    request.topics = changes
        .iter()
        .map(|(name, count)| {
            let mut change = create_partitions_request::CreatePartitionsTopic::default();
            change.name = topic(name);
            change.count = *count;
            change.assignments = None;
            change
        })
        .collect();
    request.timeout_ms = 10_000;
    request.validate_only = validate_only;
    request
}

fn create_partitions_response(results: &[(&str, Failure)]) -> CreatePartitionsResponse {
    let mut response = CreatePartitionsResponse::default();
    response.results = results
        .iter()
        .map(|(name, error)| {
            let mut result = create_partitions_response::CreatePartitionsTopicResult::default();
            result.name = topic(name);
            result.error_code = error.map_or(0, |(code, _)| code);
            result.error_message = error.map(|(_, message)| text(message));
            result
        })
        .collect();
    response
}

#[test]
fn create_partitions_grows_a_topic_and_refuses_unknown_topics_3_and_counts_that_do_not_grow_37() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "grow", 1).await;
        let response = call!(
            broker,
            3,
            create_partitions_request(&[("grow", 3), ("ghost", 5)], false),
            CreatePartitions
        );
        let expected = create_partitions_response(&[
            ("grow", None),
            ("ghost", Some((3, "unknown topic or partition ghost"))),
        ]);
        assert_eq!(response, expected);
        let response =
            call!(broker, 3, create_partitions_request(&[("grow", 2)], false), CreatePartitions);
        let expected = create_partitions_response(&[(
            "grow",
            Some((
                37,
                "invalid partitions: topic has 3 partitions; the new count 2 must be larger \
                 (and at most 10000)",
            )),
        )]);
        assert_eq!(response, expected);
        // validate_only answers success and changes nothing.
        let response =
            call!(broker, 3, create_partitions_request(&[("grow", 8)], true), CreatePartitions);
        assert_eq!(response, create_partitions_response(&[("grow", None)]));
        assert_eq!(broker.node.metadata().topic("grow").map(|t| t.partition_count()), Some(3));
        // The new partitions are writable at once.
        assert_eq!(produce(&broker, "grow", 2, batch(BASE_TIMESTAMP_MS, &[("v", 0)])).await, 0);
    });
}

// =============================================================================================
// Produce (key 0)

#[test]
fn produce_acks_1_and_acks_all_answer_base_offsets_0_then_the_records_before() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "events", 1).await;
        let three = batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 1), ("c", 2)]);
        let response = call!(broker, 9, produce_request(1, vec![("events", 0, three)]), Produce);
        assert_eq!(response, produce_response(vec![("events", vec![produced(0, 0, 0)])]));
        let two = batch(BASE_TIMESTAMP_MS, &[("d", 0), ("e", 1)]);
        let response = call!(broker, 9, produce_request(-1, vec![("events", 0, two)]), Produce);
        assert_eq!(response, produce_response(vec![("events", vec![produced(0, 3, 0)])]));
        // Before v5 the answer has no log start offset.
        let one = batch(BASE_TIMESTAMP_MS, &[("f", 0)]);
        let response = call!(broker, 4, produce_request(1, vec![("events", 0, one)]), Produce);
        assert_eq!(response, produce_response(vec![("events", vec![produced(0, 5, -1)])]));
    });
}

#[test]
fn produce_acks_0_sends_no_response_and_still_appends() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "fire-and-forget", 1).await;
        let records = batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 1)]);
        let response =
            broker.call(9, produce_request(0, vec![("fire-and-forget", 0, records)])).await;
        assert_eq!(response, None);
        let response =
            call!(broker, 7, list_offsets_request("fire-and-forget", 0, -1), ListOffsets);
        assert_eq!(response, list_offsets_response("fire-and-forget", 0, (0, -1, 2, 0)));
    });
}

#[test]
fn produce_answers_unknown_topic_or_partition_3_per_partition_and_appends_the_rest() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "events", 1).await;
        let records = || batch(BASE_TIMESTAMP_MS, &[("a", 0)]);
        let request = produce_request(
            -1,
            vec![("events", 0, records()), ("events", 5, records()), ("ghost", 0, records())],
        );
        let response = call!(broker, 9, request, Produce);
        let expected = produce_response(vec![
            (
                "events",
                vec![
                    produced(0, 0, 0),
                    produce_failed(5, 3, "unknown topic or partition events-5"),
                ],
            ),
            ("ghost", vec![produce_failed(0, 3, "unknown topic or partition ghost-0")]),
        ]);
        assert_eq!(response, expected);
    });
}

#[test]
fn produce_with_acks_2_answers_invalid_required_acks_21_and_appends_nothing() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "events", 1).await;
        let records = batch(BASE_TIMESTAMP_MS, &[("a", 0)]);
        let response = call!(broker, 9, produce_request(2, vec![("events", 0, records)]), Produce);
        let expected = produce_response(vec![(
            "events",
            vec![produce_failed(0, 21, "invalid required acks 2")],
        )]);
        assert_eq!(response, expected);
        let response = call!(broker, 7, list_offsets_request("events", 0, -1), ListOffsets);
        assert_eq!(response, list_offsets_response("events", 0, (0, -1, 0, 0)));
    });
}

// =============================================================================================
// Fetch (key 1)

#[test]
fn fetch_returns_the_produced_batches_byte_for_byte_with_offsets_and_leader_epoch_stamped() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "events", 1).await;
        let first = batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 1), ("c", 2)]);
        let second = batch(BASE_TIMESTAMP_MS + 10, &[("d", 0), ("e", 5)]);
        assert_eq!(produce(&broker, "events", 0, first.clone()).await, 0);
        assert_eq!(produce(&broker, "events", 0, second.clone()).await, 3);
        let both = [stored(&first, 0), stored(&second, 3)].concat();
        let response = call!(broker, 12, fetch_request("events", 0, 0), Fetch);
        assert_eq!(response, fetch_response("events", fetched(0, 5, 0, both)));
        // From an offset inside the log: the batch holding it onwards.
        let response = call!(broker, 12, fetch_request("events", 0, 3), Fetch);
        assert_eq!(response, fetch_response("events", fetched(0, 5, 0, stored(&second, 3))));
        // v4 has no log start offset (v5).
        let response = call!(broker, 4, fetch_request("events", 0, 3), Fetch);
        assert_eq!(response, fetch_response("events", fetched(0, 5, -1, stored(&second, 3))));
    });
}

#[test]
fn fetch_at_the_log_end_is_empty_and_past_it_answers_offset_out_of_range_1() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "events", 1).await;
        produce(&broker, "events", 0, batch(BASE_TIMESTAMP_MS, &[("a", 0)])).await;
        let response = call!(broker, 12, fetch_request("events", 0, 1), Fetch);
        assert_eq!(response, fetch_response("events", fetched(0, 1, 0, vec![])));
        let response = call!(broker, 12, fetch_request("events", 0, 100), Fetch);
        assert_eq!(response, fetch_response("events", fetch_failed(0, 1)));
        let response = call!(broker, 12, fetch_request("events", 4, 0), Fetch);
        assert_eq!(response, fetch_response("events", fetch_failed(4, 3)));
    });
}

// =============================================================================================
// ListOffsets (key 2)

#[test]
fn list_offsets_answers_earliest_latest_and_the_first_record_at_or_after_a_timestamp() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "timed", 1).await;
        let records = batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 10), ("c", 20)]);
        produce(&broker, "timed", 0, records).await;
        let cases: [(i16, i64, Listed); 7] = [
            // (version, timestamp asked, (error, timestamp, offset, leader epoch) answered)
            (7, -2, (0, -1, 0, 0)),
            (7, -1, (0, -1, 3, 0)),
            (7, BASE_TIMESTAMP_MS + 5, (0, BASE_TIMESTAMP_MS + 10, 1, 0)),
            (7, BASE_TIMESTAMP_MS + 20, (0, BASE_TIMESTAMP_MS + 20, 2, 0)),
            // No record that late: no offset, and no error.
            (7, BASE_TIMESTAMP_MS + 1000, (0, -1, -1, -1)),
            // v1-3 carry no leader epoch (v4).
            (1, -1, (0, -1, 3, -1)),
            (1, BASE_TIMESTAMP_MS + 5, (0, BASE_TIMESTAMP_MS + 10, 1, -1)),
        ];
        for (version, timestamp, answer) in cases {
            let response =
                call!(broker, version, list_offsets_request("timed", 0, timestamp), ListOffsets);
            let expected = list_offsets_response("timed", 0, answer);
            assert_eq!(response, expected, "v{version} at {timestamp}");
        }
        let response = call!(broker, 7, list_offsets_request("timed", 9, -1), ListOffsets);
        assert_eq!(response, list_offsets_response("timed", 9, (3, -1, -1, -1)));
    });
}

#[test]
#[ignore = "bug: v7 is advertised but MAX_TIMESTAMP (-3, KIP-734) is answered INVALID_REQUEST (42)"]
fn list_offsets_v7_answers_max_timestamp_with_the_record_that_holds_the_largest_timestamp() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "timed", 1).await;
        produce(&broker, "timed", 0, batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 30)])).await;
        produce(&broker, "timed", 0, batch(BASE_TIMESTAMP_MS, &[("c", 5), ("d", 10)])).await;
        let response = call!(broker, 7, list_offsets_request("timed", 0, -3), ListOffsets);
        let expected = list_offsets_response("timed", 0, (0, BASE_TIMESTAMP_MS + 30, 1, 0));
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// DeleteRecords (key 21)

fn delete_records_request(name: &str, offsets: &[(i32, i64)]) -> DeleteRecordsRequest {
    let mut delete_topic = delete_records_request::DeleteRecordsTopic::default();
    delete_topic.name = topic(name);
    delete_topic.partitions = offsets
        .iter()
        .map(|(index, offset)| {
            let mut partition = delete_records_request::DeleteRecordsPartition::default();
            partition.partition_index = *index;
            partition.offset = *offset;
            partition
        })
        .collect();
    let mut request = DeleteRecordsRequest::default();
    request.topics = vec![delete_topic];
    request.timeout_ms = 10_000;
    request
}

fn delete_records_response(name: &str, results: &[(i32, i64, i16)]) -> DeleteRecordsResponse {
    let mut deleted_topic = delete_records_response::DeleteRecordsTopicResult::default();
    deleted_topic.name = topic(name);
    deleted_topic.partitions = results
        .iter()
        .map(|(index, low_watermark, error_code)| {
            let mut partition = delete_records_response::DeleteRecordsPartitionResult::default();
            partition.partition_index = *index;
            partition.low_watermark = *low_watermark;
            partition.error_code = *error_code;
            partition
        })
        .collect();
    let mut response = DeleteRecordsResponse::default();
    response.topics = vec![deleted_topic];
    response
}

#[test]
fn delete_records_moves_the_log_start_offset_and_refuses_offsets_past_the_end_with_1() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "trimmed", 2).await;
        produce(&broker, "trimmed", 0, batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 1), ("c", 2)]))
            .await;
        produce(&broker, "trimmed", 1, batch(BASE_TIMESTAMP_MS, &[("d", 0), ("e", 1)])).await;
        // Offset -1 means the high watermark.
        let request = delete_records_request("trimmed", &[(0, 2), (1, -1), (7, 0)]);
        let response = call!(broker, 2, request, DeleteRecords);
        assert_eq!(
            response,
            delete_records_response("trimmed", &[(0, 2, 0), (1, 2, 0), (7, -1, 3)])
        );
        let response =
            call!(broker, 2, delete_records_request("trimmed", &[(0, 10)]), DeleteRecords);
        assert_eq!(response, delete_records_response("trimmed", &[(0, -1, 1)]));
        let response = call!(broker, 7, list_offsets_request("trimmed", 0, -2), ListOffsets);
        assert_eq!(response, list_offsets_response("trimmed", 0, (0, -1, 2, 0)));
        let response = call!(broker, 12, fetch_request("trimmed", 1, 2), Fetch);
        assert_eq!(response, fetch_response("trimmed", fetched(1, 2, 2, vec![])));
    });
}

// =============================================================================================
// DescribeConfigs (key 32)

#[test]
fn describe_configs_reports_topic_overrides_and_defaults_with_their_sources_and_broker_settings() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.node_id = 3;
        config.num_partitions = 4;
        config.auto_create_topics = false;
        config.request_bytes_max = 1 << 20;
        let broker = InProcess::start(config, 1).await;
        let mut request = CreateTopicsRequest::default();
        let mut configured = creatable("configured", 1, 1);
        let mut retention = create_topics_request::CreatableTopicConfig::default();
        retention.name = text("retention.ms");
        retention.value = Some(text("1000"));
        configured.configs = vec![retention];
        request.topics = vec![configured];
        call!(broker, 7, request, CreateTopics);
        let request = describe_configs_request(&[
            (RESOURCE_TOPIC, "configured", None),
            (RESOURCE_TOPIC, "configured", Some(&["retention.ms", "segment.ms", "no.such.key"])),
            (RESOURCE_TOPIC, "ghost", None),
            (
                RESOURCE_BROKER,
                "3",
                Some(&[
                    "broker.id",
                    "node.id",
                    "log.dirs",
                    "num.partitions",
                    "auto.create.topics.enable",
                    "socket.request.max.bytes",
                    "log.retention.ms",
                    "num.io.threads",
                ]),
            ),
        ]);
        let response = call!(broker, 4, request, DescribeConfigs);
        let mut ghost = described_configs(RESOURCE_TOPIC, "ghost", vec![]);
        ghost.error_code = 3;
        ghost.error_message = Some(text("unknown topic or partition ghost"));
        let broker_entry = |name: &str, value: &str| {
            let mut entry = describe_configs_response::DescribeConfigsResourceResult::default();
            entry.name = text(name);
            entry.value = Some(text(value));
            entry.config_source = SOURCE_STATIC_BROKER;
            // Static settings are read-only; a topic default's broker synonym is dynamic.
            entry.read_only = name != "log.retention.ms";
            entry.is_sensitive = false;
            entry
        };
        let overrides = [("retention.ms", "1000")];
        let asked_for: Vec<_> = topic_configs(&overrides)
            .into_iter()
            .filter(|entry| ["retention.ms", "segment.ms"].contains(&entry.name.as_str()))
            .collect();
        let expected = describe_configs_response(vec![
            described_configs(RESOURCE_TOPIC, "configured", topic_configs(&overrides)),
            described_configs(RESOURCE_TOPIC, "configured", asked_for),
            ghost,
            described_configs(
                RESOURCE_BROKER,
                "3",
                // (num.io.threads is a dynamic config that is not set: not listed.)
                vec![
                    broker_entry("broker.id", "3"),
                    broker_entry("node.id", "3"),
                    broker_entry("log.dirs", SIM_DATA_DIR),
                    broker_entry("num.partitions", "4"),
                    broker_entry("auto.create.topics.enable", "false"),
                    broker_entry("socket.request.max.bytes", "1048576"),
                    broker_entry("log.retention.ms", "604800000"),
                ],
            ),
        ]);
        assert_eq!(response, expected);
    });
}

#[test]
/// Kafka (`ConfigHelper.describeConfigs`) describes every config when the key list is null or
/// empty.
fn describe_configs_with_an_empty_key_list_reports_every_config() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "plain", 1).await;
        let request = describe_configs_request(&[(RESOURCE_TOPIC, "plain", Some(&[]))]);
        let response = call!(broker, 4, request, DescribeConfigs);
        let expected = describe_configs_response(vec![described_configs(
            RESOURCE_TOPIC,
            "plain",
            topic_configs(&[]),
        )]);
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// AlterConfigs (key 33)

fn alter_configs_request(
    resources: &[AlteredResource],
    validate_only: bool,
) -> AlterConfigsRequest {
    let mut request = AlterConfigsRequest::default();
    request.resources = resources
        .iter()
        .map(|(resource_type, name, configs)| {
            let mut resource = alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = *resource_type;
            resource.resource_name = text(name);
            resource.configs = configs
                .iter()
                .map(|(key, value)| {
                    let mut config = alter_configs_request::AlterableConfig::default();
                    config.name = text(key);
                    config.value = Some(text(value));
                    config
                })
                .collect();
            resource
        })
        .collect();
    request.validate_only = validate_only;
    request
}

fn alter_configs_response(results: &[(i8, &str, Failure)]) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    response.responses = results
        .iter()
        .map(|(resource_type, name, error)| {
            let mut result = alter_configs_response::AlterConfigsResourceResponse::default();
            result.error_code = error.map_or(0, |(code, _)| code);
            result.error_message = error.map(|(_, message)| text(message));
            result.resource_type = *resource_type;
            result.resource_name = text(name);
            result
        })
        .collect();
    response
}

#[test]
fn alter_configs_replaces_every_override_of_a_topic_and_refuses_bad_values_40_and_brokers_42() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "tuned", 1).await;
        let request = incremental_request("tuned", &[("retention.ms", OP_SET, Some("1000"))]);
        call!(broker, 1, request, IncrementalAlterConfigs);
        // The legacy API replaces the overrides: retention.ms goes back to its default.
        let request =
            alter_configs_request(&[(RESOURCE_TOPIC, "tuned", &[("segment.ms", "5000")])], false);
        let response = call!(broker, 2, request, AlterConfigs);
        assert_eq!(response, alter_configs_response(&[(RESOURCE_TOPIC, "tuned", None)]));
        let expected = describe_configs_response(vec![described_configs(
            RESOURCE_TOPIC,
            "tuned",
            topic_configs(&[("segment.ms", "5000")]),
        )]);
        assert_eq!(describe_topic_configs(&broker, "tuned").await, expected);
        let request = alter_configs_request(
            &[
                (RESOURCE_TOPIC, "tuned", &[("segment.ms", "soon")]),
                (RESOURCE_BROKER, "0", &[("num.partitions", "3")]),
                (RESOURCE_TOPIC, "ghost", &[("segment.ms", "5000")]),
            ],
            false,
        );
        let response = call!(broker, 2, request, AlterConfigs);
        let expected_errors = alter_configs_response(&[
            (
                RESOURCE_TOPIC,
                "tuned",
                Some((40, "invalid config: segment.ms=\"soon\" is not an integer")),
            ),
            (
                RESOURCE_BROKER,
                "0",
                // A static broker config, as Kafka answers it (KAFKA-13609 keeps 42).
                Some((
                    42,
                    "invalid request: Cannot update these configs dynamically: Set(num.partitions)",
                )),
            ),
            (RESOURCE_TOPIC, "ghost", Some((3, "unknown topic or partition ghost"))),
        ]);
        assert_eq!(response, expected_errors);
        // validate_only answers success and changes nothing.
        let request = alter_configs_request(&[(RESOURCE_TOPIC, "tuned", &[])], true);
        let response = call!(broker, 2, request, AlterConfigs);
        assert_eq!(response, alter_configs_response(&[(RESOURCE_TOPIC, "tuned", None)]));
        assert_eq!(describe_topic_configs(&broker, "tuned").await, expected);
    });
}

// =============================================================================================
// IncrementalAlterConfigs (key 44)

#[test]
fn incremental_alter_configs_sets_then_deletes_an_override_and_refuses_append_to_a_scalar_with_40()
{
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "tuned", 1).await;
        let request = incremental_request(
            "tuned",
            &[("retention.ms", OP_SET, Some("5000")), ("segment.bytes", OP_SET, Some("65536"))],
        );
        let response = call!(broker, 1, request, IncrementalAlterConfigs);
        assert_eq!(response, incremental_response("tuned", None));
        let overrides = [("retention.ms", "5000"), ("segment.bytes", "65536")];
        let expected = describe_configs_response(vec![described_configs(
            RESOURCE_TOPIC,
            "tuned",
            topic_configs(&overrides),
        )]);
        assert_eq!(describe_topic_configs(&broker, "tuned").await, expected);
        let request = incremental_request("tuned", &[("retention.ms", OP_DELETE, None)]);
        let response = call!(broker, 1, request, IncrementalAlterConfigs);
        assert_eq!(response, incremental_response("tuned", None));
        let expected = describe_configs_response(vec![described_configs(
            RESOURCE_TOPIC,
            "tuned",
            topic_configs(&[("segment.bytes", "65536")]),
        )]);
        assert_eq!(describe_topic_configs(&broker, "tuned").await, expected);
        let request = incremental_request("tuned", &[("retention.ms", OP_APPEND, Some("1"))]);
        let response = call!(broker, 1, request, IncrementalAlterConfigs);
        let refused =
            (40, "invalid config: retention.ms: operation 2 applies to list configs only");
        assert_eq!(response, incremental_response("tuned", Some(refused)));
        assert_eq!(describe_topic_configs(&broker, "tuned").await, expected, "nothing changed");
    });
}

#[test]
/// `cleanup.policy` is a LIST config in Kafka: APPEND adds to its current (or default) value.
fn incremental_alter_configs_appends_to_the_cleanup_policy_list() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "tuned", 1).await;
        let request =
            incremental_request("tuned", &[("cleanup.policy", OP_APPEND, Some("compact"))]);
        let response = call!(broker, 1, request, IncrementalAlterConfigs);
        assert_eq!(response, incremental_response("tuned", None));
        let expected = describe_configs_response(vec![described_configs(
            RESOURCE_TOPIC,
            "tuned",
            topic_configs(&[("cleanup.policy", "delete,compact")]),
        )]);
        assert_eq!(describe_topic_configs(&broker, "tuned").await, expected);
    });
}

// =============================================================================================
// DescribeCluster (key 60)

#[test]
fn describe_cluster_reports_this_node_as_the_only_broker_and_the_controller() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.node_id = 7;
        let broker = InProcess::start(config.clone(), 1).await;
        let metadata = call!(broker, 12, metadata_request(Some(&[]), false), Metadata);
        for version in [0, 1] {
            let response =
                call!(broker, version, DescribeClusterRequest::default(), DescribeCluster);
            let mut node = describe_cluster_response::DescribeClusterBroker::default();
            node.broker_id = BrokerId(7);
            node.host = text(&config.advertise_host);
            node.port = config.advertise_port;
            node.rack = None;
            node.is_fenced = false;
            let mut expected = DescribeClusterResponse::default();
            expected.error_code = 0;
            expected.error_message = None;
            expected.endpoint_type = 1;
            // The same cluster id as Metadata, from the same image.
            expected.cluster_id = metadata.cluster_id.clone().unwrap_or_default();
            expected.controller_id = BrokerId(7);
            expected.brokers = vec![node];
            assert_eq!(response, expected, "v{version}");
            assert_eq!(response.cluster_id, cluster_id_of(&broker));
        }
    });
}

// =============================================================================================
// FindCoordinator (key 10)

#[test]
fn find_coordinator_v0_to_v3_answers_this_node_for_groups_and_transactional_ids() {
    InProcess::run(|| async {
        let config = test_config();
        let broker = InProcess::start(config.clone(), 1).await;
        for (version, key_type) in [(0, 0), (1, 0), (3, 0), (3, 1)] {
            let mut request = FindCoordinatorRequest::default();
            request.key = text("some-group");
            request.key_type = key_type;
            let response = call!(broker, version, request, FindCoordinator);
            let mut expected = FindCoordinatorResponse::default();
            expected.error_code = 0;
            expected.node_id = BrokerId(config.node_id);
            expected.host = text(&config.advertise_host);
            expected.port = config.advertise_port;
            expected.coordinators = vec![];
            assert_eq!(response, expected, "v{version} key type {key_type}");
        }
    });
}

#[test]
fn find_coordinator_v4_answers_each_key_of_the_batch() {
    InProcess::run(|| async {
        let config = test_config();
        let broker = InProcess::start(config.clone(), 1).await;
        let mut request = FindCoordinatorRequest::default();
        request.key_type = 0;
        request.coordinator_keys = vec![text("group-a"), text("group-b")];
        let response = call!(broker, 4, request, FindCoordinator);
        let coordinator = |key: &str| {
            let mut coordinator = find_coordinator_response::Coordinator::default();
            coordinator.key = text(key);
            coordinator.node_id = BrokerId(config.node_id);
            coordinator.host = text(&config.advertise_host);
            coordinator.port = config.advertise_port;
            coordinator.error_code = 0;
            coordinator
        };
        let mut expected = FindCoordinatorResponse::default();
        expected.coordinators = vec![coordinator("group-a"), coordinator("group-b")];
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// JoinGroup (11), SyncGroup (14), Heartbeat (12), DescribeGroups (15), LeaveGroup (13)

#[test]
fn join_group_asks_for_a_member_id_then_forms_generation_1_and_refuses_unknown_ids_25() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let member = new_member_id(&broker, "g").await;
        // The initial rebalance delay is 0, so an empty group's first join completes at once.
        let response = call!(broker, 7, join_request("g", &member, b"subscription"), JoinGroup);
        assert_eq!(response, joined(1, &member, &member, &[(&member, b"subscription")]));
        // An id the coordinator never handed out is refused.
        let response = call!(broker, 5, join_request("g", "stranger", b"subscription"), JoinGroup);
        let mut expected = JoinGroupResponse::default();
        expected.error_code = 25;
        expected.generation_id = -1;
        expected.protocol_name = Some(text(""));
        expected.leader = text("");
        expected.member_id = text("stranger");
        assert_eq!(response, expected);
    });
}

#[test]
fn join_group_v3_hands_out_the_member_id_with_the_first_generation() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let response = call!(broker, 3, join_request("g", "", b"subscription"), JoinGroup);
        let member = response.member_id.to_string();
        assert!(member.starts_with(&format!("{CLIENT_ID}-")));
        // v3 has neither ProtocolType (v7) nor a MEMBER_ID_REQUIRED round trip (v4).
        let mut expected = joined(1, &member, &member, &[(&member, b"subscription")]);
        expected.protocol_type = None;
        assert_eq!(response, expected);
    });
}

#[test]
fn a_stable_member_syncs_its_assignment_heartbeats_and_is_described_and_listed() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let member = stable_group(&broker, "g", b"subscription", b"assignment").await;
        let response = call!(broker, 4, heartbeat_request("g", 1, &member), Heartbeat);
        assert_eq!(response, heartbeat_answer(0));
        let response = call!(broker, 4, heartbeat_request("g", 2, &member), Heartbeat);
        assert_eq!(response, heartbeat_answer(22), "ILLEGAL_GENERATION");
        let response = call!(broker, 4, heartbeat_request("g", 1, "stranger"), Heartbeat);
        assert_eq!(response, heartbeat_answer(25), "UNKNOWN_MEMBER_ID");
        let response =
            call!(broker, 5, describe_groups_request(&["g", "never-seen"]), DescribeGroups);
        let mut expected = DescribeGroupsResponse::default();
        expected.groups = vec![
            described_group(
                "g",
                "Stable",
                PROTOCOL_TYPE,
                PROTOCOL,
                vec![described_member(&member, b"subscription", b"assignment")],
            ),
            described_group("never-seen", "Dead", "", "", vec![]),
        ];
        assert_eq!(response, expected);
        let response = call!(broker, 4, ListGroupsRequest::default(), ListGroups);
        assert_eq!(
            response,
            list_groups_response(vec![listed_group("g", PROTOCOL_TYPE, "Stable")])
        );
        // Before v4 a listed group has no state.
        let response = call!(broker, 3, ListGroupsRequest::default(), ListGroups);
        assert_eq!(response, list_groups_response(vec![listed_group("g", PROTOCOL_TYPE, "")]));
    });
}

#[test]
fn a_second_member_rebalances_the_group_and_both_sync_the_leaders_assignments() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let leader = stable_group(&broker, "g", b"meta-a", b"a1").await;
        let follower = new_member_id(&broker, "g").await;
        // The follower's join waits for the generation; the leader learns of the rebalance from
        // its heartbeat and rejoins, which completes it for both.
        let (follower_joined, (heartbeat, leader_joined)) = futures_util::future::join(
            async { call!(broker, 7, join_request("g", &follower, b"meta-b"), JoinGroup) },
            async {
                let heartbeat = call!(broker, 4, heartbeat_request("g", 1, &leader), Heartbeat);
                (heartbeat, call!(broker, 7, join_request("g", &leader, b"meta-a"), JoinGroup))
            },
        )
        .await;
        assert_eq!(heartbeat, heartbeat_answer(27), "REBALANCE_IN_PROGRESS");
        let mut everyone = [(leader.as_str(), &b"meta-a"[..]), (follower.as_str(), &b"meta-b"[..])];
        everyone.sort();
        assert_eq!(leader_joined, joined(2, &leader, &leader, &everyone));
        assert_eq!(follower_joined, joined(2, &follower, &leader, &[]));
        // The follower's sync waits for the leader's assignments.
        let assignments: [(&str, &'static [u8]); 2] = [(&leader, b"a2"), (&follower, b"b2")];
        let (follower_synced, leader_synced) = futures_util::future::join(
            async { call!(broker, 5, sync_request("g", 2, &follower, &[]), SyncGroup) },
            async { call!(broker, 5, sync_request("g", 2, &leader, &assignments), SyncGroup) },
        )
        .await;
        assert_eq!((leader_synced, follower_synced), (synced(b"a2"), synced(b"b2")));
        let response = call!(broker, 5, describe_groups_request(&["g"]), DescribeGroups);
        let mut members = vec![
            described_member(&leader, b"meta-a", b"a2"),
            described_member(&follower, b"meta-b", b"b2"),
        ];
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        let mut expected = DescribeGroupsResponse::default();
        expected.groups = vec![described_group("g", "Stable", PROTOCOL_TYPE, PROTOCOL, members)];
        assert_eq!(response, expected);
    });
}

#[test]
fn a_member_that_misses_a_rebalance_is_dropped_once_the_clock_passes_its_timeouts() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let absent = stable_group(&broker, "g", b"meta-a", b"a1").await;
        let newcomer = new_member_id(&broker, "g").await;
        // The absent member never rejoins: when the manual clock passes the rebalance timeout
        // (and its session), the group's timer forms generation 2 without it.
        let (newcomer_joined, ()) = futures_util::future::join(
            async { call!(broker, 7, join_request("g", &newcomer, b"meta-b"), JoinGroup) },
            async { broker.clock.advance(Duration::from_millis(REBALANCE_TIMEOUT_MS as u64 + 1)) },
        )
        .await;
        assert_eq!(newcomer_joined, joined(2, &newcomer, &newcomer, &[(&newcomer, b"meta-b")]));
        let response = call!(broker, 4, heartbeat_request("g", 1, &absent), Heartbeat);
        assert_eq!(response, heartbeat_answer(25), "UNKNOWN_MEMBER_ID");
    });
}

#[test]
fn leave_group_v1_removes_the_member_and_leaves_the_group_empty() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let member = stable_group(&broker, "g", b"subscription", b"assignment").await;
        let mut request = LeaveGroupRequest::default();
        request.group_id = group("g");
        request.member_id = text(&member);
        let response = call!(broker, 1, request.clone(), LeaveGroup);
        let mut expected = LeaveGroupResponse::default();
        expected.error_code = 0;
        expected.members = vec![];
        assert_eq!(response, expected);
        let response = call!(broker, 4, ListGroupsRequest::default(), ListGroups);
        assert_eq!(response, list_groups_response(vec![listed_group("g", PROTOCOL_TYPE, "Empty")]));
        let response = call!(broker, 4, heartbeat_request("g", 1, &member), Heartbeat);
        assert_eq!(response, heartbeat_answer(25));
        // Leaving twice: the member is unknown.
        let response = call!(broker, 1, request, LeaveGroup);
        expected.error_code = 25;
        assert_eq!(response, expected);
    });
}

#[test]
/// Kafka echoes each member identity of the request (a null instance id for a dynamic member),
/// and removes a static member named by its instance id alone (member id "", as
/// `Admin.removeMembersFromConsumerGroup` sends); strata answers instance id "" for every member
/// and UNKNOWN_MEMBER_ID for the static one.
fn leave_group_v4_removes_members_by_id_or_instance_id_and_echoes_each_identity() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let dynamic = stable_group(&broker, "dynamic", b"subscription", b"assignment").await;
        // A static member (KIP-345) joins without the MEMBER_ID_REQUIRED round trip.
        let mut static_join = join_request("static", "", b"subscription");
        static_join.group_instance_id = Some(text("instance-1"));
        let joined_static = call!(broker, 7, static_join, JoinGroup);
        assert_eq!(joined_static.error_code, 0);
        let identity = |member_id: &str, instance: Option<&str>| {
            let mut member = leave_group_request::MemberIdentity::default();
            member.member_id = text(member_id);
            member.group_instance_id = instance.map(text);
            member
        };
        let answer = |member_id: &str, instance: Option<&str>| {
            let mut member = leave_group_response::MemberResponse::default();
            member.member_id = text(member_id);
            member.group_instance_id = instance.map(text);
            member.error_code = 0;
            member
        };
        let mut request = LeaveGroupRequest::default();
        request.group_id = group("dynamic");
        request.members = vec![identity(&dynamic, None)];
        let response = call!(broker, 4, request, LeaveGroup);
        let mut expected = LeaveGroupResponse::default();
        expected.members = vec![answer(&dynamic, None)];
        assert_eq!(response, expected);
        // An administrator removes a static member by its instance id alone.
        let mut request = LeaveGroupRequest::default();
        request.group_id = group("static");
        request.members = vec![identity("", Some("instance-1"))];
        let response = call!(broker, 4, request, LeaveGroup);
        expected.members = vec![answer("", Some("instance-1"))];
        assert_eq!(response, expected);
        let response = call!(broker, 4, ListGroupsRequest::default(), ListGroups);
        let expected = list_groups_response(vec![
            listed_group("dynamic", PROTOCOL_TYPE, "Empty"),
            listed_group("static", PROTOCOL_TYPE, "Empty"),
        ]);
        assert_eq!(response, expected);
    });
}

#[test]
/// DescribeGroupsResponse.json: ProtocolData and MemberMetadata are filled in only when the group
/// is Stable (Kafka's `describeGroups` uses `describeNoMetadata` otherwise).
fn describe_groups_outside_stable_reports_no_protocol_and_no_member_metadata() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let member = new_member_id(&broker, "g").await;
        call!(broker, 7, join_request("g", &member, b"subscription"), JoinGroup);
        // Joined, not yet synced: CompletingRebalance.
        let response = call!(broker, 5, describe_groups_request(&["g"]), DescribeGroups);
        let mut expected = DescribeGroupsResponse::default();
        expected.groups = vec![described_group(
            "g",
            "CompletingRebalance",
            PROTOCOL_TYPE,
            "",
            vec![described_member(&member, b"", b"")],
        )];
        assert_eq!(response, expected);
        let mut request = LeaveGroupRequest::default();
        request.group_id = group("g");
        request.member_id = text(&member);
        call!(broker, 1, request, LeaveGroup);
        let response = call!(broker, 5, describe_groups_request(&["g"]), DescribeGroups);
        expected.groups = vec![described_group("g", "Empty", PROTOCOL_TYPE, "", vec![])];
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// ListGroups (key 16)

#[test]
fn list_groups_v4_lists_every_group_with_its_state_and_filters_by_state() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        stable_group(&broker, "busy", b"subscription", b"assignment").await;
        let left = stable_group(&broker, "quiet", b"subscription", b"assignment").await;
        let mut leave = LeaveGroupRequest::default();
        leave.group_id = group("quiet");
        leave.member_id = text(&left);
        call!(broker, 1, leave, LeaveGroup);
        let response = call!(broker, 4, ListGroupsRequest::default(), ListGroups);
        let expected = list_groups_response(vec![
            listed_group("busy", PROTOCOL_TYPE, "Stable"),
            listed_group("quiet", PROTOCOL_TYPE, "Empty"),
        ]);
        assert_eq!(response, expected);
        let mut request = ListGroupsRequest::default();
        request.states_filter = vec![text("empty")];
        let response = call!(broker, 4, request, ListGroups);
        assert_eq!(
            response,
            list_groups_response(vec![listed_group("quiet", PROTOCOL_TYPE, "Empty")])
        );
    });
}

#[test]
/// Kafka lists each group's own protocol type (`ClassicGroup.asListedGroup`): "connect" for
/// Connect workers, "" for a group created by a standalone offset commit.
fn list_groups_reports_each_groups_own_protocol_type() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 1).await;
        let member = new_member_id(&broker, "workers").await;
        let mut connect_join = join_request("workers", &member, b"worker");
        connect_join.protocol_type = text("connect");
        call!(broker, 7, connect_join, JoinGroup);
        commit(&broker, "offsets-only", &[("t", 0, 1, None)]).await;
        let response = call!(broker, 4, ListGroupsRequest::default(), ListGroups);
        let expected = list_groups_response(vec![
            listed_group("offsets-only", "", "Empty"),
            listed_group("workers", "connect", "CompletingRebalance"),
        ]);
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// OffsetCommit (key 8), OffsetFetch (key 9)

#[test]
fn a_standalone_offset_commit_is_fetched_back_with_its_metadata() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 3).await;
        let request = commit_request(
            "readers",
            &[
                ("t", 0, 42, Some("checkpoint")),
                ("t", 1, 7, None),
                ("t", 9, 1, None),
                ("ghost", 0, 1, None),
            ],
        );
        let response = call!(broker, 8, request, OffsetCommit);
        let expected = commit_response(&[("t", 0, 0), ("t", 1, 0), ("t", 9, 3), ("ghost", 0, 3)]);
        assert_eq!(response, expected);
        // Asked for partitions: a partition without a commit answers -1 and no error.
        let wanted: &[(&str, &[i32])] = &[("t", &[0, 1, 2])];
        let rows = [("t", 0, 42, "checkpoint"), ("t", 1, 7, ""), ("t", 2, -1, "")];
        for version in [1, 7] {
            let response =
                call!(broker, version, offset_fetch_request("readers", Some(wanted)), OffsetFetch);
            assert_eq!(response, offset_fetch_response(&rows), "v{version}");
        }
        // v2+: null topics asks for every committed partition.
        let response = call!(broker, 2, offset_fetch_request("readers", None), OffsetFetch);
        assert_eq!(response, offset_fetch_response(&[("t", 0, 42, "checkpoint"), ("t", 1, 7, "")]));
    });
}

#[test]
fn offset_fetch_v8_answers_several_groups_at_once() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 2).await;
        commit(&broker, "first", &[("t", 0, 5, Some("m")), ("t", 1, 6, None)]).await;
        let wanted_group = |name: &str, partitions: Option<&[i32]>| {
            let mut wanted = offset_fetch_request::OffsetFetchRequestGroup::default();
            wanted.group_id = group(name);
            wanted.topics = partitions.map(|partitions| {
                let mut wanted_topic = offset_fetch_request::OffsetFetchRequestTopics::default();
                wanted_topic.name = topic("t");
                wanted_topic.partition_indexes = partitions.to_vec();
                vec![wanted_topic]
            });
            wanted
        };
        let mut request = OffsetFetchRequest::default();
        request.groups =
            vec![wanted_group("first", None), wanted_group("never-committed", Some(&[0]))];
        let response = call!(broker, 8, request, OffsetFetch);
        let mut expected = OffsetFetchResponse::default();
        expected.groups = vec![
            fetched_group("first", &[("t", 0, 5, "m"), ("t", 1, 6, "")]),
            fetched_group("never-committed", &[("t", 0, -1, "")]),
        ];
        assert_eq!(response, expected);
    });
}

#[test]
fn offset_commit_is_checked_against_the_group_members_generation() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 1).await;
        let member = stable_group(&broker, "g", b"subscription", b"assignment").await;
        let as_member = |member_id: &str, generation: i32| {
            let mut request = commit_request("g", &[("t", 0, 11, None)]);
            request.member_id = text(member_id);
            request.generation_id_or_member_epoch = generation;
            request
        };
        let response = call!(broker, 8, as_member(&member, 1), OffsetCommit);
        assert_eq!(response, commit_response(&[("t", 0, 0)]));
        let response = call!(broker, 8, as_member(&member, 5), OffsetCommit);
        assert_eq!(response, commit_response(&[("t", 0, 22)]), "ILLEGAL_GENERATION");
        let response = call!(broker, 8, as_member("stranger", 1), OffsetCommit);
        assert_eq!(response, commit_response(&[("t", 0, 25)]), "UNKNOWN_MEMBER_ID");
        // A standalone commit is refused while the group has members.
        let response = call!(broker, 8, as_member("", -1), OffsetCommit);
        assert_eq!(response, commit_response(&[("t", 0, 25)]));
        let response =
            call!(broker, 7, offset_fetch_request("g", Some(&[("t", &[0])])), OffsetFetch);
        assert_eq!(response, offset_fetch_response(&[("t", 0, 11, "")]));
    });
}

#[test]
/// Kafka (`OffsetMetadataManager.validateOffsetCommit`) answers a commit with a generation to a
/// group it does not know ILLEGAL_GENERATION before v9 (GROUP_ID_NOT_FOUND from v9).
fn an_offset_commit_from_a_member_of_an_unknown_group_answers_illegal_generation_22() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 1).await;
        let mut request = commit_request("unknown-group", &[("t", 0, 11, None)]);
        request.member_id = text("member-from-before-a-restart");
        request.generation_id_or_member_epoch = 3;
        let response = call!(broker, 8, request, OffsetCommit);
        assert_eq!(response, commit_response(&[("t", 0, 22)]));
    });
}

#[test]
/// Kafka stores the leader epoch of a commit and returns it from OffsetFetch v5+ (KIP-320), so a
/// consumer can validate its position after a leader change.
#[ignore = "bug: the committed leader epoch is dropped; OffsetFetch answers -1"]
fn offset_fetch_returns_the_leader_epoch_committed_with_the_offset() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 1).await;
        let mut request = commit_request("readers", &[("t", 0, 42, None)]);
        request.topics[0].partitions[0].committed_leader_epoch = 0;
        call!(broker, 8, request, OffsetCommit);
        let response =
            call!(broker, 7, offset_fetch_request("readers", Some(&[("t", &[0])])), OffsetFetch);
        let mut expected = offset_fetch_response(&[("t", 0, 42, "")]);
        expected.topics[0].partitions[0].committed_leader_epoch = 0;
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// OffsetDelete (key 47), DeleteGroups (key 42)

#[test]
fn offset_delete_removes_some_committed_offsets_of_an_empty_group() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 2).await;
        commit(&broker, "readers", &[("t", 0, 5, None), ("t", 1, 6, None)]).await;
        let response = call!(broker, 0, offset_delete_request("readers", "t", &[0]), OffsetDelete);
        let mut partition = offset_delete_response::OffsetDeleteResponsePartition::default();
        partition.partition_index = 0;
        partition.error_code = 0;
        let mut deleted_topic = offset_delete_response::OffsetDeleteResponseTopic::default();
        deleted_topic.name = topic("t");
        deleted_topic.partitions = vec![partition];
        let mut expected = OffsetDeleteResponse::default();
        expected.error_code = 0;
        expected.topics = vec![deleted_topic];
        assert_eq!(response, expected);
        let response =
            call!(broker, 7, offset_fetch_request("readers", Some(&[("t", &[0, 1])])), OffsetFetch);
        assert_eq!(response, offset_fetch_response(&[("t", 0, -1, ""), ("t", 1, 6, "")]));
    });
}

#[test]
/// Kafka answers a group-level error with that error alone (`GroupCoordinatorService`:
/// `new OffsetDeleteResponseData().setErrorCode(error.code())`), never with per-partition
/// successes.
fn offset_delete_of_an_unknown_group_answers_group_id_not_found_69_alone() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 1).await;
        let response = call!(broker, 0, offset_delete_request("ghost", "t", &[0]), OffsetDelete);
        let mut expected = OffsetDeleteResponse::default();
        expected.error_code = 69;
        expected.topics = vec![];
        assert_eq!(response, expected);
    });
}

#[test]
fn delete_groups_deletes_an_empty_group_with_its_offsets_and_refuses_non_empty_68_and_unknown_69() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "t", 1).await;
        commit(&broker, "finished", &[("t", 0, 5, None)]).await;
        stable_group(&broker, "running", b"subscription", b"assignment").await;
        let mut request = DeleteGroupsRequest::default();
        request.groups_names = vec![group("finished"), group("running"), group("ghost")];
        let response = call!(broker, 2, request, DeleteGroups);
        let result = |name: &str, error_code: i16| {
            let mut result = delete_groups_response::DeletableGroupResult::default();
            result.group_id = group(name);
            result.error_code = error_code;
            result
        };
        let mut expected = DeleteGroupsResponse::default();
        expected.results = vec![result("finished", 0), result("running", 68), result("ghost", 69)];
        assert_eq!(response, expected);
        let response =
            call!(broker, 7, offset_fetch_request("finished", Some(&[("t", &[0])])), OffsetFetch);
        assert_eq!(response, offset_fetch_response(&[("t", 0, -1, "")]));
        let response = call!(broker, 4, ListGroupsRequest::default(), ListGroups);
        assert_eq!(
            response,
            list_groups_response(vec![listed_group("running", PROTOCOL_TYPE, "Stable")])
        );
    });
}

#[test]
/// Kafka expires a session on a precise timer; librdkafka's 0081 closes static members (no
/// LeaveGroup) and deletes their groups one second after the session timeout. The group's
/// timers are brought up to date by the request itself, not only by the periodic timer task.
fn delete_groups_right_after_the_last_session_ended_finds_the_group_empty() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        stable_group(&broker, "closed", b"subscription", b"assignment").await;
        broker.clock.advance(Duration::from_millis(SESSION_TIMEOUT_MS as u64 - 1));
        let response = call!(broker, 4, ListGroupsRequest::default(), ListGroups);
        assert_eq!(
            response,
            list_groups_response(vec![listed_group("closed", PROTOCOL_TYPE, "Stable")])
        );
        broker.clock.advance(Duration::from_millis(1));
        let mut request = DeleteGroupsRequest::default();
        request.groups_names = vec![group("closed")];
        let response = call!(broker, 2, request, DeleteGroups);
        let mut result = delete_groups_response::DeletableGroupResult::default();
        result.group_id = group("closed");
        result.error_code = 0;
        let mut expected = DeleteGroupsResponse::default();
        expected.results = vec![result];
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// InitProducerId (key 22)

fn init_producer_id_request(
    transactional_id: Option<&str>,
    producer: (i64, i16),
) -> InitProducerIdRequest {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(text(id)));
    request.transaction_timeout_ms = 60_000;
    request.producer_id = ProducerId(producer.0);
    request.producer_epoch = producer.1;
    request
}

fn init_producer_id_response(error_code: i16, producer: (i64, i16)) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.error_code = error_code;
    response.producer_id = ProducerId(producer.0);
    response.producer_epoch = producer.1;
    response
}

#[test]
fn init_producer_id_hands_out_ids_bumps_epochs_and_gives_transactional_ids_their_own() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        let cases = [
            (None, (-1, -1), 60_000, (0, (0, 0))),
            // KIP-360: the same producer asking with its id and epoch gets the next epoch.
            (None, (0, 0), 60_000, (0, (0, 1))),
            (None, (-1, -1), 60_000, (0, (1, 0))),
            // A transactional id gets a producer id of its own, then the next epoch each time.
            (Some("tx-1"), (-1, -1), 60_000, (0, (2, 0))),
            (Some("tx-1"), (-1, -1), 60_000, (0, (2, 1))),
            // KIP-360 with a transactional id: the current epoch bumps, an old one is fenced
            // (PRODUCER_FENCED, 90, from v4).
            (Some("tx-1"), (2, 1), 60_000, (0, (2, 2))),
            (Some("tx-1"), (2, 0), 60_000, (90, (-1, -1))),
            // An id and no epoch: INVALID_REQUEST.
            (Some("tx-1"), (2, -1), 60_000, (42, (-1, -1))),
            // Past transaction.max.timeout.ms (15 minutes): INVALID_TRANSACTION_TIMEOUT.
            (Some("tx-2"), (-1, -1), 900_001, (50, (-1, -1))),
            (Some(""), (-1, -1), 60_000, (42, (-1, -1))),
        ];
        for (transactional_id, asked, timeout, (error_code, answered)) in cases {
            let mut request = init_producer_id_request(transactional_id, asked);
            request.transaction_timeout_ms = timeout;
            let response = call!(broker, 4, request, InitProducerId);
            let expected = init_producer_id_response(error_code, answered);
            assert_eq!(response, expected, "{transactional_id:?} {asked:?}");
        }
        // Before v4 a fenced producer hears INVALID_PRODUCER_EPOCH (47).
        let request = init_producer_id_request(Some("tx-1"), (2, 0));
        let response = call!(broker, 3, request, InitProducerId);
        assert_eq!(response, init_producer_id_response(47, (-1, -1)));
    });
}

// =============================================================================================
// DescribeLogDirs (key 35)

fn log_dir_topic(
    name: &str,
    sizes: &[(i32, i64)],
) -> describe_log_dirs_response::DescribeLogDirsTopic {
    let mut described = describe_log_dirs_response::DescribeLogDirsTopic::default();
    described.name = topic(name);
    described.partitions = sizes
        .iter()
        .map(|(index, size)| {
            let mut partition = describe_log_dirs_response::DescribeLogDirsPartition::default();
            partition.partition_index = *index;
            partition.partition_size = *size;
            partition.offset_lag = 0;
            partition.is_future_key = false;
            partition
        })
        .collect();
    described
}

fn log_dirs_response(
    error_code: i16,
    (total_bytes, usable_bytes): (i64, i64),
    topics: Vec<describe_log_dirs_response::DescribeLogDirsTopic>,
) -> DescribeLogDirsResponse {
    let mut result = describe_log_dirs_response::DescribeLogDirsResult::default();
    result.error_code = 0;
    result.log_dir = text(SIM_DATA_DIR);
    result.topics = topics;
    result.total_bytes = total_bytes;
    result.usable_bytes = usable_bytes;
    let mut response = DescribeLogDirsResponse::default();
    response.error_code = error_code;
    response.results = vec![result];
    response
}

#[test]
fn describe_log_dirs_reports_partition_sizes_and_the_disks_total_and_usable_bytes() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "sized", 3).await;
        let first = batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 1)]);
        let second = batch(BASE_TIMESTAMP_MS, &[("a longer value", 0)]);
        let size = (first.len() + second.len()) as i64;
        produce(&broker, "sized", 0, first).await;
        produce(&broker, "sized", 0, second).await;
        let mut wanted = describe_log_dirs_request::DescribableLogDirTopic::default();
        wanted.topic = topic("sized");
        wanted.partitions = vec![0, 1, 7];
        let mut request = DescribeLogDirsRequest::default();
        request.topics = Some(vec![wanted]);
        let response = call!(broker, 4, request, DescribeLogDirs);
        // The simulated disk has SIM_DISK_BYTES, half of them free; partition 7 does not exist
        // and is left out, as Kafka does.
        let disk_bytes = shard::io::sim::SIM_DISK_BYTES as i64;
        let expected = log_dirs_response(
            0,
            (disk_bytes, disk_bytes / 2),
            vec![log_dir_topic("sized", &[(0, size), (1, 0)])],
        );
        assert_eq!(response, expected);
        // v1: every partition (null topics), no error code (v3) and no disk space (v4).
        let mut request = DescribeLogDirsRequest::default();
        request.topics = None;
        let response = call!(broker, 1, request, DescribeLogDirs);
        let offsets: Vec<(i32, i64)> = (0..50).map(|index| (index, 0)).collect();
        let expected = log_dirs_response(
            0,
            (-1, -1),
            vec![
                log_dir_topic("__consumer_offsets", &offsets),
                log_dir_topic("__transaction_state", &offsets),
                log_dir_topic("sized", &[(0, size), (1, 0), (2, 0)]),
            ],
        );
        assert_eq!(response, expected);
    });
}

// =============================================================================================
// DescribeProducers (key 61)

#[test]
fn describe_producers_reports_an_idempotent_producers_epoch_last_sequence_and_timestamp() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "exactly-once", 2).await;
        let response = call!(broker, 4, init_producer_id_request(None, (-1, -1)), InitProducerId);
        assert_eq!(response, init_producer_id_response(0, (0, 0)));
        // Timestamps from the node's clock: producer state expires by record time.
        let now_ms = broker.clock.now_ms();
        let first = idempotent_batch((0, 0), 0, now_ms, &[("a", 0), ("b", 5), ("c", 9)]);
        let second = idempotent_batch((0, 0), 3, now_ms + 20, &[("d", 0), ("e", 1)]);
        assert_eq!(produce(&broker, "exactly-once", 0, first).await, 0);
        assert_eq!(produce(&broker, "exactly-once", 0, second).await, 3);
        let mut wanted = describe_producers_request::TopicRequest::default();
        wanted.name = topic("exactly-once");
        wanted.partition_indexes = vec![0, 1, 9];
        let mut request = DescribeProducersRequest::default();
        request.topics = vec![wanted];
        let response = call!(broker, 0, request, DescribeProducers);
        let mut producer = describe_producers_response::ProducerState::default();
        producer.producer_id = ProducerId(0);
        producer.producer_epoch = 0;
        producer.last_sequence = 4;
        producer.last_timestamp = now_ms + 21;
        producer.coordinator_epoch = -1;
        producer.current_txn_start_offset = -1;
        let partition = |index: i32, producers: Vec<describe_producers_response::ProducerState>| {
            let mut described = describe_producers_response::PartitionResponse::default();
            described.partition_index = index;
            described.error_code = 0;
            described.error_message = None;
            described.active_producers = producers;
            described
        };
        let mut unknown = partition(9, vec![]);
        unknown.error_code = 3;
        unknown.error_message = Some(text("unknown topic or partition exactly-once-9"));
        let mut described_topic = describe_producers_response::TopicResponse::default();
        described_topic.name = topic("exactly-once");
        described_topic.partitions =
            vec![partition(0, vec![producer]), partition(1, vec![]), unknown];
        let mut expected = DescribeProducersResponse::default();
        expected.topics = vec![described_topic];
        assert_eq!(response, expected);
    });
}

#[test]
fn fetch_v13_and_later_name_topics_by_id_and_answer_unknown_ids_with_100() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "by-id", 1).await;
        let first = batch(BASE_TIMESTAMP_MS, &[("a", 0), ("b", 1)]);
        produce(&broker, "by-id", 0, first.clone()).await;
        let id = topic_id_of(&broker, "by-id");
        for version in [13, 15, 16, 17] {
            let mut request = fetch_request("by-id", 0, 0);
            request.topics[0].topic_id = id;
            let response = call!(broker, version, request.clone(), Fetch);
            let mut expected = fetch_response("by-id", fetched(0, 2, 0, stored(&first, 0)));
            expected.responses[0].topic_id = id;
            assert_eq!(response, expected, "v{version}");
            // An id no topic has: UNKNOWN_TOPIC_ID, answered under that id.
            let unknown = Uuid::from_u128(0x5eed);
            request.topics[0].topic_id = unknown;
            let response = call!(broker, version, request, Fetch);
            let mut expected = fetch_response("<unused>", fetch_failed(0, 100));
            expected.responses[0].topic_id = unknown;
            assert_eq!(response.responses[0].topic_id, unknown, "v{version}");
            assert_eq!(
                response.responses[0].partitions, expected.responses[0].partitions,
                "v{version}"
            );
        }
    });
}

#[test]
fn produce_v10_and_v11_answer_as_before_on_a_single_node() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        create_topic(&broker, "newer", 1).await;
        for (version, expected_offset) in [(10, 0), (11, 1)] {
            let request =
                produce_request(-1, vec![("newer", 0, batch(BASE_TIMESTAMP_MS, &[("k", 0)]))]);
            let response = call!(broker, version, request, Produce);
            let expected = produce_response(vec![("newer", vec![produced(0, expected_offset, 0)])]);
            assert_eq!(response, expected, "v{version}");
        }
    });
}
