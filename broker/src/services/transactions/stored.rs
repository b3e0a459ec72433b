//! `__transaction_state` records: Kafka's own TransactionLogKey v0 and TransactionLogValue v0
//! (`TransactionLog.scala`), so `kafka-dump-log --transaction-log-decoder` reads them.
//!
//! Key: `key_version i16 = 0, transactional_id string (i16 length)`. Value: `value_version
//! i16 = 0, producer_id i64, producer_epoch i16, timeout_ms i32, state i8, partitions (i32
//! count, -1 null; per topic: topic string, i32 count, i32 partition each),
//! last_update_ms i64, start_ms i64`. A null value (tombstone) removes the id.

use super::state_machine::{TxnMetadata, TxnState};
use std::collections::{BTreeMap, BTreeSet};
use wire::ids::TopicPartition;

/// The record key of `transactional_id`.
pub fn key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

/// The transactional id of a record key; `None` for a key of another version or shape.
pub fn parse_key(bytes: &[u8]) -> Option<String> {
    let mut reader = Reader(bytes);
    if reader.i16()? != 0 {
        return None;
    }
    let id = reader.string()?;
    reader.0.is_empty().then_some(id)
}

/// The record value of a transaction's metadata.
pub fn value(metadata: &TxnMetadata) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&metadata.producer_id.to_be_bytes());
    out.extend_from_slice(&metadata.producer_epoch.to_be_bytes());
    out.extend_from_slice(&metadata.timeout_ms.to_be_bytes());
    out.push(metadata.state as u8);
    if metadata.state == TxnState::Empty {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for partition in &metadata.partitions {
            by_topic.entry(partition.topic.as_str()).or_default().push(partition.partition.0);
        }
        out.extend_from_slice(&(by_topic.len() as i32).to_be_bytes());
        for (topic, partitions) in by_topic {
            put_string(&mut out, topic);
            out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for partition in partitions {
                out.extend_from_slice(&partition.to_be_bytes());
            }
        }
    }
    out.extend_from_slice(&metadata.last_update_ms.to_be_bytes());
    out.extend_from_slice(&metadata.start_ms.to_be_bytes());
    out
}

/// A transaction's metadata from its record value; `None` when it does not read.
pub fn parse_value(bytes: &[u8]) -> Option<TxnMetadata> {
    let mut reader = Reader(bytes);
    if reader.i16()? != 0 {
        return None;
    }
    let producer_id = reader.i64()?;
    let producer_epoch = reader.i16()?;
    let timeout_ms = reader.i32()?;
    let state = TxnState::from_id(reader.take(1)?[0] as i8)?;
    let mut partitions = BTreeSet::new();
    let topics = reader.i32()?;
    for _ in 0..topics.max(0) {
        let topic = reader.string()?;
        let count = reader.i32()?;
        if count < 0 || count as usize > reader.0.len() / 4 {
            return None;
        }
        for _ in 0..count {
            partitions.insert(TopicPartition::new(topic.clone(), reader.i32()?));
        }
    }
    let last_update_ms = reader.i64()?;
    let start_ms = reader.i64()?;
    reader.0.is_empty().then_some(TxnMetadata {
        producer_id,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
    })
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    let len = i16::try_from(text.len()).unwrap_or(i16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&text.as_bytes()[..len as usize]);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(count)?;
        self.0 = tail;
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
    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_in_kafkas_layout() {
        assert_eq!(key("tx"), vec![0, 0, 0, 2, b't', b'x']);
        assert_eq!(parse_key(&key("tx-ü")), Some("tx-ü".to_string()));
        assert_eq!(parse_key(&[0, 1, 0, 0]), None);
        let mut metadata = TxnMetadata::new(42, 3, 60_000, 1_000);
        metadata.state = TxnState::Ongoing;
        metadata.partitions.insert(TopicPartition::new("a", 1));
        metadata.partitions.insert(TopicPartition::new("a", 0));
        metadata.partitions.insert(TopicPartition::new("b", 7));
        metadata.start_ms = 900;
        let bytes = value(&metadata);
        // version, pid, epoch, timeout, state, 2 topics: "a" [0, 1] and "b" [7], times
        assert_eq!(bytes.len(), 2 + 8 + 2 + 4 + 1 + 4 + (2 + 1 + 4 + 8) + (2 + 1 + 4 + 4) + 16);
        assert_eq!(parse_value(&bytes), Some(metadata.clone()));
        // Empty writes a null partition list.
        let empty = TxnMetadata::new(42, 4, 60_000, 2_000);
        let bytes = value(&empty);
        assert_eq!(&bytes[17..21], &(-1i32).to_be_bytes());
        assert_eq!(parse_value(&bytes), Some(empty));
        for cut in 0..bytes.len() {
            assert_eq!(parse_value(&bytes[..cut]), None, "cut at {cut}");
        }
    }
}
