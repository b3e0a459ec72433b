//! Zero-copy view of a Kafka v2 record batch (magic 2).
//!
//! Owns: reading the 61-byte batch header, checking a batch's framing and CRC32C, and patching the
//! fields the broker owns (base offset, partition leader epoch, and the max timestamp under
//! LogAppendTime) in place. Records themselves are only read by the few places that must
//! (see `RecordBatchHeader::records`).
//!
//! Layout (big-endian), from the Kafka protocol guide, "Record Batch":
//! ```text
//!  0 baseOffset int64        8 batchLength int32     12 partitionLeaderEpoch int32
//! 16 magic int8             17 crc uint32 (CRC32C of bytes 21..end)
//! 21 attributes int16       23 lastOffsetDelta int32 27 baseTimestamp int64
//! 35 maxTimestamp int64     43 producerId int64      51 producerEpoch int16
//! 53 baseSequence int32     57 recordCount int32     61 records...
//! ```
//! The CRC does not cover the first 21 bytes; storage checks those by structure instead (length
//! bounds, magic, offset continuity, leader-epoch history).

pub use crate::error::DecodeError;

/// Bytes before `batchLength` counts: base offset (8) and the length field itself (4).
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The size of the fixed batch header; records follow it.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Where the `batchLength` field sits.
pub const BATCH_LENGTH_OFFSET: usize = 8;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
/// The attribute bit of LogAppendTime batches (bit 3).
const TIMESTAMP_TYPE_LOG_APPEND_TIME: i16 = 0x08;
/// Attribute bit 4: the batch belongs to a transaction.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
/// Attribute bit 5: a control batch (transaction markers).
pub const CONTROL_FLAG: i16 = 0x20;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
const BASE_TIMESTAMP_OFFSET: usize = 27;
const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
const RECORD_COUNT_OFFSET: usize = 57;
/// The only message format strata stores.
pub const MAGIC_V2: i8 = 2;

const _: () = assert!(RECORD_COUNT_OFFSET + 4 == BATCH_HEADER_BYTES);
const _: () = assert!(CRC_OFFSET + 4 == ATTRIBUTES_OFFSET);

/// The compression codec in a batch's attributes (bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    /// A codec id Kafka does not define (5-7); such a batch is rejected by the broker.
    Unknown(u8),
}

/// Which clock a batch's timestamps come from (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    let mut field = [0u8; 8];
    if let Some(src) = bytes.get(at..at + 8) {
        field.copy_from_slice(src);
    }
    i64::from_be_bytes(field)
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    let mut field = [0u8; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        field.copy_from_slice(src);
    }
    i32::from_be_bytes(field)
}

fn be_i16(bytes: &[u8], at: usize) -> i16 {
    let mut field = [0u8; 2];
    if let Some(src) = bytes.get(at..at + 2) {
        field.copy_from_slice(src);
    }
    i16::from_be_bytes(field)
}

fn put_be(bytes: &mut [u8], at: usize, value: &[u8]) {
    if let Some(dst) = bytes.get_mut(at..at + value.len()) {
        dst.copy_from_slice(value);
    }
}

/// Reads the total size (header + records) of the batch at the front of `input` from its first 12
/// bytes, checking it against `batch_bytes_max`. Needs only `LOG_OVERHEAD_BYTES` of input.
pub fn batch_size_from_prefix(input: &[u8], batch_bytes_max: usize) -> Result<usize, DecodeError> {
    if input.len() < LOG_OVERHEAD_BYTES {
        return Err(DecodeError::Truncated { needed: LOG_OVERHEAD_BYTES, available: input.len() });
    }
    let batch_length = i64::from(be_i32(input, BATCH_LENGTH_OFFSET));
    let total = batch_length + LOG_OVERHEAD_BYTES as i64;
    if batch_length < (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i64
        || total > batch_bytes_max as i64
    {
        return Err(DecodeError::BadBatchLength { batch_length, batch_bytes_max });
    }
    Ok(total as usize)
}

/// The header fields of the batch at the front of `input`, read from its first 61 bytes only
/// (for walking a log without reading whole batches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPeek {
    pub base_offset: i64,
    pub last_offset: i64,
    pub size_bytes: usize,
    pub partition_leader_epoch: i32,
    pub max_timestamp: i64,
}

/// Reads a batch's header fields from its first `BATCH_HEADER_BYTES`, checking length and magic.
pub fn peek_batch(input: &[u8], batch_bytes_max: usize) -> Result<BatchPeek, DecodeError> {
    let size_bytes = batch_size_from_prefix(input, batch_bytes_max)?;
    if input.len() < BATCH_HEADER_BYTES {
        return Err(DecodeError::Truncated { needed: BATCH_HEADER_BYTES, available: input.len() });
    }
    let magic = input.get(MAGIC_OFFSET).copied().unwrap_or_default() as i8;
    if magic != MAGIC_V2 {
        return Err(DecodeError::BadMagic(magic));
    }
    let last_offset_delta = be_i32(input, LAST_OFFSET_DELTA_OFFSET);
    if last_offset_delta < 0 {
        return Err(DecodeError::BadLastOffsetDelta(last_offset_delta));
    }
    let base_offset = be_i64(input, 0);
    Ok(BatchPeek {
        base_offset,
        last_offset: base_offset + i64::from(last_offset_delta),
        size_bytes,
        partition_leader_epoch: be_i32(input, PARTITION_LEADER_EPOCH_OFFSET),
        max_timestamp: be_i64(input, MAX_TIMESTAMP_OFFSET),
    })
}

/// A checked view of one record batch: `bytes` is exactly one batch whose length field matches
/// and whose magic is 2. The CRC is checked separately (`verify_crc`) because not every reader
/// needs to pay for it.
#[derive(Debug, Clone, Copy)]
pub struct RecordBatchHeader<'a> {
    bytes: &'a [u8],
}

thread_local! {
    static HEADER_PARSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many batch headers this thread has parsed (`RecordBatchHeader::parse`): a test checks
/// that a produce parses each batch once (a thread-local add per parse costs next to nothing).
pub fn header_parses() -> u64 {
    HEADER_PARSES.with(|parses| parses.get())
}

impl<'a> RecordBatchHeader<'a> {
    /// Parses the batch at the front of `input` (which may hold more after it) and returns the
    /// view of exactly that batch.
    pub fn parse(input: &'a [u8], batch_bytes_max: usize) -> Result<Self, DecodeError> {
        HEADER_PARSES.with(|parses| parses.set(parses.get() + 1));
        let size = batch_size_from_prefix(input, batch_bytes_max)?;
        let bytes = input
            .get(..size)
            .ok_or(DecodeError::Truncated { needed: size, available: input.len() })?;
        let magic = bytes.get(MAGIC_OFFSET).copied().unwrap_or_default() as i8;
        if magic != MAGIC_V2 {
            return Err(DecodeError::BadMagic(magic));
        }
        let header = Self { bytes };
        if header.last_offset_delta() < 0 {
            return Err(DecodeError::BadLastOffsetDelta(header.last_offset_delta()));
        }
        Ok(header)
    }

    /// The view of a batch `checked_batch::CheckedBatch` checked already (no parse).
    pub(crate) fn checked(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The whole batch, header included.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Total size of the batch in bytes (`batchLength + 12`).
    pub fn size_bytes(&self) -> usize {
        self.bytes.len()
    }

    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, 0)
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, PARTITION_LEADER_EPOCH_OFFSET)
    }
    pub fn magic(&self) -> i8 {
        self.bytes.get(MAGIC_OFFSET).copied().unwrap_or_default() as i8
    }
    pub fn stored_crc(&self) -> u32 {
        be_i32(self.bytes, CRC_OFFSET) as u32
    }
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES_OFFSET)
    }
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA_OFFSET)
    }
    /// `baseOffset + lastOffsetDelta`: the offset of the batch's last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.last_offset_delta())
    }
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP_OFFSET)
    }
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP_OFFSET)
    }
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID_OFFSET)
    }
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH_OFFSET)
    }
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE_OFFSET)
    }
    pub fn record_count(&self) -> i32 {
        be_i32(self.bytes, RECORD_COUNT_OFFSET)
    }
    pub fn compression(&self) -> Compression {
        match self.attributes() & 0x07 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => Compression::Unknown(other as u8),
        }
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_LOG_APPEND_TIME != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_FLAG != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_FLAG != 0
    }

    /// CRC32C of the bytes the CRC covers (attributes to the end).
    pub fn computed_crc(&self) -> u32 {
        crc32c::crc32c(self.bytes.get(ATTRIBUTES_OFFSET..).unwrap_or_default())
    }

    /// Checks the stored CRC against the bytes.
    pub fn verify_crc(&self) -> Result<(), DecodeError> {
        let (stored, computed) = (self.stored_crc(), self.computed_crc());
        if stored == computed {
            Ok(())
        } else {
            Err(DecodeError::CrcMismatch { stored, computed })
        }
    }

    /// The records of an uncompressed batch, decoded one at a time.
    pub fn records(&self) -> RecordIter<'a> {
        RecordIter {
            remaining: self.bytes.get(BATCH_HEADER_BYTES..).unwrap_or_default(),
            left: self.record_count().max(0),
        }
    }
}

/// One decoded record of an uncompressed batch; borrows key and value from the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub header_count: i32,
    /// The headers' encoded section (`header_count` of them, already checked): `headers()`.
    pub headers_section: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// The record's headers, (key, value), in order.
    pub fn headers(&self) -> Vec<(&'a [u8], Option<&'a [u8]>)> {
        let mut section = self.headers_section;
        let mut headers = Vec::new();
        for _ in 0..self.header_count.max(0) {
            // The section was walked when the record was decoded: these cannot fail.
            let Ok(key) = take_nullable(&mut section) else { break };
            let Ok(value) = take_nullable(&mut section) else { break };
            headers.push((key.unwrap_or_default(), value));
        }
        headers
    }
}

/// Iterator over the records of an uncompressed batch (see `RecordBatchHeader::records`).
pub struct RecordIter<'a> {
    remaining: &'a [u8],
    left: i32,
}

fn take<'a>(input: &mut &'a [u8], len: usize) -> Result<&'a [u8], DecodeError> {
    if input.len() < len {
        return Err(DecodeError::Truncated { needed: len, available: input.len() });
    }
    let (head, tail) = input.split_at(len);
    *input = tail;
    Ok(head)
}

fn take_varint(input: &mut &[u8]) -> Result<i32, DecodeError> {
    let (value, used) = crate::varint::get_varint(input)?;
    take(input, used)?;
    Ok(value)
}

fn take_varlong(input: &mut &[u8]) -> Result<i64, DecodeError> {
    let (value, used) = crate::varint::get_varlong(input)?;
    take(input, used)?;
    Ok(value)
}

fn take_nullable<'a>(input: &mut &'a [u8]) -> Result<Option<&'a [u8]>, DecodeError> {
    let len = take_varint(input)?;
    if len < 0 {
        return Ok(None);
    }
    take(input, len as usize).map(Some)
}

impl<'a> RecordIter<'a> {
    /// Iterates `count` records laid out in `records` (a decompressed records section).
    pub fn over(records: &'a [u8], count: i32) -> Self {
        Self { remaining: records, left: count.max(0) }
    }

    /// The next record together with its encoded bytes (length prefix included), for callers
    /// that copy records verbatim (compaction).
    pub fn next_with_raw(&mut self) -> Option<Result<(RecordView<'a>, &'a [u8]), DecodeError>> {
        let before = self.remaining;
        let record = self.next()?;
        let used = before.len() - self.remaining.len();
        Some(record.map(|view| (view, before.get(..used).unwrap_or_default())))
    }

    fn decode_one(&mut self) -> Result<RecordView<'a>, DecodeError> {
        let length = take_varint(&mut self.remaining)?;
        if length < 0 {
            return Err(DecodeError::BadRecord("negative record length"));
        }
        let mut body = take(&mut self.remaining, length as usize)?;
        let _attributes = take(&mut body, 1)?;
        let timestamp_delta = take_varlong(&mut body)?;
        let offset_delta = take_varint(&mut body)?;
        let key = take_nullable(&mut body)?;
        let value = take_nullable(&mut body)?;
        let header_count = take_varint(&mut body)?;
        let headers_section = body;
        for _ in 0..header_count.max(0) {
            let key_len = take_varint(&mut body)?;
            if key_len < 0 {
                return Err(DecodeError::BadRecord("null header key"));
            }
            take(&mut body, key_len as usize)?;
            take_nullable(&mut body)?;
        }
        if !body.is_empty() {
            return Err(DecodeError::BadRecord("record length disagrees with its fields"));
        }
        Ok(RecordView { timestamp_delta, offset_delta, key, value, header_count, headers_section })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left <= 0 {
            return None;
        }
        self.left -= 1;
        let record = self.decode_one();
        if record.is_err() {
            self.left = 0;
        }
        Some(record)
    }
}

/// Mutable access to the broker-owned fields of one batch.
pub struct RecordBatchMut<'a> {
    bytes: &'a mut [u8],
}

impl<'a> RecordBatchMut<'a> {
    /// Checks the framing like `RecordBatchHeader::parse`, but `input` must be exactly one batch.
    pub fn new(input: &'a mut [u8], batch_bytes_max: usize) -> Result<Self, DecodeError> {
        let size = RecordBatchHeader::parse(input, batch_bytes_max)?.size_bytes();
        if size != input.len() {
            return Err(DecodeError::BadBatchLength {
                batch_length: input.len() as i64 - LOG_OVERHEAD_BYTES as i64,
                batch_bytes_max,
            });
        }
        Ok(Self { bytes: input })
    }

    /// The view of a batch `checked_batch::CheckedBatch` checked already (no parse).
    pub(crate) fn checked(bytes: &'a mut [u8]) -> Self {
        Self { bytes }
    }

    pub fn header(&self) -> RecordBatchHeader<'_> {
        RecordBatchHeader { bytes: self.bytes }
    }

    /// Sets the base offset (outside the CRC, so the CRC stays valid).
    pub fn set_base_offset(&mut self, base_offset: i64) {
        put_be(self.bytes, 0, &base_offset.to_be_bytes());
    }

    /// Sets the partition leader epoch (outside the CRC).
    pub fn set_partition_leader_epoch(&mut self, leader_epoch: i32) {
        put_be(self.bytes, PARTITION_LEADER_EPOCH_OFFSET, &leader_epoch.to_be_bytes());
    }

    /// Sets the idempotent-producer fields and rewrites the CRC (a client reusing one encoded
    /// batch for many sends, as strata-bench does).
    pub fn set_producer_and_crc(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) {
        put_be(self.bytes, PRODUCER_ID_OFFSET, &producer_id.to_be_bytes());
        put_be(self.bytes, PRODUCER_EPOCH_OFFSET, &producer_epoch.to_be_bytes());
        put_be(self.bytes, BASE_SEQUENCE_OFFSET, &base_sequence.to_be_bytes());
        let crc = self.header().computed_crc();
        put_be(self.bytes, CRC_OFFSET, &crc.to_be_bytes());
    }

    /// Stamps the batch with the broker's clock under `message.timestamp.type=LogAppendTime`
    /// (Kafka's `setMaxTimestamp(LOG_APPEND_TIME, now)`): the timestamp-type bit and the max
    /// timestamp, then the CRC. Readers take every record's timestamp from the max timestamp.
    pub fn set_log_append_time_and_crc(&mut self, now_ms: i64) {
        let attributes = self.header().attributes() | TIMESTAMP_TYPE_LOG_APPEND_TIME;
        put_be(self.bytes, ATTRIBUTES_OFFSET, &attributes.to_be_bytes());
        self.set_max_timestamp_and_crc(now_ms);
    }

    /// Sets the max timestamp and rewrites the CRC (a header that disagrees with its records).
    pub fn set_max_timestamp_and_crc(&mut self, max_timestamp: i64) {
        put_be(self.bytes, MAX_TIMESTAMP_OFFSET, &max_timestamp.to_be_bytes());
        let crc = self.header().computed_crc();
        put_be(self.bytes, CRC_OFFSET, &crc.to_be_bytes());
    }
}

/// After a batch's records section was replaced: its length, codec bits (attributes 0-2, the
/// other bits kept) and CRC, from what `batch` now holds.
pub(crate) fn rewrite_length_codec_and_crc(
    batch: &mut [u8],
    codec_bits: i16,
) -> Result<(), DecodeError> {
    if batch.len() < BATCH_HEADER_BYTES {
        return Err(DecodeError::Truncated { needed: BATCH_HEADER_BYTES, available: batch.len() });
    }
    let length = i32::try_from(batch.len() - LOG_OVERHEAD_BYTES)
        .map_err(|_| DecodeError::BadRecord("batch too large"))?;
    put_be(batch, BATCH_LENGTH_OFFSET, &length.to_be_bytes());
    let attributes = (be_i16(batch, ATTRIBUTES_OFFSET) & !0x07) | codec_bits;
    put_be(batch, ATTRIBUTES_OFFSET, &attributes.to_be_bytes());
    let crc = crc32c::crc32c(batch.get(ATTRIBUTES_OFFSET..).unwrap_or_default());
    put_be(batch, CRC_OFFSET, &crc.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchRecord, RecordBatchBuilder};

    fn sample_batch() -> Vec<u8> {
        let mut builder = RecordBatchBuilder::new(1_700_000_000_000);
        builder.producer(7, 3, 11);
        builder.push(BatchRecord {
            key: Some(b"k1"),
            value: Some(b"value one"),
            timestamp_delta: 0,
        });
        builder.push(BatchRecord { key: None, value: Some(b"value two"), timestamp_delta: 5 });
        builder.push(BatchRecord { key: Some(b"k3"), value: None, timestamp_delta: 9 });
        builder.build()
    }

    #[test]
    fn producer_fields_can_be_rewritten_with_a_valid_crc() {
        let mut bytes = sample_batch();
        let mut view = RecordBatchMut::new(&mut bytes, 1 << 20).expect("batch");
        view.set_producer_and_crc(99, 2, 1234);
        let header = view.header();
        assert_eq!(
            (header.producer_id(), header.producer_epoch(), header.base_sequence()),
            (99, 2, 1234)
        );
        assert!(header.verify_crc().is_ok());
    }

    #[test]
    fn header_fields_read_back_what_the_builder_wrote() {
        let bytes = sample_batch();
        let header = RecordBatchHeader::parse(&bytes, 1 << 20).expect("valid batch");
        assert_eq!(header.size_bytes(), bytes.len());
        assert_eq!(header.base_offset(), 0);
        assert_eq!(header.magic(), 2);
        assert_eq!(header.last_offset_delta(), 2);
        assert_eq!(header.record_count(), 3);
        assert_eq!(header.base_timestamp(), 1_700_000_000_000);
        assert_eq!(header.max_timestamp(), 1_700_000_000_009);
        assert_eq!(header.producer_id(), 7);
        assert_eq!(header.producer_epoch(), 3);
        assert_eq!(header.base_sequence(), 11);
        assert_eq!(header.compression(), Compression::None);
        assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
        assert!(!header.is_transactional() && !header.is_control());
        header.verify_crc().expect("builder writes a correct CRC");
        let records: Vec<_> = header.records().collect::<Result<_, _>>().expect("records decode");
        assert_eq!(records.len(), 3);
        assert_eq!(records[1].key, None);
        assert_eq!(records[1].value, Some(&b"value two"[..]));
        assert_eq!(records[2].offset_delta, 2);
        assert_eq!(records[2].timestamp_delta, 9);
        assert_eq!(records[2].value, None);
    }

    #[test]
    fn patching_broker_owned_fields_keeps_the_crc_valid() {
        let mut bytes = sample_batch();
        let mut batch = RecordBatchMut::new(&mut bytes, 1 << 20).expect("valid batch");
        batch.set_base_offset(1234);
        batch.set_partition_leader_epoch(9);
        batch.header().verify_crc().expect("offset and epoch are outside the CRC");
        batch.set_max_timestamp_and_crc(42);
        let header = batch.header();
        assert_eq!((header.base_offset(), header.last_offset()), (1234, 1236));
        assert_eq!(header.partition_leader_epoch(), 9);
        assert_eq!(header.max_timestamp(), 42);
        header.verify_crc().expect("CRC rewritten after the timestamp patch");
    }

    #[test]
    fn every_flipped_byte_in_the_crc_range_is_detected() {
        let original = sample_batch();
        for position in ATTRIBUTES_OFFSET..original.len() {
            let mut bytes = original.clone();
            bytes[position] ^= 0x01;
            let outcome = RecordBatchHeader::parse(&bytes, 1 << 20).and_then(|h| h.verify_crc());
            assert!(outcome.is_err(), "flip at {position} went unnoticed");
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = sample_batch();
        for cut in 0..bytes.len() {
            assert!(RecordBatchHeader::parse(&bytes[..cut], 1 << 20).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn huge_or_tiny_length_prefixes_are_rejected_before_use() {
        let mut bytes = sample_batch();
        bytes[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            RecordBatchHeader::parse(&bytes, 1 << 20),
            Err(DecodeError::BadBatchLength { .. })
        ));
        bytes[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(
            RecordBatchHeader::parse(&bytes, 1 << 20),
            Err(DecodeError::BadBatchLength { .. })
        ));
        let mut bytes = sample_batch();
        bytes[16] = 1;
        assert_eq!(RecordBatchHeader::parse(&bytes, 1 << 20).err(), Some(DecodeError::BadMagic(1)));
    }

    #[test]
    fn random_garbage_never_panics_the_parser() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let len = rng.gen_range(0..200);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if bytes.len() > 16 && rng.gen_bool(0.5) {
                bytes[16] = 2;
                let claimed = (bytes.len() as i32 - 12).max(0);
                bytes[8..12].copy_from_slice(&claimed.to_be_bytes());
            }
            if let Ok(header) = RecordBatchHeader::parse(&bytes, 1 << 20) {
                let _ = header.verify_crc();
                for record in header.records() {
                    let _ = record;
                }
            }
        }
    }
}
