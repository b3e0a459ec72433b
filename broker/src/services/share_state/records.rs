//! `__share_group_state` records in Kafka 4.x's own layout (`share-coordinator`'s
//! `ShareSnapshotKey`/`ShareSnapshotValue`, `CoordinatorRecordSerde`), so Kafka's tools read
//! them.
//!
//! Key: `record_type i16 = 0`, GroupId (i16-length string), TopicId (16 bytes), Partition i32.
//! Value: `value_version i16 = 0`, then in flexible encoding: SnapshotEpoch i32, StateEpoch
//! i32, LeaderEpoch i32, StartOffset i64, CreateTimestamp i64, WriteTimestamp i64,
//! StateBatches compact array of {FirstOffset i64, LastOffset i64, DeliveryState i8,
//! DeliveryCount i16, tagged fields}, tagged fields. A null value (tombstone) deletes the key.
//! strata writes only ShareSnapshot; a ShareUpdate (type 1) is not read (strata never writes
//! one).
//! Invariants: `decode(encode(r)) == r`; `decode` never panics, checks every length against
//! the bytes left before it allocates, skips unknown tagged fields (4.2's
//! DeliveryCompleteCount) and reads a later value version as version 0.
//! References: Kafka `share-coordinator/src/main/resources/common/message/ShareSnapshot{Key,
//! Value}.json`; KIP-932 ("Share group state").

pub use crate::services::shares::state::StateKey;
use crate::services::shares::state::{Persisted, RecordState, StateBatch};

const RECORD_TYPE_SNAPSHOT: i16 = 0;
const VALUE_VERSION: i16 = 0;
/// The bytes of one state batch in a value (to bound a count before allocating).
const BATCH_BYTES: usize = 8 + 8 + 1 + 2 + 1;

/// A share partition's state as the coordinator keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub state: Persisted,
}

pub fn encode_key(key: &StateKey) -> Vec<u8> {
    let (group, topic_id, partition) = key;
    let group = group.as_bytes();
    let length = group.len().min(i16::MAX as usize);
    let mut out = Vec::with_capacity(2 + 2 + length + 16 + 4);
    out.extend_from_slice(&RECORD_TYPE_SNAPSHOT.to_be_bytes());
    out.extend_from_slice(&(length as i16).to_be_bytes());
    out.extend_from_slice(group.get(..length).unwrap_or_default());
    out.extend_from_slice(topic_id);
    out.extend_from_slice(&partition.to_be_bytes());
    out
}

pub fn encode_value(snapshot: &Snapshot) -> Vec<u8> {
    let batches = &snapshot.state.batches;
    let mut out = Vec::with_capacity(2 + 36 + 5 + batches.len() * BATCH_BYTES + 1);
    out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    out.extend_from_slice(&snapshot.snapshot_epoch.to_be_bytes());
    out.extend_from_slice(&snapshot.state_epoch.to_be_bytes());
    out.extend_from_slice(&snapshot.leader_epoch.to_be_bytes());
    out.extend_from_slice(&snapshot.state.start_offset.to_be_bytes());
    out.extend_from_slice(&snapshot.create_timestamp.to_be_bytes());
    out.extend_from_slice(&snapshot.write_timestamp.to_be_bytes());
    put_uvarint(&mut out, batches.len() as u32 + 1);
    for batch in batches {
        out.extend_from_slice(&batch.first_offset.to_be_bytes());
        out.extend_from_slice(&batch.last_offset.to_be_bytes());
        out.push(batch.state.id() as u8);
        out.extend_from_slice(&batch.delivery_count.to_be_bytes());
        out.push(0); // no tagged fields
    }
    out.push(0); // no tagged fields
    out
}

/// The key of a ShareSnapshot record; `None` for any other record or bytes that do not read.
pub fn decode_key(bytes: &[u8]) -> Option<StateKey> {
    let mut reader = Reader(bytes);
    if reader.i16()? != RECORD_TYPE_SNAPSHOT {
        return None;
    }
    let length = usize::try_from(reader.i16()?).ok()?;
    let group = String::from_utf8(reader.take(length)?.to_vec()).ok()?;
    let topic_id: [u8; 16] = reader.take(16)?.try_into().ok()?;
    let partition = reader.i32()?;
    Some((group, topic_id, partition))
}

pub fn decode_value(bytes: &[u8]) -> Option<Snapshot> {
    let mut reader = Reader(bytes);
    if reader.i16()? < VALUE_VERSION {
        return None;
    }
    let snapshot_epoch = reader.i32()?;
    let state_epoch = reader.i32()?;
    let leader_epoch = reader.i32()?;
    let start_offset = reader.i64()?;
    let create_timestamp = reader.i64()?;
    let write_timestamp = reader.i64()?;
    let count = usize::try_from(reader.uvarint()?.checked_sub(1)?).ok()?;
    if count.checked_mul(BATCH_BYTES)? > reader.0.len() {
        return None;
    }
    let mut batches = Vec::with_capacity(count);
    for _ in 0..count {
        let first_offset = reader.i64()?;
        let last_offset = reader.i64()?;
        let state = match reader.take(1)?.first().copied()? as i8 {
            0 => RecordState::Available,
            2 => RecordState::Acknowledged,
            4 => RecordState::Archived,
            _ => return None,
        };
        let delivery_count = reader.i16()?;
        reader.skip_tagged()?;
        batches.push(StateBatch { first_offset, last_offset, state, delivery_count });
    }
    reader.skip_tagged()?;
    Some(Snapshot {
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        create_timestamp,
        write_timestamp,
        state: Persisted { start_offset, batches },
    })
}

fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..count)?, self.0.get(count..)?);
        self.0 = rest;
        Some(head)
    }

    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    fn uvarint(&mut self) -> Option<u32> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = *self.take(1)?.first()?;
            value |= u32::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn skip_tagged(&mut self) -> Option<()> {
        let fields = self.uvarint()?;
        for _ in 0..fields {
            let _tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            self.take(size)?;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        Snapshot {
            snapshot_epoch: 3,
            state_epoch: 1,
            leader_epoch: 7,
            create_timestamp: 1_700_000_000_000,
            write_timestamp: 1_700_000_000_500,
            state: Persisted {
                start_offset: 42,
                batches: vec![
                    StateBatch {
                        first_offset: 42,
                        last_offset: 44,
                        state: RecordState::Available,
                        delivery_count: 1,
                    },
                    StateBatch {
                        first_offset: 45,
                        last_offset: 45,
                        state: RecordState::Acknowledged,
                        delivery_count: 2,
                    },
                ],
            },
        }
    }

    #[test]
    fn a_snapshot_round_trips_and_its_key_is_kafkas() {
        let key = ("g".to_string(), [9u8; 16], 5);
        let encoded = encode_key(&key);
        assert_eq!(&encoded[..5], &[0, 0, 0, 1, b'g']);
        assert_eq!(decode_key(&encoded), Some(key));
        let value = encode_value(&snapshot());
        assert_eq!(decode_value(&value), Some(snapshot()));
        // 2 + 3*4 + 3*8 bytes, then the array's length (2 batches + 1).
        assert_eq!(value[38], 3);
    }

    #[test]
    fn every_truncation_is_rejected_without_panicking() {
        let value = encode_value(&snapshot());
        for cut in 0..value.len() {
            assert_eq!(decode_value(&value[..cut]), None, "cut at {cut}");
        }
        let key = encode_key(&("group".to_string(), [1; 16], 0));
        for cut in 0..key.len() {
            assert_eq!(decode_key(&key[..cut]), None, "cut at {cut}");
        }
    }
}
