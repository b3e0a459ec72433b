//! `DecodeError`: why bytes read from a socket or a disk are not a usable record batch or
//! record. Every decoder in this crate returns it.

/// Why a byte sequence is not a usable record batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated input: needed {needed} bytes, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("batch length {batch_length} is outside 49..={batch_bytes_max}")]
    BadBatchLength { batch_length: i64, batch_bytes_max: usize },
    #[error("unsupported magic {0} (only v2 record batches are stored)")]
    BadMagic(i8),
    #[error("CRC32C mismatch: header says {stored:#010x}, bytes give {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("varint longer than its type allows")]
    VarintTooLong,
    #[error("invalid record: {0}")]
    BadRecord(&'static str),
    #[error("records inflate past this pass's budget of {budget} bytes")]
    OverBudget { budget: usize },
    #[error("last offset delta {0} is negative")]
    BadLastOffsetDelta(i32),
}
