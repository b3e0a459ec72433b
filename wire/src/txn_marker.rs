//! Transaction markers (KIP-98): the control batch a transaction coordinator has written to
//! every partition of a transaction when it ends, and the reading of one.
//!
//! Layout (Kafka's `EndTransactionMarker`, `ControlRecordType`): a v2 batch with attributes
//! 0x30 (transactional, control; uncompressed, CreateTime), the producer's id and epoch, base
//! sequence -1 and one record whose key is `version i16 = 0, type i16` (0 abort, 1 commit) and
//! whose value is `version i16 = 0, coordinator_epoch i32`. 78 bytes in all.

use crate::batch_builder::{BatchRecord, RecordBatchBuilder};
use crate::record_batch::RecordBatchHeader;

/// `ControlRecordType.ABORT`.
pub const ABORT: i16 = 0;
/// `ControlRecordType.COMMIT`.
pub const COMMIT: i16 = 1;
/// Size of a marker batch.
pub const MARKER_BATCH_BYTES: usize = 78;

/// What a marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// The control batch ending `producer_id`'s transaction (base offset 0 and leader epoch -1: the
/// partition leader stamps both).
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    now_ms: i64,
) -> Vec<u8> {
    let mut key = [0u8; 4];
    let kind = if marker.commit { COMMIT } else { ABORT };
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut builder = RecordBatchBuilder::new(now_ms);
    builder.producer(producer_id, producer_epoch, -1);
    builder.transactional();
    builder.control();
    builder.push(BatchRecord { key: Some(&key), value: Some(&value), timestamp_delta: 0 });
    builder.build()
}

/// The marker a control batch carries; `None` for any other batch, a control record of
/// another type (KRaft's) or one that does not read.
pub fn parse_marker(header: &RecordBatchHeader<'_>) -> Option<EndTxnMarker> {
    if !header.is_control() {
        return None;
    }
    let record = header.records().next()?.ok()?;
    let key = record.key?;
    let kind = i16::from_be_bytes(key.get(2..4)?.try_into().ok()?);
    if kind != ABORT && kind != COMMIT {
        return None;
    }
    let value = record.value?;
    let coordinator_epoch = i32::from_be_bytes(value.get(2..6)?.try_into().ok()?);
    Some(EndTxnMarker { commit: kind == COMMIT, coordinator_epoch })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_kafkas_78_byte_control_batch_and_reads_back() {
        for commit in [true, false] {
            let marker = EndTxnMarker { commit, coordinator_epoch: 7 };
            let bytes = marker_batch(42, 3, marker, 1_000);
            assert_eq!(bytes.len(), MARKER_BATCH_BYTES);
            let header = RecordBatchHeader::parse(&bytes, 1 << 20).expect("parses");
            header.verify_crc().expect("crc");
            assert_eq!(header.attributes(), 0x30);
            assert_eq!(
                (header.producer_id(), header.producer_epoch(), header.base_sequence()),
                (42, 3, -1)
            );
            assert!(header.is_transactional() && header.is_control());
            assert_eq!(parse_marker(&header), Some(marker));
        }
        let plain = RecordBatchBuilder::new(0).build();
        let header = RecordBatchHeader::parse(&plain, 1 << 20).expect("parses");
        assert_eq!(parse_marker(&header), None);
    }
}
