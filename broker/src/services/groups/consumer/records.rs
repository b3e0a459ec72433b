//! KIP-848 consumer-group records in `__consumer_offsets`, in Kafka 4.x's own layout
//! (`CoordinatorRecordSerde`), so Kafka's tools (`kafka-dump-log --offsets-decoder`) read them
//! and the records mean the same to strata as to a Kafka coordinator.
//!
//! Key: `record_type i16`, then the key fields non-flexible (string = i16 length + UTF-8): the
//! group id and, for types 5, 7 and 8, the member id, for 16 the regular expression. Value:
//! `value_version i16 = 0`, then the fields in flexible encoding: integers big-endian; compact
//! string and bytes = uvarint(length + 1) + bytes, 0 for null; compact array =
//! uvarint(count + 1) + items; uuid = 16 bytes; every struct (the value itself and each array
//! element) ends with its tagged fields: uvarint count, then per field uvarint tag, uvarint
//! size, payload, tags ascending. A tagged nullable struct's payload is a uvarint 1 marker and
//! the struct (`MessageDataGenerator`); the field is left out when null. A null value
//! (tombstone) deletes the key.
//!
//! Records (key fields after the type; value fields in order; `?` = nullable):
//! - 3 ConsumerGroupMetadata (group): Epoch i32; tag 0 MetadataHash i64, written when ≠ 0.
//! - 4 ConsumerGroupPartitionMetadata (group): Topics []; strata writes it empty and reads
//!   none of it (Kafka 4.1+ only tombstones it).
//! - 5 ConsumerGroupMemberMetadata (group, member): InstanceId string?, RackId string?,
//!   ClientId string, ClientHost string, SubscribedTopicNames []string, SubscribedTopicRegex
//!   string?, RebalanceTimeoutMs i32, ServerAssignor string?; tag 0 ClassicMemberMetadata?
//!   {SessionTimeoutMs i32, SupportedProtocols []{Name string, Metadata bytes}}.
//! - 6 ConsumerGroupTargetAssignmentMetadata (group): AssignmentEpoch i32.
//! - 7 ConsumerGroupTargetAssignmentMember (group, member): TopicPartitions
//!   []{TopicId uuid, Partitions []i32}.
//! - 8 ConsumerGroupCurrentMemberAssignment (group, member): MemberEpoch i32,
//!   PreviousMemberEpoch i32, State i8, AssignedPartitions, PartitionsPendingRevocation (both
//!   []{TopicId uuid, Partitions []i32}).
//! - 16 ConsumerGroupRegularExpression (group, regex): Topics []string, Version i64,
//!   Timestamp i64.
//!
//! Invariants: what `encode` writes is byte for byte what Kafka 4.x writes for the same
//! record (up to the order of topics and partitions, which Kafka takes from hash maps);
//! `decode(encode(r)) == r`. `decode` reads what any Kafka 4.x writes: unknown tagged fields
//! (trunk's CreationTimeMs, AssignmentEpochs) are skipped, bytes after a value are ignored and
//! a value version above 0 is read as version 0, since later versions only add fields at the
//! end or as tags. It never panics and checks every length against the bytes that remain
//! before it allocates. Strata's own keys (`offsets::key`, `stored::key`) start with the
//! first byte of a non-empty group id without NULs, every key here with 0x00: the two
//! namespaces cannot collide.
//!
//! Pure functions, no I/O; called on the shard that coordinates the group.
//!
//! References: Kafka `group-coordinator/src/main/resources/common/message/`
//! `ConsumerGroup{Metadata,PartitionMetadata,MemberMetadata,TargetAssignmentMetadata,`
//! `TargetAssignmentMember,CurrentMemberAssignment,RegularExpression}{Key,Value}.json`,
//! `coordinator-common/.../runtime/CoordinatorRecordSerde.java`,
//! `generator/.../MessageDataGenerator.java` (tagged and nullable structs),
//! `modern/MemberState.java`; the protocol guide's primitive types; KIP-848, KIP-482 (tagged
//! fields), KIP-1101 (MetadataHash).

use std::collections::{BTreeMap, BTreeSet};

pub type TopicId = [u8; 16];
/// Partitions by topic: an assignment.
pub type Partitions = BTreeMap<TopicId, BTreeSet<i32>>;

/// The longest key string (group id, member id, regular expression) a key can hold: its
/// length is an i16. Callers reject longer ones at the edge (Kafka answers INVALID_REQUEST);
/// `encode` cuts them at a character boundary rather than write a key Kafka cannot read.
pub const KEY_STRING_BYTES_MAX: usize = i16::MAX as usize;

const RECORD_TYPE_GROUP_METADATA: i16 = 3;
const RECORD_TYPE_PARTITION_METADATA: i16 = 4;
const RECORD_TYPE_MEMBER_METADATA: i16 = 5;
const RECORD_TYPE_TARGET_METADATA: i16 = 6;
const RECORD_TYPE_TARGET_MEMBER: i16 = 7;
const RECORD_TYPE_CURRENT_ASSIGNMENT: i16 = 8;
const RECORD_TYPE_REGULAR_EXPRESSION: i16 = 16;

/// Every value schema here has the single version 0.
const VALUE_VERSION: i16 = 0;
const TAG_METADATA_HASH: u32 = 0;
const TAG_CLASSIC_MEMBER_METADATA: u32 = 0;
/// A tagged nullable struct's payload starts with this uvarint when the struct is present.
const STRUCT_PRESENT_MARKER: u32 = 1;

/// The fewest bytes an array element can take, to bound a count before allocating.
pub(in crate::services::groups) const STRING_BYTES_MIN: usize = 1;
pub(in crate::services::groups) const PARTITION_BYTES_MIN: usize = 4;
/// TopicId, an empty Partitions array, an empty tagged section.
const TOPIC_PARTITIONS_BYTES_MIN: usize = 16 + 1 + 1;
/// Name, Metadata, an empty tagged section.
const CLASSIC_PROTOCOL_BYTES_MIN: usize = 1 + 1 + 1;

/// A member's reconciliation state (Kafka's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
    Unknown,
}

impl MemberState {
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    /// Any code Kafka does not define reads as `Unknown`.
    pub fn from_code(code: i8) -> Self {
        match code {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "STABLE",
            MemberState::UnrevokedPartitions => "UNREVOKED_PARTITIONS",
            MemberState::UnreleasedPartitions => "UNRELEASED_PARTITIONS",
            MemberState::Unknown => "UNKNOWN",
        }
    }
}

/// Record type 5, ConsumerGroupMemberMetadata (key: group id, member id).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadata {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Tagged field 0 ClassicMemberMetadata {SessionTimeoutMs i32, SupportedProtocols
    /// []{Name string, Metadata bytes}}; None = a consumer-protocol member (field omitted).
    pub classic: Option<ClassicMemberMetadata>,
}

/// What a member using the classic protocol in a consumer group joined with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    /// (protocol name, protocol metadata) in the member's order of preference.
    pub protocols: Vec<(String, Vec<u8>)>,
}

/// Record type 8, ConsumerGroupCurrentMemberAssignment (key: group id, member id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub member_id: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// AssignedPartitions []TopicPartitions{TopicId uuid, Partitions []int32}.
    pub assigned: Partitions,
    /// PartitionsPendingRevocation, same shape.
    pub pending_revocation: Partitions,
}

/// One KIP-848 record of a group, or its tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// 3 ConsumerGroupMetadata (key GroupId): Epoch i32; tagged field 0 MetadataHash i64
    /// (written only when ≠ 0; 0 when absent).
    GroupMetadata {
        epoch: i32,
        metadata_hash: i64,
    },
    GroupMetadataTombstone,
    /// 4 ConsumerGroupPartitionMetadata (key GroupId): strata writes it with no topics and
    /// reads any value as this, ignoring its contents; a null value is the tombstone.
    PartitionMetadata,
    PartitionMetadataTombstone,
    /// 5
    Member(MemberMetadata),
    MemberTombstone {
        member_id: String,
    },
    /// 6 ConsumerGroupTargetAssignmentMetadata (key GroupId): AssignmentEpoch i32.
    TargetMetadata {
        assignment_epoch: i32,
    },
    TargetMetadataTombstone,
    /// 7 ConsumerGroupTargetAssignmentMember (key GroupId, MemberId): TopicPartitions
    /// []{TopicId uuid, Partitions []int32}.
    TargetMember {
        member_id: String,
        partitions: Partitions,
    },
    TargetMemberTombstone {
        member_id: String,
    },
    /// 8
    Current(CurrentAssignment),
    CurrentTombstone {
        member_id: String,
    },
    /// 16 ConsumerGroupRegularExpression (key GroupId, RegularExpression): Topics []string,
    /// Version i64, Timestamp i64.
    Regex {
        regex: String,
        topics: Vec<String>,
        version: i64,
        timestamp_ms: i64,
    },
    RegexTombstone {
        regex: String,
    },
}

/// (key, value) of `record` for `group`; value None = tombstone.
pub fn encode(group: &str, record: &Record) -> (Vec<u8>, Option<Vec<u8>>) {
    let (record_type, second_key) = key_fields(record);
    let mut key = Vec::with_capacity(2 + 2 + group.len() + second_key.map_or(0, |s| 2 + s.len()));
    key.extend_from_slice(&record_type.to_be_bytes());
    put_key_string(&mut key, group);
    if let Some(second_key) = second_key {
        put_key_string(&mut key, second_key);
    }
    (key, encode_value(record))
}

/// The group and record of a Kafka-typed consumer-group key and its value; `None` for any
/// other key, or for bytes that do not read.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Option<(String, Record)> {
    if !is_consumer_group_key(key) {
        return None;
    }
    let mut reader = Reader::new(key);
    let record_type = reader.i16()?;
    let group = reader.key_string()?;
    let second_key = if has_second_key(record_type) { Some(reader.key_string()?) } else { None };
    // Kafka never writes bytes after a key's fields, and under compaction a longer key is a
    // different key: such a key is not one of these records.
    if !reader.rest.is_empty() {
        return None;
    }
    let record = match value {
        None => tombstone(record_type, second_key)?,
        Some(value) => decode_value(record_type, second_key, value)?,
    };
    Some((group, record))
}

/// Whether `key` is a Kafka-typed consumer-group record key (its first i16 is 3-8 or 16).
pub fn is_consumer_group_key(key: &[u8]) -> bool {
    let [high, low, ..] = key else { return false };
    let record_type = i16::from_be_bytes([*high, *low]);
    (RECORD_TYPE_GROUP_METADATA..=RECORD_TYPE_CURRENT_ASSIGNMENT).contains(&record_type)
        || record_type == RECORD_TYPE_REGULAR_EXPRESSION
}

/// The record type of `record` and its key field after the group id, if it has one.
fn key_fields(record: &Record) -> (i16, Option<&str>) {
    match record {
        Record::GroupMetadata { .. } | Record::GroupMetadataTombstone => {
            (RECORD_TYPE_GROUP_METADATA, None)
        }
        Record::PartitionMetadata | Record::PartitionMetadataTombstone => {
            (RECORD_TYPE_PARTITION_METADATA, None)
        }
        Record::Member(member) => (RECORD_TYPE_MEMBER_METADATA, Some(member.member_id.as_str())),
        Record::MemberTombstone { member_id } => {
            (RECORD_TYPE_MEMBER_METADATA, Some(member_id.as_str()))
        }
        Record::TargetMetadata { .. } | Record::TargetMetadataTombstone => {
            (RECORD_TYPE_TARGET_METADATA, None)
        }
        Record::TargetMember { member_id, .. } | Record::TargetMemberTombstone { member_id } => {
            (RECORD_TYPE_TARGET_MEMBER, Some(member_id.as_str()))
        }
        Record::Current(current) => {
            (RECORD_TYPE_CURRENT_ASSIGNMENT, Some(current.member_id.as_str()))
        }
        Record::CurrentTombstone { member_id } => {
            (RECORD_TYPE_CURRENT_ASSIGNMENT, Some(member_id.as_str()))
        }
        Record::Regex { regex, .. } | Record::RegexTombstone { regex } => {
            (RECORD_TYPE_REGULAR_EXPRESSION, Some(regex.as_str()))
        }
    }
}

fn has_second_key(record_type: i16) -> bool {
    matches!(
        record_type,
        RECORD_TYPE_MEMBER_METADATA
            | RECORD_TYPE_TARGET_MEMBER
            | RECORD_TYPE_CURRENT_ASSIGNMENT
            | RECORD_TYPE_REGULAR_EXPRESSION
    )
}

/// The value of `record`, `None` for a tombstone.
fn encode_value(record: &Record) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    match record {
        Record::GroupMetadata { epoch, metadata_hash } => {
            out.extend_from_slice(&epoch.to_be_bytes());
            // Kafka writes a tagged field only when it differs from its default (0).
            if *metadata_hash == 0 {
                put_uvarint(&mut out, 0);
            } else {
                put_uvarint(&mut out, 1);
                put_uvarint(&mut out, TAG_METADATA_HASH);
                put_uvarint(&mut out, 8);
                out.extend_from_slice(&metadata_hash.to_be_bytes());
            }
        }
        Record::PartitionMetadata => {
            // Topics: an empty array (strata keeps no subscription metadata).
            put_compact_length(&mut out, 0);
            put_uvarint(&mut out, 0);
        }
        Record::Member(member) => put_member(&mut out, member),
        Record::TargetMetadata { assignment_epoch } => {
            out.extend_from_slice(&assignment_epoch.to_be_bytes());
            put_uvarint(&mut out, 0);
        }
        Record::TargetMember { partitions, .. } => {
            put_partitions(&mut out, partitions);
            put_uvarint(&mut out, 0);
        }
        Record::Current(current) => put_current(&mut out, current),
        Record::Regex { topics, version, timestamp_ms, .. } => {
            put_strings(&mut out, topics);
            out.extend_from_slice(&version.to_be_bytes());
            out.extend_from_slice(&timestamp_ms.to_be_bytes());
            put_uvarint(&mut out, 0);
        }
        Record::GroupMetadataTombstone
        | Record::PartitionMetadataTombstone
        | Record::MemberTombstone { .. }
        | Record::TargetMetadataTombstone
        | Record::TargetMemberTombstone { .. }
        | Record::CurrentTombstone { .. }
        | Record::RegexTombstone { .. } => return None,
    }
    Some(out)
}

fn put_member(out: &mut Vec<u8>, member: &MemberMetadata) {
    put_nullable_string(out, member.instance_id.as_deref());
    put_nullable_string(out, member.rack_id.as_deref());
    put_compact_bytes(out, member.client_id.as_bytes());
    put_compact_bytes(out, member.client_host.as_bytes());
    put_strings(out, &member.subscribed_topic_names);
    put_nullable_string(out, member.subscribed_topic_regex.as_deref());
    out.extend_from_slice(&member.rebalance_timeout_ms.to_be_bytes());
    put_nullable_string(out, member.server_assignor.as_deref());
    match &member.classic {
        None => put_uvarint(out, 0),
        Some(classic) => {
            let payload = classic_payload(classic);
            put_uvarint(out, 1);
            put_uvarint(out, TAG_CLASSIC_MEMBER_METADATA);
            put_uvarint(out, u32::try_from(payload.len()).unwrap_or(u32::MAX));
            out.extend_from_slice(&payload);
        }
    }
}

/// The tagged field's payload: the present-marker, then the struct with its own (empty)
/// tagged section, each protocol element with its own.
fn classic_payload(classic: &ClassicMemberMetadata) -> Vec<u8> {
    let mut payload = Vec::with_capacity(16);
    put_uvarint(&mut payload, STRUCT_PRESENT_MARKER);
    payload.extend_from_slice(&classic.session_timeout_ms.to_be_bytes());
    put_compact_length(&mut payload, classic.protocols.len());
    for (name, metadata) in &classic.protocols {
        put_compact_bytes(&mut payload, name.as_bytes());
        put_compact_bytes(&mut payload, metadata);
        put_uvarint(&mut payload, 0);
    }
    put_uvarint(&mut payload, 0);
    payload
}

fn put_current(out: &mut Vec<u8>, current: &CurrentAssignment) {
    out.extend_from_slice(&current.member_epoch.to_be_bytes());
    out.extend_from_slice(&current.previous_member_epoch.to_be_bytes());
    out.extend_from_slice(&current.state.code().to_be_bytes());
    put_partitions(out, &current.assigned);
    put_partitions(out, &current.pending_revocation);
    put_uvarint(out, 0);
}

/// A []{TopicId uuid, Partitions []int32} array, each element with an empty tagged section.
fn put_partitions(out: &mut Vec<u8>, partitions: &Partitions) {
    put_compact_length(out, partitions.len());
    for (topic_id, indexes) in partitions {
        out.extend_from_slice(topic_id);
        put_compact_length(out, indexes.len());
        for index in indexes {
            out.extend_from_slice(&index.to_be_bytes());
        }
        put_uvarint(out, 0);
    }
}

fn put_strings(out: &mut Vec<u8>, strings: &[String]) {
    put_compact_length(out, strings.len());
    for string in strings {
        put_compact_bytes(out, string.as_bytes());
    }
}

fn put_nullable_string(out: &mut Vec<u8>, string: Option<&str>) {
    match string {
        Some(string) => put_compact_bytes(out, string.as_bytes()),
        None => put_uvarint(out, 0),
    }
}

pub(in crate::services::groups) fn put_compact_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_compact_length(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// uvarint(count + 1), the length of a non-null compact string, bytes or array.
pub(in crate::services::groups) fn put_compact_length(out: &mut Vec<u8>, count: usize) {
    // Every field is bounded far below 4 GiB (names and metadata by the request size).
    let length = u32::try_from(count).ok().and_then(|count| count.checked_add(1));
    put_uvarint(out, length.unwrap_or(u32::MAX));
}

pub(in crate::services::groups) fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A non-flexible string: i16 length + UTF-8, cut to `KEY_STRING_BYTES_MAX` at a character
/// boundary (callers keep key strings shorter).
pub(in crate::services::groups) fn put_key_string(out: &mut Vec<u8>, text: &str) {
    let mut length = text.len().min(KEY_STRING_BYTES_MAX);
    while !text.is_char_boundary(length) {
        length -= 1;
    }
    let head = text.get(..length).unwrap_or_default();
    out.extend_from_slice(&i16::try_from(head.len()).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(head.as_bytes());
}

fn tombstone(record_type: i16, second_key: Option<String>) -> Option<Record> {
    Some(match record_type {
        RECORD_TYPE_GROUP_METADATA => Record::GroupMetadataTombstone,
        RECORD_TYPE_PARTITION_METADATA => Record::PartitionMetadataTombstone,
        RECORD_TYPE_MEMBER_METADATA => Record::MemberTombstone { member_id: second_key? },
        RECORD_TYPE_TARGET_METADATA => Record::TargetMetadataTombstone,
        RECORD_TYPE_TARGET_MEMBER => Record::TargetMemberTombstone { member_id: second_key? },
        RECORD_TYPE_CURRENT_ASSIGNMENT => Record::CurrentTombstone { member_id: second_key? },
        RECORD_TYPE_REGULAR_EXPRESSION => Record::RegexTombstone { regex: second_key? },
        _ => return None,
    })
}

fn decode_value(record_type: i16, second_key: Option<String>, value: &[u8]) -> Option<Record> {
    // Strata keeps no subscription metadata: any value only says the record exists (so a
    // tombstone is due), whatever topics a Kafka 4.0 coordinator wrote into it.
    if record_type == RECORD_TYPE_PARTITION_METADATA {
        return Some(Record::PartitionMetadata);
    }
    let mut reader = Reader::new(value);
    if reader.i16()? < VALUE_VERSION {
        return None;
    }
    match record_type {
        RECORD_TYPE_GROUP_METADATA => read_group_metadata(&mut reader),
        RECORD_TYPE_MEMBER_METADATA => read_member(&mut reader, second_key?).map(Record::Member),
        RECORD_TYPE_TARGET_METADATA => {
            let assignment_epoch = reader.i32()?;
            reader.skip_tagged()?;
            Some(Record::TargetMetadata { assignment_epoch })
        }
        RECORD_TYPE_TARGET_MEMBER => {
            let partitions = reader.partitions()?;
            reader.skip_tagged()?;
            Some(Record::TargetMember { member_id: second_key?, partitions })
        }
        RECORD_TYPE_CURRENT_ASSIGNMENT => {
            read_current(&mut reader, second_key?).map(Record::Current)
        }
        RECORD_TYPE_REGULAR_EXPRESSION => {
            let topics = reader.strings()?;
            let version = reader.i64()?;
            let timestamp_ms = reader.i64()?;
            reader.skip_tagged()?;
            Some(Record::Regex { regex: second_key?, topics, version, timestamp_ms })
        }
        _ => None,
    }
}

fn read_group_metadata(reader: &mut Reader<'_>) -> Option<Record> {
    let epoch = reader.i32()?;
    let mut metadata_hash = 0;
    reader.tagged_fields(|tag, payload| {
        if tag == TAG_METADATA_HASH {
            metadata_hash = Reader::new(payload).i64()?;
        }
        Some(())
    })?;
    Some(Record::GroupMetadata { epoch, metadata_hash })
}

fn read_member(reader: &mut Reader<'_>, member_id: String) -> Option<MemberMetadata> {
    let instance_id = reader.nullable_string()?;
    let rack_id = reader.nullable_string()?;
    let client_id = reader.string()?;
    let client_host = reader.string()?;
    let subscribed_topic_names = reader.strings()?;
    let subscribed_topic_regex = reader.nullable_string()?;
    let rebalance_timeout_ms = reader.i32()?;
    let server_assignor = reader.nullable_string()?;
    let mut classic = None;
    reader.tagged_fields(|tag, payload| {
        if tag == TAG_CLASSIC_MEMBER_METADATA {
            classic = read_classic(payload)?;
        }
        Some(())
    })?;
    Some(MemberMetadata {
        member_id,
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

/// The ClassicMemberMetadata tagged field's payload: `Some(None)` for an explicit null.
fn read_classic(payload: &[u8]) -> Option<Option<ClassicMemberMetadata>> {
    let mut reader = Reader::new(payload);
    // Kafka reads a marker ≤ 0 as null.
    if reader.uvarint()? == 0 {
        return Some(None);
    }
    let session_timeout_ms = reader.i32()?;
    let count = reader.array_len(CLASSIC_PROTOCOL_BYTES_MIN)?;
    let mut protocols = Vec::with_capacity(count);
    for _ in 0..count {
        let name = reader.string()?;
        let metadata = reader.bytes()?.to_vec();
        reader.skip_tagged()?;
        protocols.push((name, metadata));
    }
    reader.skip_tagged()?;
    Some(Some(ClassicMemberMetadata { session_timeout_ms, protocols }))
}

fn read_current(reader: &mut Reader<'_>, member_id: String) -> Option<CurrentAssignment> {
    let member_epoch = reader.i32()?;
    let previous_member_epoch = reader.i32()?;
    let state = MemberState::from_code(reader.i8()?);
    let assigned = reader.partitions()?;
    let pending_revocation = reader.partitions()?;
    reader.skip_tagged()?;
    Some(CurrentAssignment {
        member_id,
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
    })
}

/// Reads from a slice; every read is `None` once the bytes run out.
pub(in crate::services::groups) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(in crate::services::groups) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    /// Every byte was read.
    pub(in crate::services::groups) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(count)?;
        self.rest = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        let (&first, tail) = self.rest.split_first()?;
        self.rest = tail;
        Some(first)
    }

    fn i8(&mut self) -> Option<i8> {
        Some(i8::from_be_bytes([self.u8()?]))
    }

    pub(in crate::services::groups) fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    pub(in crate::services::groups) fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    pub(in crate::services::groups) fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    pub(in crate::services::groups) fn uuid(&mut self) -> Option<TopicId> {
        self.take(16)?.try_into().ok()
    }

    /// An unsigned varint of at most 5 bytes (Kafka's `readUnsignedVarint`).
    pub(in crate::services::groups) fn uvarint(&mut self) -> Option<u32> {
        let mut value = 0u32;
        for index in 0..5 {
            let byte = self.u8()?;
            value |= u32::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// A compact length: `None` inside for null (uvarint 0).
    pub(in crate::services::groups) fn compact_length(&mut self) -> Option<Option<usize>> {
        match self.uvarint()? {
            0 => Some(None),
            length => Some(Some(usize::try_from(length - 1).ok()?)),
        }
    }

    fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        match self.compact_length()? {
            None => Some(None),
            Some(length) => self.take(length).map(Some),
        }
    }

    /// Non-null compact bytes: a null reads as `None`, as Kafka refuses it.
    fn bytes(&mut self) -> Option<&'a [u8]> {
        self.nullable_bytes()?
    }

    pub(in crate::services::groups) fn string(&mut self) -> Option<String> {
        utf8(self.bytes()?)
    }

    fn nullable_string(&mut self) -> Option<Option<String>> {
        match self.nullable_bytes()? {
            None => Some(None),
            Some(bytes) => Some(Some(utf8(bytes)?)),
        }
    }

    /// A non-null compact array's count, if that many elements of `item_bytes_min` fit.
    pub(in crate::services::groups) fn array_len(
        &mut self,
        item_bytes_min: usize,
    ) -> Option<usize> {
        let count = self.compact_length()??;
        (count.checked_mul(item_bytes_min)? <= self.rest.len()).then_some(count)
    }

    fn strings(&mut self) -> Option<Vec<String>> {
        let count = self.array_len(STRING_BYTES_MIN)?;
        let mut strings = Vec::with_capacity(count);
        for _ in 0..count {
            strings.push(self.string()?);
        }
        Some(strings)
    }

    /// A []{TopicId uuid, Partitions []int32} array; a topic listed twice is merged.
    fn partitions(&mut self) -> Option<Partitions> {
        let topics = self.array_len(TOPIC_PARTITIONS_BYTES_MIN)?;
        let mut partitions = Partitions::new();
        for _ in 0..topics {
            let topic_id = self.uuid()?;
            let count = self.array_len(PARTITION_BYTES_MIN)?;
            let indexes = partitions.entry(topic_id).or_default();
            for _ in 0..count {
                indexes.insert(self.i32()?);
            }
            self.skip_tagged()?;
        }
        Some(partitions)
    }

    /// A tagged-field section, handing each field's tag and payload to `field`.
    fn tagged_fields(&mut self, mut field: impl FnMut(u32, &'a [u8]) -> Option<()>) -> Option<()> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            field(tag, self.take(size)?)?;
        }
        Some(())
    }

    pub(in crate::services::groups) fn skip_tagged(&mut self) -> Option<()> {
        self.tagged_fields(|_, _| Some(()))
    }

    /// A non-flexible, non-null string: i16 length + UTF-8.
    pub(in crate::services::groups) fn key_string(&mut self) -> Option<String> {
        let length = usize::try_from(self.i16()?).ok()?;
        utf8(self.take(length)?)
    }
}

fn utf8(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `decode` of a present value.
    fn read(key: &[u8], value: &[u8]) -> Option<(String, Record)> {
        decode(key, Some(value))
    }

    fn topic(byte: u8) -> TopicId {
        [byte; 16]
    }

    fn partitions(entries: &[(u8, &[i32])]) -> Partitions {
        entries
            .iter()
            .map(|(byte, indexes)| (topic(*byte), indexes.iter().copied().collect()))
            .collect()
    }

    fn consumer_member() -> MemberMetadata {
        MemberMetadata {
            member_id: "member-1".into(),
            instance_id: None,
            rack_id: None,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["orders".into(), "payments".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 300_000,
            server_assignor: None,
            classic: None,
        }
    }

    fn classic_member() -> MemberMetadata {
        MemberMetadata {
            member_id: "member-2".into(),
            instance_id: Some("instance-ü".into()),
            rack_id: Some("rack-a".into()),
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: Some("ord.*".into()),
            server_assignor: Some("uniform".into()),
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: 45_000,
                protocols: vec![("range".into(), vec![0, 3, 1, 2]), ("cooperative".into(), vec![])],
            }),
            ..consumer_member()
        }
    }

    fn every_record() -> Vec<Record> {
        vec![
            Record::GroupMetadata { epoch: 5, metadata_hash: 0 },
            Record::GroupMetadata { epoch: i32::MAX, metadata_hash: -7_123_456_789 },
            Record::GroupMetadataTombstone,
            Record::PartitionMetadata,
            Record::PartitionMetadataTombstone,
            Record::Member(consumer_member()),
            Record::Member(classic_member()),
            Record::Member(MemberMetadata {
                classic: Some(ClassicMemberMetadata::default()),
                ..MemberMetadata::default()
            }),
            Record::MemberTombstone { member_id: "member-1".into() },
            Record::TargetMetadata { assignment_epoch: 12 },
            Record::TargetMetadataTombstone,
            Record::TargetMember { member_id: "member-1".into(), partitions: Partitions::new() },
            Record::TargetMember {
                member_id: "member-1".into(),
                partitions: partitions(&[(1, &[0, 2, 4]), (2, &[]), (3, &[i32::MAX])]),
            },
            Record::TargetMemberTombstone { member_id: "member-1".into() },
            Record::Current(CurrentAssignment {
                member_id: "member-1".into(),
                member_epoch: 0,
                previous_member_epoch: 0,
                state: MemberState::Stable,
                assigned: Partitions::new(),
                pending_revocation: Partitions::new(),
            }),
            Record::Current(CurrentAssignment {
                member_id: "member-2".into(),
                member_epoch: 9,
                previous_member_epoch: 7,
                state: MemberState::UnrevokedPartitions,
                assigned: partitions(&[(1, &[0, 1])]),
                pending_revocation: partitions(&[(1, &[2]), (4, &[5, 6])]),
            }),
            Record::CurrentTombstone { member_id: "member-2".into() },
            Record::Regex {
                regex: "ord.*".into(),
                topics: vec!["orders".into(), "ordinals".into()],
                version: 42,
                timestamp_ms: 1_700_000_000_000,
            },
            Record::Regex {
                regex: "none.*".into(),
                topics: Vec::new(),
                version: 0,
                timestamp_ms: 0,
            },
            Record::RegexTombstone { regex: "ord.*".into() },
        ]
    }

    #[test]
    fn every_record_round_trips_and_tombstones_have_no_value() {
        for record in every_record() {
            let (key, value) = encode("group-ü", &record);
            assert!(is_consumer_group_key(&key), "{record:?}");
            let tombstone = format!("{record:?}").contains("Tombstone");
            assert_eq!(value.is_none(), tombstone, "{record:?}");
            assert_eq!(
                decode(&key, value.as_deref()),
                Some(("group-ü".to_string(), record.clone())),
                "{record:?}"
            );
        }
    }

    #[test]
    fn group_metadata_bytes_are_kafkas() {
        let (key, value) = encode("g", &Record::GroupMetadata { epoch: 5, metadata_hash: 0 });
        assert_eq!(key, [0x00, 0x03, 0x00, 0x01, b'g']);
        assert_eq!(value, Some(vec![0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00]));
        let (_, value) = encode("g", &Record::GroupMetadata { epoch: 5, metadata_hash: 1 });
        let expected = [0, 0, 0, 0, 0, 5, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(value.as_deref(), Some(&expected[..]));
        let (key, value) = encode("g", &Record::GroupMetadataTombstone);
        assert_eq!(key, [0x00, 0x03, 0x00, 0x01, b'g']);
        assert!(value.is_none());
    }

    #[test]
    fn member_metadata_bytes_are_kafkas_with_the_classic_struct_marker() {
        let member = MemberMetadata {
            member_id: "m".into(),
            client_id: "c".into(),
            client_host: "h".into(),
            subscribed_topic_names: vec!["t".into()],
            rebalance_timeout_ms: 1000,
            server_assignor: Some("u".into()),
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: 10,
                protocols: vec![("r".into(), vec![7])],
            }),
            ..MemberMetadata::default()
        };
        let (key, value) = encode("g", &Record::Member(member));
        assert_eq!(key, [0, 5, 0, 1, b'g', 0, 1, b'm']);
        #[rustfmt::skip]
        let expected = [
            0, 0, // value version
            0, 0, // instance id, rack id: null
            2, b'c', 2, b'h', // client id, client host
            2, 2, b't', // subscribed topic names
            0, // regex: null
            0, 0, 0x03, 0xe8, // rebalance timeout
            2, b'u', // server assignor
            1, 0, 12, // one tagged field: tag 0, 12 bytes
            1, // present
            0, 0, 0, 10, // session timeout
            2, 2, b'r', 2, 7, 0, // one protocol: name, metadata, tagged fields
            0, // the struct's tagged fields
        ];
        assert_eq!(value.as_deref(), Some(&expected[..]));
    }

    #[test]
    fn current_assignment_bytes_are_kafkas() {
        let current = CurrentAssignment {
            member_id: "m".into(),
            member_epoch: 3,
            previous_member_epoch: 2,
            state: MemberState::UnrevokedPartitions,
            assigned: [(topic(0x11), BTreeSet::from([0, 1]))].into(),
            pending_revocation: Partitions::new(),
        };
        let (_, value) = encode("g", &Record::Current(current));
        let mut expected = vec![0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 1, 2];
        expected.extend_from_slice(&topic(0x11));
        expected.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0]);
        assert_eq!(value, Some(expected));
    }

    #[test]
    fn every_truncation_of_a_key_or_value_is_rejected_without_panicking() {
        let samples = [
            Record::GroupMetadata { epoch: 5, metadata_hash: 99 },
            Record::Member(consumer_member()),
            Record::Member(classic_member()),
            Record::TargetMetadata { assignment_epoch: 3 },
            Record::TargetMember {
                member_id: "m".into(),
                partitions: partitions(&[(1, &[0, 2]), (2, &[1])]),
            },
            Record::Current(CurrentAssignment {
                member_id: "m".into(),
                member_epoch: 9,
                previous_member_epoch: 7,
                state: MemberState::UnrevokedPartitions,
                assigned: partitions(&[(1, &[0, 1])]),
                pending_revocation: partitions(&[(1, &[2]), (4, &[5, 6])]),
            }),
            Record::Regex {
                regex: "r".into(),
                topics: vec!["a".into()],
                version: 1,
                timestamp_ms: 2,
            },
        ];
        for record in samples {
            let (key, value) = encode("g", &record);
            let value = value.expect("a value");
            for cut in 0..value.len() {
                assert_eq!(read(&key, &value[..cut]), None, "{record:?} cut at {cut}");
            }
            for cut in 0..key.len() {
                assert_eq!(read(&key[..cut], &value), None, "{record:?} key cut {cut}");
                assert_eq!(decode(&key[..cut], None), None, "{record:?} key cut {cut}");
            }
        }
    }

    #[test]
    fn only_kafka_typed_consumer_group_keys_decode() {
        assert!(is_consumer_group_key(&[0, 3]));
        assert!(is_consumer_group_key(&[0, 8, 0, 0]));
        assert!(is_consumer_group_key(&[0, 16]));
        let others: [&[u8]; 9] =
            [&[], &[0], &[0, 0], &[0, 1], &[0, 2], &[0, 9], &[0, 15], &[1, 3], &[3, 0]];
        for key in others {
            assert!(!is_consumer_group_key(key), "{key:?}");
        }
        // Strata's offsets and group keys start with the group id's first byte.
        assert_eq!(read(b"g\0topic\x000", b"\0\0\0\0\0\x05\0"), None);
        assert_eq!(decode(b"group\0\0", None), None);
        assert_eq!(read(&[1, 3, 0, 1, b'g'], &[0, 0, 0, 0, 0, 5, 0]), None);
        // A Kafka classic-group key (type 2) is not one of these.
        assert_eq!(decode(&[0, 2, 0, 1, b'g'], None), None);
        // Bytes after a key's fields make another key.
        assert_eq!(decode(&[0, 3, 0, 1, b'g', 0], None), None);
        // A negative (null) key string does not read.
        assert_eq!(decode(&[0, 3, 0xff, 0xff], None), None);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        let key = [0, 3, 0, 1, b'g'];
        // MetadataHash 9, then trunk's CreationTimeMs (tag 1) and an unknown tag 5.
        let mut value = vec![0, 0, 0, 0, 0, 4, 3, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9, 1, 8];
        value.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        value.extend_from_slice(&[5, 3, 0xaa, 0xbb, 0xcc]);
        let expected = Record::GroupMetadata { epoch: 4, metadata_hash: 9 };
        assert_eq!(read(&key, &value), Some(("g".to_string(), expected)));

        // Trunk's AssignmentEpochs (tag 0 of each TopicPartitions) and an unknown top-level tag.
        let key = [0, 8, 0, 1, b'g', 0, 1, b'm'];
        let mut value = vec![0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 2];
        value.extend_from_slice(&topic(1));
        value.extend_from_slice(&[2, 0, 0, 0, 7, 1, 0, 5, 2, 0, 0, 0, 3]);
        value.extend_from_slice(&[1, 1, 9, 2, 0xaa, 0xbb]);
        let expected = CurrentAssignment {
            member_id: "m".into(),
            member_epoch: 3,
            previous_member_epoch: 2,
            state: MemberState::Stable,
            assigned: partitions(&[(1, &[7])]),
            pending_revocation: Partitions::new(),
        };
        assert_eq!(read(&key, &value), Some(("g".to_string(), Record::Current(expected))));
    }

    #[test]
    fn later_value_versions_and_trailing_bytes_read_as_version_zero() {
        let record = Record::Current(CurrentAssignment {
            member_id: "m".into(),
            member_epoch: 1,
            previous_member_epoch: 0,
            state: MemberState::UnreleasedPartitions,
            assigned: partitions(&[(2, &[3])]),
            pending_revocation: Partitions::new(),
        });
        let (key, value) = encode("g", &record);
        let mut value = value.expect("a value");
        value.extend_from_slice(&[0xde, 0xad]);
        assert_eq!(read(&key, &value), Some(("g".to_string(), record.clone())));
        value[1] = 1;
        assert_eq!(read(&key, &value), Some(("g".to_string(), record.clone())));
        value[0] = 0xff;
        assert_eq!(read(&key, &value), None);
        // Any value of a PartitionMetadata key, even one strata cannot read, is the record.
        let (key, _) = encode("g", &Record::PartitionMetadata);
        assert_eq!(read(&key, &[7, 7, 7]), Some(("g".to_string(), Record::PartitionMetadata)));
    }

    #[test]
    fn huge_lengths_are_rejected_before_allocating() {
        let member_key = [0, 5, 0, 1, b'g', 0, 1, b'm'];
        let target_key = [0, 7, 0, 1, b'g', 0, 1, b'm'];
        // A topic-partitions count of 2^32 - 2 with nothing behind it.
        assert_eq!(read(&target_key, &[0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]), None);
        // An instance id of 2^32 - 2 bytes.
        assert_eq!(read(&member_key, &[0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]), None);
        // A varint longer than five bytes.
        assert_eq!(read(&target_key, &[0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), None);
        // A tagged field bigger than the value.
        assert_eq!(read(&[0, 6, 0, 1, b'g'], &[0, 0, 0, 0, 0, 1, 1, 0, 0x7f]), None);
        // Null where Kafka refuses it: the client id, the topic-partitions array.
        assert_eq!(read(&member_key, &[0, 0, 0, 0, 0, 1, b'h', 1, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(read(&target_key, &[0, 0, 0, 0]), None);
    }

    #[test]
    fn an_explicitly_null_classic_struct_reads_as_a_consumer_member() {
        let (key, value) = encode("g", &Record::Member(consumer_member()));
        let mut value = value.expect("a value");
        // Replace the empty tagged section with tag 0 holding the null marker.
        value.pop();
        value.extend_from_slice(&[1, 0, 1, 0]);
        assert_eq!(read(&key, &value), Some(("g".to_string(), Record::Member(consumer_member()))));
    }

    #[test]
    fn member_states_keep_kafkas_codes() {
        for state in [
            MemberState::Stable,
            MemberState::UnrevokedPartitions,
            MemberState::UnreleasedPartitions,
            MemberState::Unknown,
        ] {
            assert_eq!(MemberState::from_code(state.code()), state);
        }
        assert_eq!(MemberState::Unknown.code(), 127);
        assert_eq!(MemberState::from_code(3), MemberState::Unknown);
        assert_eq!(MemberState::from_code(-1), MemberState::Unknown);
        assert_eq!(MemberState::UnrevokedPartitions.name(), "UNREVOKED_PARTITIONS");
    }

    #[test]
    fn an_overlong_key_string_is_cut_at_a_character_boundary() {
        let group = "é".repeat(KEY_STRING_BYTES_MAX);
        let (key, _) = encode(&group, &Record::GroupMetadataTombstone);
        let (decoded, _) = decode(&key, None).expect("a key");
        assert_eq!(decoded.len(), KEY_STRING_BYTES_MAX - 1);
        assert!(group.starts_with(&decoded));
    }
}
