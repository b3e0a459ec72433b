//! Builds uncompressed Kafka v2 record batches, for the CLI, the load generator and tests.
//!
//! The broker never rebuilds a client's batch; this exists for the places that create batches
//! themselves. References: Kafka protocol guide, "Record Batch" and "Record".

use crate::record_batch::{BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2};
use crate::varint::{put_varint, put_varlong, varlong_len};

/// One record to put in a batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// Milliseconds after the batch's base timestamp.
    pub timestamp_delta: i64,
}

/// Accumulates records and writes one v2 batch with a valid CRC32C.
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records: Vec<u8>,
    record_count: i32,
    max_timestamp_delta: i64,
    /// Attribute bits besides the codec: transactional (0x10) and control (0x20).
    flags: i16,
}

impl RecordBatchBuilder {
    /// A builder for a batch whose first record is stamped `base_timestamp` (ms since the epoch).
    pub fn new(base_timestamp: i64) -> Self {
        Self {
            base_timestamp,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records: Vec::new(),
            record_count: 0,
            max_timestamp_delta: 0,
            flags: 0,
        }
    }

    /// Marks the batch as part of a transaction (attribute bit 4).
    pub fn transactional(&mut self) {
        self.flags |= crate::record_batch::TRANSACTIONAL_FLAG;
    }

    /// Marks the batch as a control batch (attribute bit 5; transaction markers).
    pub fn control(&mut self) {
        self.flags |= crate::record_batch::CONTROL_FLAG;
    }

    /// Marks the batch as written by an idempotent producer.
    pub fn producer(&mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
    }

    /// The number of records pushed so far.
    pub fn record_count(&self) -> i32 {
        self.record_count
    }

    /// The size the batch would have if built now.
    pub fn size_bytes(&self) -> usize {
        BATCH_HEADER_BYTES + self.records.len()
    }

    /// Appends a record; its offset delta is its position in the batch.
    pub fn push(&mut self, record: BatchRecord<'_>) {
        self.push_with_headers(record, &[]);
    }

    /// Appends a record with headers (key, value) in order.
    pub fn push_with_headers(&mut self, record: BatchRecord<'_>, headers: &[(&[u8], &[u8])]) {
        let offset_delta = self.record_count;
        let headers_len: usize = headers
            .iter()
            .map(|(key, value)| {
                varlong_len(key.len() as i64)
                    + key.len()
                    + varlong_len(value.len() as i64)
                    + value.len()
            })
            .sum();
        let field_len = |field: Option<&[u8]>| match field {
            Some(bytes) => varlong_len(bytes.len() as i64) + bytes.len(),
            None => varlong_len(-1),
        };
        let body_len = 1
            + varlong_len(record.timestamp_delta)
            + varlong_len(i64::from(offset_delta))
            + field_len(record.key)
            + field_len(record.value)
            + varlong_len(headers.len() as i64)
            + headers_len;
        put_varint(&mut self.records, body_len as i32);
        self.records.push(0);
        put_varlong(&mut self.records, record.timestamp_delta);
        put_varint(&mut self.records, offset_delta);
        for field in [record.key, record.value] {
            match field {
                Some(bytes) => {
                    put_varint(&mut self.records, bytes.len() as i32);
                    self.records.extend_from_slice(bytes);
                }
                None => put_varint(&mut self.records, -1),
            }
        }
        put_varint(&mut self.records, headers.len() as i32);
        for (key, value) in headers {
            put_varint(&mut self.records, key.len() as i32);
            self.records.extend_from_slice(key);
            put_varint(&mut self.records, value.len() as i32);
            self.records.extend_from_slice(value);
        }
        self.record_count += 1;
        self.max_timestamp_delta = self.max_timestamp_delta.max(record.timestamp_delta);
    }

    /// Writes the batch (base offset 0, leader epoch -1, CreateTime, uncompressed).
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_bytes());
        self.build_into(&mut out);
        out
    }

    /// Writes the batch with its records compressed by `codec` (attributes bits 0-2 set).
    pub fn build_compressed(
        &self,
        codec: crate::Compression,
    ) -> Result<Vec<u8>, crate::DecodeError> {
        let records = crate::compression::compress(codec, &self.records)?;
        let attributes: i16 = match codec {
            crate::Compression::None => 0,
            crate::Compression::Gzip => 1,
            crate::Compression::Snappy => 2,
            crate::Compression::Lz4 => 3,
            crate::Compression::Zstd => 4,
            crate::Compression::Unknown(other) => i16::from(other),
        };
        let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + records.len());
        self.write_batch(&mut out, attributes, &records);
        Ok(out)
    }

    /// Appends the batch to `out`.
    pub fn build_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        self.write_batch(out, 0, &self.records);
        debug_assert_eq!(out.len() - start, self.size_bytes());
    }

    /// Writes header (base offset 0, leader epoch -1) and `records`, then the CRC32C.
    fn write_batch(&self, out: &mut Vec<u8>, attributes: i16, records: &[u8]) {
        let batch_length = (BATCH_HEADER_BYTES + records.len() - LOG_OVERHEAD_BYTES) as i32;
        out.extend_from_slice(&0i64.to_be_bytes());
        out.extend_from_slice(&batch_length.to_be_bytes());
        out.extend_from_slice(&(-1i32).to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&0u32.to_be_bytes());
        let crc_start = out.len();
        out.extend_from_slice(&(attributes | self.flags).to_be_bytes());
        out.extend_from_slice(&(self.record_count - 1).max(0).to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&(self.base_timestamp + self.max_timestamp_delta).to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.record_count.to_be_bytes());
        out.extend_from_slice(records);
        let crc = crc32c::crc32c(out.get(crc_start..).unwrap_or_default());
        if let Some(field) = out.get_mut(crc_start - 4..crc_start) {
            field.copy_from_slice(&crc.to_be_bytes());
        }
    }
}
