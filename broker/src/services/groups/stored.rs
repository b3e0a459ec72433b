//! Group metadata records in `__consumer_offsets`: what a group coordinator needs to take a
//! group back after a restart without a rebalance (Kafka's GroupMetadata value, KIP-345 for
//! static members).
//!
//! Written on the coordinating shard when a generation becomes Stable (before the leader's
//! SyncGroup is answered), when a static member takes its place under a new member id, and
//! when the group becomes Empty; a tombstone when the group is deleted. Replayed at startup:
//! a group with members comes back Stable with the same generation, leader, member ids and
//! assignments, and every member's session starts again from the restart, so members that
//! keep heartbeating never notice the restart. Members that do not come back are evicted
//! after their session timeout as usual.
//!
//! Key: `group \0 \0` (an offsets key always has a topic and a partition between the NULs, so
//! the two never collide). Value (big-endian): version i16 (0), generation i32,
//! protocol_type str, protocol str, leader str, member count i32, then per member: id str,
//! instance id nullable str, client id str, client host str, session timeout ms i32,
//! rebalance timeout ms i32, metadata (for the chosen protocol) bytes, assignment bytes.
//! str/bytes = u32 length + bytes; a nullable str has length u32::MAX for null.

use super::state_machine::{Group, Member, State};
use bytes::Bytes;
use std::time::Instant;

const VALUE_VERSION: i16 = 0;
const NULL_LENGTH: u32 = u32::MAX;

/// The record key of `group`'s metadata.
pub fn key(group: &str) -> Vec<u8> {
    format!("{group}\0\0").into_bytes()
}

/// The group a metadata key names, or `None` for any other key.
pub fn parse_key(key: &[u8]) -> Option<String> {
    let group = key.strip_suffix(b"\0\0")?;
    if group.contains(&0) {
        return None;
    }
    String::from_utf8(group.to_vec()).ok()
}

/// A member as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as stored: its last Stable (or Empty) generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroup {
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub leader: String,
    pub members: Vec<StoredMember>,
}

impl StoredGroup {
    pub fn of(group: &Group) -> Self {
        StoredGroup {
            generation: group.generation,
            protocol_type: group.protocol_type.clone(),
            protocol: group.protocol.clone(),
            leader: group.leader.clone(),
            members: group
                .members
                .values()
                .map(|m| StoredMember {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    metadata: m.metadata_for(&group.protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// The live group: Stable with its members (sessions restarting at `now`), or Empty.
    pub fn into_group(self, now: Instant) -> Group {
        let mut group = Group::empty();
        group.state = if self.members.is_empty() { State::Empty } else { State::Stable };
        group.generation = self.generation;
        group.protocol_type = self.protocol_type;
        group.leader = if self.members.is_empty() { String::new() } else { self.leader };
        for m in self.members {
            let member = Member {
                id: m.id.clone(),
                instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: group.protocol_type.clone(),
                protocols: vec![(self.protocol.clone(), m.metadata)],
                assignment: m.assignment,
                last_seen: now,
                joined: false,
            };
            group.members.insert(m.id, member);
        }
        group.protocol = self.protocol;
        group
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
        out.extend_from_slice(&self.generation.to_be_bytes());
        put(&mut out, self.protocol_type.as_bytes());
        put(&mut out, self.protocol.as_bytes());
        put(&mut out, self.leader.as_bytes());
        let count = i32::try_from(self.members.len()).unwrap_or(i32::MAX);
        out.extend_from_slice(&count.to_be_bytes());
        for m in &self.members {
            put(&mut out, m.id.as_bytes());
            match &m.instance_id {
                Some(instance) => put(&mut out, instance.as_bytes()),
                None => out.extend_from_slice(&NULL_LENGTH.to_be_bytes()),
            }
            put(&mut out, m.client_id.as_bytes());
            put(&mut out, m.client_host.as_bytes());
            out.extend_from_slice(&m.session_timeout_ms.to_be_bytes());
            out.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
            put(&mut out, &m.metadata);
            put(&mut out, &m.assignment);
        }
        out
    }

    /// `None` for a value this version cannot read (truncated, unknown version, bad UTF-8).
    pub fn decode(value: &[u8]) -> Option<Self> {
        let mut reader = Reader { rest: value };
        if reader.i16()? != VALUE_VERSION {
            return None;
        }
        let generation = reader.i32()?;
        let protocol_type = reader.string()?;
        let protocol = reader.string()?;
        let leader = reader.string()?;
        let count = usize::try_from(reader.i32()?).ok()?;
        let mut members = Vec::with_capacity(count.min(super::state_machine::GROUP_MEMBERS_MAX));
        for _ in 0..count {
            members.push(StoredMember {
                id: reader.string()?,
                instance_id: reader.nullable_string()?,
                client_id: reader.string()?,
                client_host: reader.string()?,
                session_timeout_ms: reader.i32()?,
                rebalance_timeout_ms: reader.i32()?,
                metadata: Bytes::copy_from_slice(reader.bytes()?),
                assignment: Bytes::copy_from_slice(reader.bytes()?),
            });
        }
        reader.rest.is_empty().then_some(StoredGroup {
            generation,
            protocol_type,
            protocol,
            leader,
            members,
        })
    }
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    // Every field is bounded far below 4 GiB (metadata and assignments by
    // MEMBER_METADATA_BYTES_MAX, names by the request size).
    let length = u32::try_from(bytes.len()).unwrap_or(NULL_LENGTH - 1);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if self.rest.len() < count {
            return None;
        }
        let (head, tail) = self.rest.split_at(count);
        self.rest = tail;
        Some(head)
    }

    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn length(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let length = self.length()?;
        self.take(usize::try_from(length).ok()?)
    }

    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }

    fn nullable_string(&mut self) -> Option<Option<String>> {
        let length = self.length()?;
        if length == NULL_LENGTH {
            return Some(None);
        }
        let bytes = self.take(usize::try_from(length).ok()?)?;
        Some(Some(String::from_utf8(bytes.to_vec()).ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StoredGroup {
        StoredGroup {
            generation: 7,
            protocol_type: "consumer".into(),
            protocol: "range".into(),
            leader: "m-1".into(),
            members: vec![
                StoredMember {
                    id: "m-1".into(),
                    instance_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    session_timeout_ms: 10_000,
                    rebalance_timeout_ms: 30_000,
                    metadata: Bytes::from_static(b"\x00\x01meta"),
                    assignment: Bytes::from_static(b"assign"),
                },
                StoredMember {
                    id: "m-2".into(),
                    instance_id: Some("static-2".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.2".into(),
                    session_timeout_ms: 6_000,
                    rebalance_timeout_ms: 6_000,
                    metadata: Bytes::new(),
                    assignment: Bytes::new(),
                },
            ],
        }
    }

    #[test]
    fn values_round_trip_and_every_truncation_is_rejected() {
        let group = sample();
        let value = group.encode();
        assert_eq!(StoredGroup::decode(&value), Some(group));
        for cut in 0..value.len() {
            assert_eq!(StoredGroup::decode(&value[..cut]), None, "cut at {cut}");
        }
        let mut longer = value.clone();
        longer.push(0);
        assert_eq!(StoredGroup::decode(&longer), None);
        let mut huge_count = value[..2 + 4].to_vec();
        for _ in 0..3 {
            huge_count.extend_from_slice(&0u32.to_be_bytes());
        }
        huge_count.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(StoredGroup::decode(&huge_count), None);
    }

    #[test]
    fn group_keys_never_parse_as_offset_keys_and_back() {
        assert_eq!(parse_key(&key("my-group")), Some("my-group".into()));
        assert_eq!(parse_key(b"g\0topic\x000"), None);
        assert_eq!(super::super::offsets::parse_key(&key("my-group")), None);
    }

    #[test]
    fn a_restored_group_is_stable_with_its_members_or_empty() {
        let now = Instant::now();
        let group = sample().into_group(now);
        assert_eq!(group.state, State::Stable);
        assert_eq!(group.generation, 7);
        assert_eq!(group.leader, "m-1");
        assert_eq!(group.members.len(), 2);
        assert_eq!(group.members["m-1"].metadata_for("range"), Bytes::from_static(b"\x00\x01meta"));
        assert_eq!(group.members["m-2"].instance_id.as_deref(), Some("static-2"));
        assert_eq!(StoredGroup::of(&group), sample());
        let empty = StoredGroup { members: Vec::new(), ..sample() }.into_group(now);
        assert_eq!(empty.state, State::Empty);
        assert!(empty.leader.is_empty());
    }
}
