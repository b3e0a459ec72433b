//! Strata's own tagged fields in Kafka messages: what the replica protocol needs beyond Kafka's
//! fields, carried where Kafka allows extensions (tagged fields of flexible versions, KIP-482).
//! A Kafka broker or client skips tags it does not know, so these never change what Kafka
//! peers see. Tags are numbered from 10000, far above Kafka's own (0, 1, ... per struct).
//!
//! - `DURABLE_END_TAG` on Fetch's `FetchPartition` (v12+): a follower's durable end, the
//!   offset below which it has synced what it appended (ARCHITECTURE.md, "Replication").
//!   An int64, big-endian, as Kafka encodes INT64.
//!
//! References: Kafka protocol guide, "Tagged fields"; KIP-482.

use bytes::Bytes;

/// `FetchPartition`: the follower's durable end.
pub const DURABLE_END_TAG: i32 = 10_000;

/// An int64 tag value.
pub fn encode_i64(value: i64) -> Bytes {
    Bytes::copy_from_slice(&value.to_be_bytes())
}

/// An int64 tag value; `None` when it is not exactly 8 bytes (a malformed tag is ignored, as
/// an unknown one would be).
pub fn decode_i64(value: &[u8]) -> Option<i64> {
    let bytes: [u8; 8] = value.try_into().ok()?;
    Some(i64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_int64_tag_round_trips_and_a_malformed_one_is_ignored() {
        for value in [0, 1, -1, i64::MAX, i64::MIN, 1 << 40] {
            assert_eq!(decode_i64(&encode_i64(value)), Some(value));
        }
        assert_eq!(decode_i64(&[1, 2, 3]), None);
        assert_eq!(decode_i64(&[0; 9]), None);
    }

    #[test]
    fn the_durable_end_survives_a_fetch_requests_encoding_and_kafka_skips_it() {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        use kafka_protocol::messages::FetchRequest;
        use kafka_protocol::protocol::{Decodable, Encodable};
        let mut partition = FetchPartition::default();
        partition.fetch_offset = 120;
        partition.unknown_tagged_fields.insert(DURABLE_END_TAG, encode_i64(100));
        let mut topic = FetchTopic::default();
        topic.partitions.push(partition);
        let mut request = FetchRequest::default();
        request.topics.push(topic);
        for version in [12i16, 13, 15, 17] {
            let mut buffer = bytes::BytesMut::new();
            request.encode(&mut buffer, version).unwrap();
            let decoded = FetchRequest::decode(&mut buffer.freeze(), version).unwrap();
            let partition = &decoded.topics[0].partitions[0];
            assert_eq!(partition.fetch_offset, 120);
            let tag = partition.unknown_tagged_fields.get(&DURABLE_END_TAG).unwrap();
            assert_eq!(decode_i64(tag), Some(100), "v{version}");
        }
    }
}
