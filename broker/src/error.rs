//! The broker's typed errors and the one place they become Kafka error codes.
//!
//! Owns: `BrokerError` (what a handler can fail with), `GroupError` (the group coordinator's
//! answers that are not a success), `MeshError` (a cross-core call that did not complete), and
//! `error_code`, the only function in the broker that produces a Kafka error code. Codes are
//! taken from kafka-protocol's `ResponseError` (generated from Kafka's `Errors.java`), never
//! typed by hand.
//! Invariant: `error_code` and `group_error` are `match`es with no catch-all arm, so adding a
//! variant forces a decision about its Kafka code.
//! References: Kafka protocol guide, "Error Codes".

use kafka_protocol::error::ResponseError;
use shard::StorageError;

/// The code of a successful answer.
pub const NONE: i16 = 0;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("unknown topic or partition {0}")]
    UnknownTopicOrPartition(String),
    #[error("no topic has the id {0}")]
    UnknownTopicId(String),
    #[error("invalid topic: {0}")]
    InvalidTopic(String),
    #[error("topic {0} already exists")]
    TopicAlreadyExists(String),
    #[error("invalid partitions: {0}")]
    InvalidPartitions(String),
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    /// A manual replica assignment Kafka's controller would refuse (the message says why).
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("invalid required acks {0}")]
    InvalidRequiredAcks(i16),
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error("offset metadata of {0} bytes exceeds the limit")]
    OffsetMetadataTooLarge(usize),
    /// A client sent a control batch (only brokers write those).
    #[error("control batches cannot be produced by clients")]
    ControlBatchFromClient,
    /// A batch whose records contradict its header or each other (Kafka's log validator).
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    /// Record timestamps outside the topic's `message.timestamp.*.max.ms`; `records` are the
    /// refused records' indices among the partition's records in the request (KIP-467).
    #[error("invalid timestamp: {reason}")]
    InvalidTimestamp { reason: String, records: Vec<i32> },
    /// Records without a key sent to a compacted topic (`records` as above).
    #[error("Compacted topic cannot accept message without key in topic partition {partition}.")]
    NullKeyOnCompactedTopic { partition: String, records: Vec<i32> },
    /// A transactional batch in a Produce request without a transactional id (Kafka answers
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
    #[error("a transactional batch in a request without a transactional id")]
    TransactionalBatchWithoutId,
    #[error("unsupported version {1} of {0}")]
    UnsupportedVersion(&'static str, i16),
    /// A codec the request's version may not carry (zstd before Produce v7).
    #[error("{0}")]
    UnsupportedCompression(String),
    /// The partition is placed on another node (no replication yet, so no other node serves it
    /// here either).
    #[error("this node does not lead {0}")]
    NotLeader(String),
    /// acks=all refused before the append: the ISR is smaller than `min.insync.replicas`.
    #[error("not enough in-sync replicas for {0}")]
    NotEnoughReplicas(String),
    /// acks=all appended, but the ISR shrank below `min.insync.replicas` before it was
    /// replicated.
    #[error("the in-sync replicas of {0} fell below min.insync.replicas after the append")]
    NotEnoughReplicasAfterAppend(String),
    #[error("timed out: {0}")]
    RequestTimedOut(String),
    /// The client's leader epoch for the partition is older than the partition's.
    #[error("the leader epoch of {0} is newer than the one sent")]
    FencedLeaderEpoch(String),
    /// The client's leader epoch is newer than this broker knows.
    #[error("the leader epoch sent for {0} is newer than this broker knows")]
    UnknownLeaderEpoch(String),
    /// The partition has no leader now (its only in-sync replica is fenced).
    #[error("{0} has no leader now")]
    LeaderNotAvailable(String),
    /// AlterPartition asked to add a replica that is fenced (KIP-841).
    #[error("{0}")]
    IneligibleReplica(String),
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Txn(#[from] TxnError),
    #[error(transparent)]
    Share(#[from] ShareError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// A change the broker's resources (the open-files limit) cannot hold (Kafka: a policy
    /// violation, with the reason).
    #[error("{0}")]
    ResourceLimit(String),
    /// A metadata change could not be persisted or published to every shard.
    #[error("metadata change failed: {0}")]
    MetadataUnavailable(String),
    /// The controller quorum has no leader this broker can reach (clients refresh their
    /// metadata and retry).
    #[error("no controller: {0}")]
    NoController(String),
    /// The quorum did not commit a change in time; it may still commit.
    #[error("{0}")]
    QuorumTimeout(String),
    /// ElectLeaders: the partition already has the leader the election would give it.
    #[error("leader election not needed for {0}")]
    ElectionNotNeeded(String),
    /// ElectLeaders (preferred): the first replica is not a live in-sync replica.
    #[error("{0}")]
    PreferredLeaderNotAvailable(String),
    /// ElectLeaders (unclean): no replica is live.
    #[error("{0}")]
    EligibleLeadersNotAvailable(String),
    /// A fetch names a session this shard does not hold (KIP-227).
    #[error("fetch session {0} not found")]
    FetchSessionIdNotFound(i32),
    /// A fetch's session epoch is not the one its session expects next.
    #[error("fetch session epoch {0} is not the next one")]
    InvalidFetchSessionEpoch(i32),
    /// A fetch names topics by id where its session used names, or the other way round.
    #[error("fetch session {0} names its topics the other way")]
    FetchSessionTopicIdError(i32),
    /// AlterPartitionReassignments: a cancellation of a partition that is not being moved.
    #[error("no reassignment of {0} is in progress")]
    NoReassignmentInProgress(String),
    /// A SCRAM credential that is not acceptable (an empty user name, iterations out of
    /// Kafka's bounds).
    #[error("{0}")]
    UnacceptableCredential(String),
    /// A SCRAM mechanism code Kafka does not define.
    #[error("{0}")]
    UnsupportedSaslMechanism(String),
    /// A request names something that does not exist (a SCRAM credential to delete or
    /// describe).
    #[error("{0}")]
    ResourceNotFound(String),
    /// ListOffsets on a leader whose high watermark has not reached the start of its epoch
    /// (retriable: it will once its followers fetch).
    #[error("{0}")]
    OffsetNotAvailable(String),
    /// The authorizer refused an operation on a topic (the topic's name).
    #[error("Topic authorization failed.")]
    TopicAuthorizationFailed(String),
    /// ... on a consumer group.
    #[error("Group authorization failed.")]
    GroupAuthorizationFailed(String),
    /// ... on the cluster.
    #[error("Cluster authorization failed.")]
    ClusterAuthorizationFailed,
    /// ... on a transactional id.
    #[error("Transactional Id authorization failed.")]
    TransactionalIdAuthorizationFailed(String),
    /// A request names the same resource twice where Kafka refuses it.
    #[error("{0}")]
    DuplicateResource(String),
    /// A part of a request left undone because another part of it was refused (Kafka's
    /// all-or-nothing answers, such as AddPartitionsToTxn's).
    #[error("not attempted: another part of the request was refused")]
    OperationNotAttempted,
    /// A SASL message out of its place in the exchange.
    #[error("{0}")]
    IllegalSaslState(String),
    /// A SASL login refused (the message says why, never with a secret).
    #[error("{0}")]
    SaslAuthenticationFailed(String),
    /// OffsetFetch with `require_stable`: the offset was committed in a transaction still
    /// open (KIP-447; the client asks again).
    #[error("the offset of {0} is in a transaction still open")]
    UnstableOffsetCommit(String),
}

/// What the group coordinator answers instead of a success (Kafka's classic group protocol).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    #[error("another member holds this group.instance.id")]
    FencedInstanceId,
    #[error("session timeout outside the broker's range")]
    InvalidSessionTimeout,
    #[error("no protocol in common with the group")]
    InconsistentGroupProtocol,
    #[error("the group is full")]
    GroupMaxSizeReached,
    /// KIP-394: the member must join again with the id it was given.
    #[error("a member id is required")]
    MemberIdRequired,
    #[error("the group has members")]
    NonEmptyGroup,
    #[error("no such group")]
    GroupIdNotFound,
    /// OffsetDelete of a topic a member of the group is subscribed to (KIP-496).
    #[error("a member of the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    /// The group's `__consumer_offsets` partition is not open on its coordinator.
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    /// Another broker leads the group's `__consumer_offsets` partition.
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    /// Writing the group's record failed (the message names the storage error).
    #[error("storing the group failed: {0}")]
    StoreFailed(String),
    /// KIP-848: the member's epoch is not one the coordinator can take (it must rejoin).
    #[error("The consumer group member has a greater member epoch than expected, or was fenced.")]
    FencedMemberEpoch,
    /// KIP-848: a commit or fetch with a member epoch older than the member's.
    #[error("The member epoch is stale.")]
    StaleMemberEpoch,
    /// KIP-848: a static member's instance id is still held by a live member.
    #[error("The instance id is still used by another member in the consumer group.")]
    UnreleasedInstanceId,
    /// KIP-848: a server assignor the broker does not offer (the message lists them).
    #[error("{0}")]
    UnsupportedAssignor(String),
    /// A request Kafka's coordinator refuses before it looks at the group (the message says
    /// why, as Kafka's does).
    #[error("{0}")]
    InvalidRequest(String),
    /// KIP-848: a regex subscription that does not compile.
    #[error("{0}")]
    InvalidRegularExpression(String),
    /// A request version the group's protocol does not allow (an OffsetCommit before v9 from
    /// a member of a consumer group).
    #[error("{0}")]
    UnsupportedVersion(String),
    /// An assignor failed (it cannot: its output is checked; kept so a failure is a code).
    #[error("{0}")]
    AssignorFailed(String),
}

/// What the transaction coordinator answers instead of a success (KIP-98).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// The producer id is not the transactional id's (or the id is unknown).
    #[error("the producer id does not belong to this transactional id")]
    InvalidProducerIdMapping,
    /// A newer producer with the same transactional id exists (KIP-588; older request versions
    /// answer INVALID_PRODUCER_EPOCH, see `TxnError::code_for_version`).
    #[error("a newer producer with this transactional id fenced this one")]
    ProducerFenced,
    /// Another operation of the transaction is in progress (markers being written); retry.
    #[error("a transition of this transaction is in progress")]
    ConcurrentTransactions,
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(&'static str),
    #[error("transaction timeout {0} ms out of range")]
    InvalidTransactionTimeout(i32),
    #[error("this broker does not coordinate the transactional id")]
    NotCoordinator,
    #[error("the transaction coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("no such transactional id")]
    TransactionalIdNotFound,
}

/// What share fetches and acknowledgements answer instead of a success (KIP-932).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// No share session for the member on this broker (SHARE_SESSION_NOT_FOUND).
    #[error("no share session for member {0}")]
    SessionNotFound(String),
    /// A session epoch other than the one expected (INVALID_SHARE_SESSION_EPOCH).
    #[error("share session epoch {got} where {expected} was expected")]
    InvalidSessionEpoch { got: i32, expected: i32 },
    /// Every share session slot is taken (SHARE_SESSION_LIMIT_REACHED).
    #[error("the share sessions of this broker are all taken")]
    SessionLimitReached,
    /// An acknowledgement of a record the member does not hold (INVALID_RECORD_STATE).
    #[error("{0}")]
    InvalidRecordState(String),
    /// A share state write or initialization at a state epoch the share coordinator has
    /// moved past: a tool reset the state (FENCED_STATE_EPOCH).
    #[error("{0}")]
    FencedStateEpoch(String),
}

/// Why a transactional batch was refused by partition verification (KIP-890 part 1): its
/// partition leader asked the transaction coordinator whether the partition is in the
/// producer's ongoing transaction. Named as Kafka's `ReplicaManager` names the coordinator's
/// answer to a producer (`VerifyError::from_coordinator_code`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The partition is not in the transaction (or the transaction is over): a late or stray
    /// batch that would otherwise open a transaction nobody ends (INVALID_TXN_STATE).
    #[error("the partition is not in the producer's ongoing transaction")]
    NotInTransaction,
    /// A newer producer of the transactional id exists (INVALID_PRODUCER_EPOCH, which
    /// producers expect here).
    #[error("the producer's epoch is not its transactional id's")]
    StaleEpoch,
    /// The producer id is not the transactional id's (INVALID_PRODUCER_ID_MAPPING).
    #[error("the producer id does not belong to the transactional id")]
    ProducerIdMapping,
    /// The coordinator could not answer now (moving, loading, a transition in progress,
    /// unreachable): retriable, NOT_ENOUGH_REPLICAS as in Kafka.
    #[error("the transaction could not be verified: {0}")]
    Unavailable(String),
}

impl VerifyError {
    /// The verification outcome of the coordinator's code for one partition (`None`: the
    /// partition is in the transaction).
    pub fn from_coordinator_code(code: i16) -> Option<Self> {
        use ResponseError as E;
        match code {
            NONE => None,
            code if code == E::InvalidTxnState.code() => Some(VerifyError::NotInTransaction),
            // Kafka does not show an authorization failure between brokers to the producer.
            code if code == E::ClusterAuthorizationFailed.code() => {
                Some(VerifyError::NotInTransaction)
            }
            code if code == E::ProducerFenced.code() || code == E::InvalidProducerEpoch.code() => {
                Some(VerifyError::StaleEpoch)
            }
            code if code == E::InvalidProducerIdMapping.code() => {
                Some(VerifyError::ProducerIdMapping)
            }
            code => Some(VerifyError::Unavailable(format!("the coordinator answered code {code}"))),
        }
    }
}

/// Why a cross-core call did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    #[error("shard {0} channel closed")]
    ChannelClosed(u16),
    #[error("shard {0} dropped the request")]
    Dropped(u16),
    #[error("no {0} service is registered on shard {1}")]
    NoService(&'static str, u16),
}

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;

impl BrokerError {
    /// KIP-467: the records a refused produce names (index among its partition's records) and
    /// the message each gets; empty for errors about the whole batch.
    pub fn record_errors(&self) -> Vec<(i32, String)> {
        match self {
            BrokerError::InvalidTimestamp { records, .. }
            | BrokerError::NullKeyOnCompactedTopic { records, .. } => {
                let message = self.to_string();
                records.iter().map(|index| (*index, message.clone())).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The Kafka error code for an error (the only mapping in the broker).
pub fn error_code(error: &BrokerError) -> i16 {
    let kafka = match error {
        BrokerError::Storage(storage) => return storage_error(storage).code(),
        BrokerError::UnknownTopicOrPartition(_) => ResponseError::UnknownTopicOrPartition,
        BrokerError::UnknownTopicId(_) => ResponseError::UnknownTopicId,
        BrokerError::InvalidTopic(_) => ResponseError::InvalidTopicException,
        BrokerError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        BrokerError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        BrokerError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        BrokerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        BrokerError::InvalidConfig(_) => ResponseError::InvalidConfig,
        BrokerError::InvalidRequest(_) => ResponseError::InvalidRequest,
        BrokerError::InvalidRequiredAcks(_) => ResponseError::InvalidRequiredAcks,
        BrokerError::Mesh(_) => ResponseError::UnknownServerError,
        BrokerError::OffsetMetadataTooLarge(_) => ResponseError::OffsetMetadataTooLarge,
        BrokerError::ControlBatchFromClient => ResponseError::InvalidRecord,
        BrokerError::InvalidRecord(_) => ResponseError::InvalidRecord,
        BrokerError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        BrokerError::NullKeyOnCompactedTopic { .. } => ResponseError::InvalidRecord,
        BrokerError::TransactionalBatchWithoutId => {
            ResponseError::TransactionalIdAuthorizationFailed
        }
        BrokerError::UnsupportedVersion(..) => ResponseError::UnsupportedVersion,
        BrokerError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType,
        BrokerError::NotLeader(_) => ResponseError::NotLeaderOrFollower,
        BrokerError::NotEnoughReplicas(_) => ResponseError::NotEnoughReplicas,
        BrokerError::NotEnoughReplicasAfterAppend(_) => ResponseError::NotEnoughReplicasAfterAppend,
        BrokerError::RequestTimedOut(_) => ResponseError::RequestTimedOut,
        BrokerError::LeaderNotAvailable(_) => ResponseError::LeaderNotAvailable,
        BrokerError::FencedLeaderEpoch(_) => ResponseError::FencedLeaderEpoch,
        BrokerError::IneligibleReplica(_) => ResponseError::IneligibleReplica,
        BrokerError::UnknownLeaderEpoch(_) => ResponseError::UnknownLeaderEpoch,
        BrokerError::Group(group) => group_error(group),
        BrokerError::Txn(txn) => txn_error(txn),
        BrokerError::Share(share) => match share {
            ShareError::SessionNotFound(_) => ResponseError::ShareSessionNotFound,
            ShareError::InvalidSessionEpoch { .. } => ResponseError::InvalidShareSessionEpoch,
            ShareError::SessionLimitReached => ResponseError::ShareSessionLimitReached,
            ShareError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
            ShareError::FencedStateEpoch(_) => ResponseError::FencedStateEpoch,
        },
        BrokerError::Verify(verify) => match verify {
            VerifyError::NotInTransaction => ResponseError::InvalidTxnState,
            VerifyError::StaleEpoch => ResponseError::InvalidProducerEpoch,
            VerifyError::ProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            VerifyError::Unavailable(_) => ResponseError::NotEnoughReplicas,
        },
        BrokerError::MetadataUnavailable(_) => ResponseError::UnknownServerError,
        BrokerError::NoController(_) => ResponseError::NotController,
        BrokerError::QuorumTimeout(_) => ResponseError::RequestTimedOut,
        BrokerError::ResourceLimit(_) => ResponseError::PolicyViolation,
        BrokerError::ElectionNotNeeded(_) => ResponseError::ElectionNotNeeded,
        BrokerError::PreferredLeaderNotAvailable(_) => ResponseError::PreferredLeaderNotAvailable,
        BrokerError::EligibleLeadersNotAvailable(_) => ResponseError::EligibleLeadersNotAvailable,
        BrokerError::NoReassignmentInProgress(_) => ResponseError::NoReassignmentInProgress,
        BrokerError::FetchSessionIdNotFound(_) => ResponseError::FetchSessionIdNotFound,
        BrokerError::InvalidFetchSessionEpoch(_) => ResponseError::InvalidFetchSessionEpoch,
        BrokerError::FetchSessionTopicIdError(_) => ResponseError::FetchSessionTopicIdError,
        BrokerError::UnacceptableCredential(_) => ResponseError::UnacceptableCredential,
        BrokerError::UnsupportedSaslMechanism(_) => ResponseError::UnsupportedSaslMechanism,
        BrokerError::ResourceNotFound(_) => ResponseError::ResourceNotFound,
        BrokerError::DuplicateResource(_) => ResponseError::DuplicateResource,
        BrokerError::OffsetNotAvailable(_) => ResponseError::OffsetNotAvailable,
        BrokerError::TopicAuthorizationFailed(_) => ResponseError::TopicAuthorizationFailed,
        BrokerError::GroupAuthorizationFailed(_) => ResponseError::GroupAuthorizationFailed,
        BrokerError::ClusterAuthorizationFailed => ResponseError::ClusterAuthorizationFailed,
        BrokerError::TransactionalIdAuthorizationFailed(_) => {
            ResponseError::TransactionalIdAuthorizationFailed
        }
        BrokerError::OperationNotAttempted => ResponseError::OperationNotAttempted,
        BrokerError::IllegalSaslState(_) => ResponseError::IllegalSaslState,
        BrokerError::SaslAuthenticationFailed(_) => ResponseError::SaslAuthenticationFailed,
        BrokerError::UnstableOffsetCommit(_) => ResponseError::UnstableOffsetCommit,
    };
    kafka.code()
}

fn storage_error(error: &StorageError) -> ResponseError {
    match error {
        StorageError::Io(_) | StorageError::Corrupt { .. } | StorageError::Offline(_) => {
            ResponseError::KafkaStorageError
        }
        StorageError::InvalidBatch(_) => ResponseError::CorruptMessage,
        StorageError::DamagedBatch { .. } => ResponseError::CorruptMessage,
        StorageError::UnknownCompression(_) => ResponseError::UnsupportedCompressionType,
        StorageError::BatchTooLarge { .. } => ResponseError::MessageTooLarge,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::StaleLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        StorageError::Closed(_) => ResponseError::NotLeaderOrFollower,
        StorageError::InvalidArgument(_) => ResponseError::InvalidConfig,
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        StorageError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        StorageError::TransactionCoordinatorFenced { .. } => {
            ResponseError::TransactionCoordinatorFenced
        }
    }
}

fn txn_error(error: &TxnError) -> ResponseError {
    match error {
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::ProducerFenced => ResponseError::ProducerFenced,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
        TxnError::InvalidTransactionTimeout(_) => ResponseError::InvalidTransactionTimeout,
        TxnError::NotCoordinator => ResponseError::NotCoordinator,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
    }
}

/// The code of a transaction coordinator's error for a request of `version`: requests older
/// than `fenced_since` get INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED
/// (KIP-588; InitProducerId v4, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2).
pub fn txn_error_code(error: &BrokerError, version: i16, fenced_since: i16) -> i16 {
    match error {
        BrokerError::Txn(TxnError::ProducerFenced) if version < fenced_since => {
            ResponseError::InvalidProducerEpoch.code()
        }
        other => error_code(other),
    }
}

fn group_error(error: &GroupError) -> ResponseError {
    match error {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::StoreFailed(_) => ResponseError::KafkaStorageError,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor(_) => ResponseError::UnsupportedAssignor,
        GroupError::InvalidRequest(_) => ResponseError::InvalidRequest,
        GroupError::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression,
        GroupError::UnsupportedVersion(_) => ResponseError::UnsupportedVersion,
        GroupError::AssignorFailed(_) => ResponseError::UnknownServerError,
    }
}

/// The code of a group coordinator answer (`NONE` for a success).
pub fn group_code<T>(result: &std::result::Result<T, GroupError>) -> i16 {
    match result {
        Ok(_) => NONE,
        Err(error) => group_error(error).code(),
    }
}

/// The code of a result (`NONE` for a success).
pub fn result_code<T>(result: &Result<T>) -> i16 {
    match result {
        Ok(_) => NONE,
        Err(error) => error_code(error),
    }
}

/// How the broker reads the codes in other brokers' answers (replication, transaction
/// markers) and in its own responses (leader hints): by name, here, never by number elsewhere.
pub mod answered {
    use kafka_protocol::error::ResponseError as E;

    /// OFFSET_OUT_OF_RANGE: the follower's offset is outside the leader's log.
    pub fn is_offset_out_of_range(code: i16) -> bool {
        code == E::OffsetOutOfRange.code()
    }

    /// FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR:
    /// the fetch session is gone; the next fetch is a full one.
    pub fn ends_fetch_session(code: i16) -> bool {
        [E::FetchSessionIdNotFound, E::InvalidFetchSessionEpoch, E::FetchSessionTopicIdError]
            .iter()
            .any(|error| error.code() == code)
    }

    /// A marker refused with this code is not sent again (Kafka's
    /// `TransactionMarkerRequestCompletionHandler`): the producer or the coordinator was
    /// fenced, or the partition is gone.
    pub fn marker_gives_up(code: i16) -> bool {
        [E::InvalidProducerEpoch, E::TransactionCoordinatorFenced, E::UnknownTopicOrPartition]
            .iter()
            .any(|error| error.code() == code)
    }

    /// The error a share coordinator on another broker answered (`routers::share_state`):
    /// the ones its caller acts on by name, else COORDINATOR_NOT_AVAILABLE (retried).
    pub fn share_state_error(code: i16, message: String) -> super::BrokerError {
        use super::{BrokerError, GroupError};
        match E::try_from_code(code) {
            Some(E::NotCoordinator) => BrokerError::Group(GroupError::NotCoordinator),
            Some(E::FencedLeaderEpoch) => BrokerError::FencedLeaderEpoch(message),
            Some(E::FencedStateEpoch) => {
                BrokerError::Share(super::ShareError::FencedStateEpoch(message))
            }
            Some(E::InvalidRequest) => BrokerError::InvalidRequest(message),
            Some(E::ClusterAuthorizationFailed) => BrokerError::ClusterAuthorizationFailed,
            _ => {
                tracing::debug!(code, %message, "share coordinator answered an error");
                BrokerError::Group(GroupError::CoordinatorNotAvailable)
            }
        }
    }

    /// A Produce another broker refused (a dead letter's write, `routers::dead_letters`).
    pub fn produce_error(code: i16, partition: &wire::ids::TopicPartition) -> super::BrokerError {
        super::BrokerError::RequestTimedOut(format!(
            "{partition}: the leader answered {}",
            name(code)
        ))
    }

    /// The error's name as Kafka's documentation writes it (`TOPIC_AUTHORIZATION_FAILED`),
    /// "NONE" for success, `UNKNOWN_<code>` for a code kafka-protocol does not know.
    pub fn name(code: i16) -> String {
        if code == super::NONE {
            return "NONE".into();
        }
        match E::try_from_code(code) {
            Some(E::Unknown(_)) | None => format!("UNKNOWN_{code}"),
            Some(error) => {
                let mut name = String::new();
                for (index, c) in format!("{error:?}").chars().enumerate() {
                    if c.is_ascii_uppercase() && index > 0 {
                        name.push('_');
                    }
                    name.push(c.to_ascii_uppercase());
                }
                name
            }
        }
    }

    /// An ACL refused the request (topic, group, cluster, transactional id, delegation
    /// token authorization failures).
    pub fn is_authorization_failure(code: i16) -> bool {
        [
            E::TopicAuthorizationFailed,
            E::GroupAuthorizationFailed,
            E::ClusterAuthorizationFailed,
            E::TransactionalIdAuthorizationFailed,
            E::DelegationTokenAuthorizationFailed,
        ]
        .iter()
        .any(|error| error.code() == code)
    }

    /// The named topic, partition or group does not exist.
    pub fn is_unknown_resource(code: i16) -> bool {
        [E::UnknownTopicOrPartition, E::UnknownTopicId, E::GroupIdNotFound]
            .iter()
            .any(|error| error.code() == code)
    }

    /// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH: answers that carry KIP-951's hint of
    /// the current leader.
    pub fn names_new_leader(code: i16) -> bool {
        code == E::NotLeaderOrFollower.code() || code == E::FencedLeaderEpoch.code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kafkas() {
        assert_eq!(error_code(&BrokerError::UnknownTopicOrPartition("t-0".into())), 3);
        assert_eq!(error_code(&BrokerError::Group(GroupError::MemberIdRequired)), 79);
        assert_eq!(error_code(&BrokerError::Group(GroupError::FencedInstanceId)), 82);
        assert_eq!(error_code(&BrokerError::UnsupportedVersion("ApiVersions", 9)), 35);
        assert_eq!(error_code(&BrokerError::TransactionalBatchWithoutId), 53);
        let keyless =
            BrokerError::NullKeyOnCompactedTopic { partition: "t-0".into(), records: vec![1, 3] };
        assert_eq!(error_code(&keyless), 87);
        assert_eq!(
            keyless.record_errors().iter().map(|(index, _)| *index).collect::<Vec<_>>(),
            [1, 3]
        );
        assert_eq!(group_code::<()>(&Err(GroupError::RebalanceInProgress)), 27);
        assert_eq!(answered::name(29), "TOPIC_AUTHORIZATION_FAILED");
        assert_eq!(answered::name(NONE), "NONE");
        assert_eq!(answered::name(-32000), "UNKNOWN_-32000");
        assert!(answered::is_authorization_failure(31) && !answered::is_authorization_failure(3));
        assert!(answered::is_offset_out_of_range(1));
        assert!([70, 71, 106].into_iter().all(answered::ends_fetch_session));
        assert!([47, 52, 3].into_iter().all(answered::marker_gives_up));
        assert!(!answered::marker_gives_up(6));
        assert!(answered::names_new_leader(6) && answered::names_new_leader(74));
        assert_eq!(group_code(&Ok(())), NONE);
    }
}
