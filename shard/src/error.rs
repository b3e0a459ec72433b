//! `StorageError`: every way a storage operation can fail, typed so the broker maps each to one
//! Kafka error code at its boundary.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The client's batch is malformed or fails its CRC (Kafka: CORRUPT_MESSAGE).
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] wire::DecodeError),
    /// Kafka: UNSUPPORTED_COMPRESSION_TYPE.
    #[error("record batch uses unknown compression codec {0}")]
    UnknownCompression(u8),
    /// Kafka: MESSAGE_TOO_LARGE.
    #[error("record batch of {size_bytes} bytes exceeds max.message.bytes {max_message_bytes}")]
    BatchTooLarge { size_bytes: usize, max_message_bytes: usize },
    /// Kafka: OFFSET_OUT_OF_RANGE.
    #[error("offset {offset} is outside the log [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    /// Kafka: FENCED_LEADER_EPOCH.
    #[error("leader epoch {epoch} is older than the log's latest epoch {latest_epoch}")]
    StaleLeaderEpoch { epoch: i32, latest_epoch: i32 },
    /// Data read back from disk failed a check it passed when written (Kafka: KAFKA_STORAGE_ERROR).
    #[error("corrupt data in {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A stored batch failed its checks when read back (a damaged sealed segment): the batches
    /// before it are served, the reader gets this at it (Kafka: CORRUPT_MESSAGE).
    /// `first_report` is true the first time this log met this damage (log and count it once).
    #[error("damaged batch in {path} at position {position} (offset {offset}): {reason}")]
    DamagedBatch { path: PathBuf, position: u64, offset: i64, reason: String, first_report: bool },
    /// An earlier write failed; the log refuses further writes until reopened (Kafka:
    /// KAFKA_STORAGE_ERROR).
    #[error("log {0} is offline after an I/O failure")]
    Offline(PathBuf),
    /// The log was closed (shutdown or deletion).
    #[error("log {0} is closed")]
    Closed(PathBuf),
    /// Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER.
    #[error("producer {producer_id}: sequence {sequence} where {expected} was expected")]
    OutOfOrderSequence { producer_id: i64, sequence: i32, expected: i32 },
    /// Kafka: INVALID_PRODUCER_EPOCH.
    #[error(
        "producer {producer_id}: epoch {epoch} is older than the current epoch {current_epoch}"
    )]
    InvalidProducerEpoch { producer_id: i64, epoch: i16, current_epoch: i16 },
    /// Kafka: INVALID_TXN_STATE.
    #[error("producer {producer_id}: {reason}")]
    InvalidTxnState { producer_id: i64, reason: &'static str },
    /// Kafka: TRANSACTION_COORDINATOR_FENCED (a marker from an older coordinator).
    #[error(
        "producer {producer_id}: a marker of coordinator epoch {coordinator_epoch}, older than \
         {current}"
    )]
    TransactionCoordinatorFenced { producer_id: i64, coordinator_epoch: i32, current: i32 },
    /// A directory name that is not `<topic>-<partition>`, or a config out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
