//! `wire`: the Kafka wire formats strata speaks, with no I/O and no runtime.
//!
//! Owns: the Kafka v2 record-batch view (header fields, CRC32C check, in-place patch of the
//! broker-owned fields), a batch builder for tools and tests, and the varint codec records use.
//! Runs on: any core; everything here is plain functions over byte slices.
//!
//! Invariants:
//! 1. No I/O and no dependency on glommio or any async runtime.
//! 2. Nothing here panics on malformed input: every length read from the input is checked against
//!    the bytes actually present before it is used (`clippy::indexing_slicing` and
//!    `clippy::unwrap_used` are denied in this crate).
//!
//! References: Kafka protocol guide, "Record Batch" (message format v2, KIP-98).
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::unwrap_used))]

pub mod batch_builder;
pub mod checked_batch;
pub mod compaction;
pub mod compression;
pub mod error;
pub mod ids;
pub mod protocol;
pub mod record_batch;
pub mod record_stream;
pub mod response_chunks;
pub mod strata_tags;
pub mod txn_marker;
pub mod validate;
pub mod varint;

pub use batch_builder::{BatchRecord, RecordBatchBuilder};
pub use checked_batch::{CheckedBatch, CheckedBatchMut, FramedBatch};
pub use record_batch::{
    Compression, DecodeError, RecordBatchHeader, TimestampType, BATCH_HEADER_BYTES,
    BATCH_LENGTH_OFFSET, LOG_OVERHEAD_BYTES,
};
