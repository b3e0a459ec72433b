//! `BrokerError` and the one place it becomes a Kafka error code.
//!
//! Invariant: `error_code` is a `match` with no catch-all arm, so adding a variant forces a
//! decision about its Kafka code. References: Kafka protocol guide, "Error Codes".

use shard::StorageError;

/// Kafka error codes strata returns (protocol guide numbering).
pub mod code {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const INVALID_RECORD: i16 = 87;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REQUEST: i16 = 42;
    pub const INVALID_CONFIG: i16 = 40;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
}

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("unknown topic or partition {0}")]
    UnknownTopicOrPartition(String),
    #[error("invalid topic: {0}")]
    InvalidTopic(String),
    #[error("topic {0} already exists")]
    TopicAlreadyExists(String),
    #[error("invalid partitions: {0}")]
    InvalidPartitions(String),
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("invalid required acks {0}")]
    InvalidRequiredAcks(i16),
    #[error("a shard did not answer: {0}")]
    ShardUnavailable(String),
    #[error("illegal generation {0} for group {1}")]
    IllegalGeneration(i32, String),
    #[error("unknown member {0:?} of group {1}")]
    UnknownMemberId(String, String),
    #[error("offset metadata of {0} bytes exceeds the limit")]
    OffsetMetadataTooLarge(usize),
    #[error("invalid group id {0:?}")]
    InvalidGroupId(String),
    /// A client sent a control batch (only brokers write those).
    #[error("control batches cannot be produced by clients")]
    ControlBatchFromClient,
    /// A record without a key sent to a compacted topic.
    #[error("compacted topic {0} cannot accept a record without a key")]
    NullKeyOnCompactedTopic(String),
    /// A transactional batch; transactions are not implemented.
    #[error("transactional produce is not supported")]
    TransactionsUnsupported,
    /// A group-coordinator answer that already is a Kafka error code.
    #[error("group error code {0}")]
    GroupError(i16),
}

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;

/// The Kafka error code for an error (the only mapping in the broker).
pub fn error_code(error: &BrokerError) -> i16 {
    match error {
        BrokerError::Storage(storage) => match storage {
            StorageError::Io(_) | StorageError::Corrupt { .. } | StorageError::Offline(_) => {
                code::KAFKA_STORAGE_ERROR
            }
            StorageError::InvalidBatch(_) => code::CORRUPT_MESSAGE,
            StorageError::UnknownCompression(_) => code::UNSUPPORTED_COMPRESSION_TYPE,
            StorageError::BatchTooLarge { .. } => code::MESSAGE_TOO_LARGE,
            StorageError::OffsetOutOfRange { .. } => code::OFFSET_OUT_OF_RANGE,
            StorageError::StaleLeaderEpoch { .. } => code::FENCED_LEADER_EPOCH,
            StorageError::Closed(_) => code::NOT_LEADER_OR_FOLLOWER,
            StorageError::InvalidArgument(_) => code::INVALID_CONFIG,
            StorageError::OutOfOrderSequence { .. } => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
            StorageError::InvalidProducerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
            StorageError::UnknownProducerId { .. } => code::UNKNOWN_PRODUCER_ID,
        },
        BrokerError::UnknownTopicOrPartition(_) => code::UNKNOWN_TOPIC_OR_PARTITION,
        BrokerError::InvalidTopic(_) => code::INVALID_TOPIC_EXCEPTION,
        BrokerError::TopicAlreadyExists(_) => code::TOPIC_ALREADY_EXISTS,
        BrokerError::InvalidPartitions(_) => code::INVALID_PARTITIONS,
        BrokerError::InvalidReplicationFactor(_) => code::INVALID_REPLICATION_FACTOR,
        BrokerError::InvalidConfig(_) => code::INVALID_CONFIG,
        BrokerError::InvalidRequest(_) => code::INVALID_REQUEST,
        BrokerError::InvalidRequiredAcks(_) => code::INVALID_REQUIRED_ACKS,
        BrokerError::ShardUnavailable(_) => code::UNKNOWN_SERVER_ERROR,
        BrokerError::IllegalGeneration(..) => code::ILLEGAL_GENERATION,
        BrokerError::UnknownMemberId(..) => code::UNKNOWN_MEMBER_ID,
        BrokerError::OffsetMetadataTooLarge(_) => code::OFFSET_METADATA_TOO_LARGE,
        BrokerError::InvalidGroupId(_) => code::INVALID_GROUP_ID,
        BrokerError::ControlBatchFromClient => code::INVALID_RECORD,
        BrokerError::TransactionsUnsupported => code::INVALID_TXN_STATE,
        BrokerError::NullKeyOnCompactedTopic(_) => code::INVALID_RECORD,
        BrokerError::GroupError(code) => *code,
    }
}
