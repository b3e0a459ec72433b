//! Every API strata advertises, at every version it advertises, against the real binary: the
//! request is answered (never a closed connection), the answer decodes, and carries no error.
//! This catches response fields set on versions that do not have them. (Envelope is served
//! between brokers and not advertised: `broker/tests/envelope_in_process.rs`.)

mod common;

use broker::cli::Client;
use bytes::Bytes;
use common::Broker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

fn name(value: &str) -> TopicName {
    TopicName(StrBytes::from_string(value.to_string()))
}

fn batch() -> Bytes {
    let mut builder = wire::RecordBatchBuilder::new(1_700_000_000_000);
    builder.push(wire::BatchRecord { key: Some(b"k"), value: Some(b"v"), timestamp_delta: 0 });
    Bytes::from(builder.build())
}

/// The transactional id the transaction APIs use (initialised before the matrix runs).
const MATRIX_TXN: &str = "matrix-tx";

/// `matrix_id` is the topic id of "matrix": Fetch v13+ names topics by id only; `txn` is the
/// (producer id, epoch) of `MATRIX_TXN`. The transaction APIs run in registry order: every
/// AddPartitionsToTxn version (the first opens the transaction, the rest add nothing new),
/// the v4 verification of that partition, AddOffsetsToTxn and TxnOffsetCommit, then (moved
/// to the end) EndTxn (the first aborts, the rest are retries of a finished abort),
/// WriteTxnMarkers as another coordinator would send it, and the aborted transaction
/// described and listed.
fn request(api: ApiKey, version: i16, matrix_id: Uuid, txn: (i64, i16)) -> RequestKind {
    let txn_id = || TransactionalId(StrBytes::from_static_str(MATRIX_TXN));
    match api {
        ApiKey::AddPartitionsToTxn => {
            let mut topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            topic.name = name("matrix");
            topic.partitions = vec![0];
            let mut request = AddPartitionsToTxnRequest::default();
            if version >= 4 {
                // The broker-to-broker form: a partition leader's verification (KIP-890) of
                // the partition the client versions added.
                let mut transaction =
                    add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default();
                transaction.transactional_id = txn_id();
                transaction.producer_id = ProducerId(txn.0);
                transaction.producer_epoch = txn.1;
                transaction.verify_only = true;
                transaction.topics = vec![topic];
                request.transactions = vec![transaction];
            } else {
                request.v3_and_below_transactional_id = txn_id();
                request.v3_and_below_producer_id = ProducerId(txn.0);
                request.v3_and_below_producer_epoch = txn.1;
                request.v3_and_below_topics = vec![topic];
            }
            RequestKind::AddPartitionsToTxn(request)
        }
        ApiKey::AddOffsetsToTxn => {
            let mut request = AddOffsetsToTxnRequest::default();
            request.transactional_id = txn_id();
            request.producer_id = ProducerId(txn.0);
            request.producer_epoch = txn.1;
            request.group_id = GroupId(StrBytes::from_static_str("matrix-txn-group"));
            RequestKind::AddOffsetsToTxn(request)
        }
        ApiKey::EndTxn => {
            let mut request = EndTxnRequest::default();
            request.transactional_id = txn_id();
            request.producer_id = ProducerId(txn.0);
            request.producer_epoch = txn.1;
            request.committed = false;
            RequestKind::EndTxn(request)
        }
        ApiKey::TxnOffsetCommit => {
            let mut partition =
                txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            partition.partition_index = 0;
            partition.committed_offset = 1;
            partition.committed_leader_epoch = -1;
            partition.committed_metadata = Some(StrBytes::from_static_str("m"));
            let mut topic = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
            topic.name = name("matrix");
            topic.partitions = vec![partition];
            let mut request = TxnOffsetCommitRequest::default();
            request.transactional_id = txn_id();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-txn-group"));
            request.producer_id = ProducerId(txn.0);
            request.producer_epoch = txn.1;
            request.generation_id = -1;
            request.topics = vec![topic];
            RequestKind::TxnOffsetCommit(request)
        }
        ApiKey::DescribeTransactions => {
            let mut request = DescribeTransactionsRequest::default();
            request.transactional_ids = vec![txn_id()];
            RequestKind::DescribeTransactions(request)
        }
        ApiKey::ListTransactions => {
            let mut request = ListTransactionsRequest::default();
            request.state_filters = vec![StrBytes::from_static_str("CompleteAbort")];
            request.duration_filter = -1;
            RequestKind::ListTransactions(request)
        }
        ApiKey::WriteTxnMarkers => {
            let mut topic = write_txn_markers_request::WritableTxnMarkerTopic::default();
            topic.name = name("matrix");
            topic.partition_indexes = vec![0];
            let mut marker = write_txn_markers_request::WritableTxnMarker::default();
            marker.producer_id = ProducerId(txn.0);
            marker.producer_epoch = txn.1;
            marker.transaction_result = false;
            marker.coordinator_epoch = 0;
            marker.topics = vec![topic];
            let mut request = WriteTxnMarkersRequest::default();
            request.markers = vec![marker];
            RequestKind::WriteTxnMarkers(request)
        }
        ApiKey::Produce => {
            let mut partition = produce_request::PartitionProduceData::default();
            partition.index = 0;
            partition.records = Some(batch());
            let mut topic = produce_request::TopicProduceData::default();
            topic.name = name("matrix");
            topic.partition_data = vec![partition];
            let mut request = ProduceRequest::default();
            request.acks = 1;
            request.timeout_ms = 10_000;
            request.topic_data = vec![topic];
            RequestKind::Produce(request)
        }
        ApiKey::Fetch => {
            let mut partition = fetch_request::FetchPartition::default();
            partition.partition = 0;
            partition.fetch_offset = 0;
            partition.partition_max_bytes = 1 << 20;
            let mut topic = fetch_request::FetchTopic::default();
            topic.topic = name("matrix");
            topic.topic_id = matrix_id;
            topic.partitions = vec![partition];
            let mut request = FetchRequest::default();
            request.replica_id = BrokerId(-1);
            request.max_wait_ms = 10;
            request.min_bytes = 1;
            request.max_bytes = 1 << 20;
            request.topics = vec![topic];
            RequestKind::Fetch(request)
        }
        ApiKey::ListOffsets => {
            let mut partition = list_offsets_request::ListOffsetsPartition::default();
            partition.partition_index = 0;
            partition.timestamp = -1;
            let mut topic = list_offsets_request::ListOffsetsTopic::default();
            topic.name = name("matrix");
            topic.partitions = vec![partition];
            let mut request = ListOffsetsRequest::default();
            request.replica_id = BrokerId(-1);
            request.topics = vec![topic];
            RequestKind::ListOffsets(request)
        }
        ApiKey::Metadata => {
            let mut topic = metadata_request::MetadataRequestTopic::default();
            topic.name = Some(name("matrix"));
            let mut request = MetadataRequest::default();
            request.topics = Some(vec![topic]);
            RequestKind::Metadata(request)
        }
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => {
            let mut topic = create_topics_request::CreatableTopic::default();
            topic.name = name(&format!("matrix-{version}"));
            topic.num_partitions = 1;
            topic.replication_factor = if version >= 4 { -1 } else { 1 };
            let mut request = CreateTopicsRequest::default();
            request.topics = vec![topic];
            request.timeout_ms = 10_000;
            RequestKind::CreateTopics(request)
        }
        ApiKey::DeleteTopics => {
            let mut request = DeleteTopicsRequest::default();
            let target = format!("matrix-{}", version + 1);
            if version >= 6 {
                let mut state = delete_topics_request::DeleteTopicState::default();
                state.name = Some(name(&target));
                request.topics = vec![state];
            } else {
                request.topic_names = vec![name(&target)];
            }
            request.timeout_ms = 10_000;
            RequestKind::DeleteTopics(request)
        }
        ApiKey::DeleteRecords => {
            let mut partition = delete_records_request::DeleteRecordsPartition::default();
            partition.partition_index = 0;
            partition.offset = 0;
            let mut topic = delete_records_request::DeleteRecordsTopic::default();
            topic.name = name("matrix");
            topic.partitions = vec![partition];
            let mut request = DeleteRecordsRequest::default();
            request.topics = vec![topic];
            request.timeout_ms = 10_000;
            RequestKind::DeleteRecords(request)
        }
        ApiKey::DescribeConfigs => {
            let mut resource = describe_configs_request::DescribeConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = StrBytes::from_static_str("matrix");
            resource.configuration_keys = None;
            let mut request = DescribeConfigsRequest::default();
            request.resources = vec![resource];
            RequestKind::DescribeConfigs(request)
        }
        ApiKey::AlterConfigs => {
            let mut config = alter_configs_request::AlterableConfig::default();
            config.name = StrBytes::from_static_str("retention.ms");
            config.value = Some(StrBytes::from_static_str("604800000"));
            let mut resource = alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = StrBytes::from_static_str("matrix");
            resource.configs = vec![config];
            let mut request = AlterConfigsRequest::default();
            request.resources = vec![resource];
            RequestKind::AlterConfigs(request)
        }
        ApiKey::CreatePartitions => {
            let mut topic = create_partitions_request::CreatePartitionsTopic::default();
            topic.name = name("matrix-partitions");
            topic.count = i32::from(version) + 2;
            topic.assignments = None;
            let mut request = CreatePartitionsRequest::default();
            request.topics = vec![topic];
            request.timeout_ms = 10_000;
            RequestKind::CreatePartitions(request)
        }
        ApiKey::IncrementalAlterConfigs => {
            let mut config = incremental_alter_configs_request::AlterableConfig::default();
            config.name = StrBytes::from_static_str("retention.bytes");
            config.config_operation = 0;
            config.value = Some(StrBytes::from_static_str("1000000000"));
            let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = StrBytes::from_static_str("matrix");
            resource.configs = vec![config];
            let mut request = IncrementalAlterConfigsRequest::default();
            request.resources = vec![resource];
            RequestKind::IncrementalAlterConfigs(request)
        }
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ApiKey::FindCoordinator => {
            let mut request = FindCoordinatorRequest::default();
            if version >= 4 {
                request.coordinator_keys = vec![StrBytes::from_static_str("matrix-group")];
            } else {
                request.key = StrBytes::from_static_str("matrix-group");
            }
            RequestKind::FindCoordinator(request)
        }
        ApiKey::OffsetCommit => {
            let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
            partition.partition_index = 0;
            partition.committed_offset = 1;
            partition.committed_metadata = Some(StrBytes::from_static_str("m"));
            let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
            topic.name = name("matrix");
            topic.partitions = vec![partition];
            let mut request = OffsetCommitRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-group"));
            request.generation_id_or_member_epoch = -1;
            request.topics = vec![topic];
            RequestKind::OffsetCommit(request)
        }
        ApiKey::OffsetFetch => {
            let mut request = OffsetFetchRequest::default();
            if version >= 8 {
                let mut topics = offset_fetch_request::OffsetFetchRequestTopics::default();
                topics.name = name("matrix");
                topics.partition_indexes = vec![0];
                let mut group = offset_fetch_request::OffsetFetchRequestGroup::default();
                group.group_id = GroupId(StrBytes::from_static_str("matrix-group"));
                group.topics = Some(vec![topics]);
                request.groups = vec![group];
            } else {
                let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
                topic.name = name("matrix");
                topic.partition_indexes = vec![0];
                request.group_id = GroupId(StrBytes::from_static_str("matrix-group"));
                request.topics = Some(vec![topic]);
            }
            RequestKind::OffsetFetch(request)
        }
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::JoinGroup => {
            let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
            protocol.name = StrBytes::from_static_str("range");
            protocol.metadata = Bytes::from_static(b"\0\0");
            let mut request = JoinGroupRequest::default();
            request.group_id = GroupId(StrBytes::from_string(format!("matrix-join-{version}")));
            request.session_timeout_ms = 10_000;
            if version >= 1 {
                request.rebalance_timeout_ms = 10_000;
            }
            request.protocol_type = StrBytes::from_static_str("consumer");
            request.protocols = vec![protocol];
            RequestKind::JoinGroup(request)
        }
        ApiKey::SyncGroup => {
            let mut request = SyncGroupRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-group"));
            request.member_id = StrBytes::from_static_str("stranger");
            request.generation_id = 1;
            RequestKind::SyncGroup(request)
        }
        ApiKey::Heartbeat => {
            let mut request = HeartbeatRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-group"));
            request.member_id = StrBytes::from_static_str("stranger");
            request.generation_id = 1;
            RequestKind::Heartbeat(request)
        }
        ApiKey::LeaveGroup => {
            let mut request = LeaveGroupRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-group"));
            if version >= 3 {
                let mut member = leave_group_request::MemberIdentity::default();
                member.member_id = StrBytes::from_static_str("stranger");
                request.members = vec![member];
            } else {
                request.member_id = StrBytes::from_static_str("stranger");
            }
            RequestKind::LeaveGroup(request)
        }
        ApiKey::DeleteGroups => {
            let mut request = DeleteGroupsRequest::default();
            request.groups_names = vec![GroupId(StrBytes::from_static_str("never-seen"))];
            RequestKind::DeleteGroups(request)
        }
        ApiKey::OffsetDelete => {
            let mut partition = offset_delete_request::OffsetDeleteRequestPartition::default();
            partition.partition_index = 0;
            let mut topic = offset_delete_request::OffsetDeleteRequestTopic::default();
            topic.name = name("matrix");
            topic.partitions = vec![partition];
            let mut request = OffsetDeleteRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-group"));
            request.topics = vec![topic];
            RequestKind::OffsetDelete(request)
        }
        ApiKey::ConsumerGroupHeartbeat => {
            // A member joining a new KIP-848 group (v1: the client makes its member id).
            let mut request = ConsumerGroupHeartbeatRequest::default();
            request.group_id = GroupId(StrBytes::from_string(format!("matrix-cg-{version}")));
            request.member_id = StrBytes::from_string(format!("matrix-member-{version}"));
            request.member_epoch = 0;
            request.rebalance_timeout_ms = 10_000;
            request.subscribed_topic_names = Some(vec![name("matrix")]);
            request.topic_partitions = Some(Vec::new());
            RequestKind::ConsumerGroupHeartbeat(request)
        }
        ApiKey::ShareGroupHeartbeat => {
            // A member joining a new share group (KIP-932; the client makes its member id).
            let mut request = ShareGroupHeartbeatRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-sg"));
            request.member_id = StrBytes::from_static_str("matrix-share-member");
            request.member_epoch = 0;
            request.subscribed_topic_names = Some(vec![name("matrix")]);
            RequestKind::ShareGroupHeartbeat(request)
        }
        ApiKey::ShareGroupDescribe => {
            let mut request = ShareGroupDescribeRequest::default();
            request.group_ids = vec![GroupId(StrBytes::from_static_str("matrix-sg"))];
            RequestKind::ShareGroupDescribe(request)
        }
        ApiKey::ShareFetch => {
            // Opens a share session on "matrix" 0 (its share state is initialized, which
            // creates __share_group_state).
            let mut partition = share_fetch_request::FetchPartition::default();
            partition.partition_index = 0;
            let mut topic = share_fetch_request::FetchTopic::default();
            topic.topic_id = matrix_id;
            topic.partitions = vec![partition];
            let mut request = ShareFetchRequest::default();
            request.group_id = Some(GroupId(StrBytes::from_static_str("matrix-sg")));
            request.member_id = Some(StrBytes::from_static_str("matrix-share-member"));
            request.share_session_epoch = 0;
            request.max_records = 10;
            request.max_bytes = 1 << 20;
            request.topics = vec![topic];
            RequestKind::ShareFetch(request)
        }
        ApiKey::ShareAcknowledge => {
            // The session's next epoch, with nothing to acknowledge.
            let mut request = ShareAcknowledgeRequest::default();
            request.group_id = Some(GroupId(StrBytes::from_static_str("matrix-sg")));
            request.member_id = Some(StrBytes::from_static_str("matrix-share-member"));
            request.share_session_epoch = 1;
            RequestKind::ShareAcknowledge(request)
        }
        // The share coordinator's inter-broker APIs on a share partition of their own.
        ApiKey::InitializeShareGroupState => {
            let mut partition = initialize_share_group_state_request::PartitionData::default();
            partition.start_offset = 0;
            let mut topic = initialize_share_group_state_request::InitializeStateData::default();
            topic.topic_id = matrix_id;
            topic.partitions = vec![partition];
            let mut request = InitializeShareGroupStateRequest::default();
            request.group_id = StrBytes::from_static_str("matrix-state");
            request.topics = vec![topic];
            RequestKind::InitializeShareGroupState(request)
        }
        ApiKey::ReadShareGroupState => {
            let mut partition = read_share_group_state_request::PartitionData::default();
            partition.leader_epoch = 0;
            let mut topic = read_share_group_state_request::ReadStateData::default();
            topic.topic_id = matrix_id;
            topic.partitions = vec![partition];
            let mut request = ReadShareGroupStateRequest::default();
            request.group_id = StrBytes::from_static_str("matrix-state");
            request.topics = vec![topic];
            RequestKind::ReadShareGroupState(request)
        }
        ApiKey::ReadShareGroupStateSummary => {
            let mut partition = read_share_group_state_summary_request::PartitionData::default();
            partition.leader_epoch = 0;
            let mut topic = read_share_group_state_summary_request::ReadStateSummaryData::default();
            topic.topic_id = matrix_id;
            topic.partitions = vec![partition];
            let mut request = ReadShareGroupStateSummaryRequest::default();
            request.group_id = StrBytes::from_static_str("matrix-state");
            request.topics = vec![topic];
            RequestKind::ReadShareGroupStateSummary(request)
        }
        ApiKey::WriteShareGroupState => {
            let mut batch = write_share_group_state_request::StateBatch::default();
            batch.delivery_state = 2;
            batch.delivery_count = 1;
            let mut partition = write_share_group_state_request::PartitionData::default();
            partition.leader_epoch = 0;
            partition.state_batches = vec![batch];
            let mut topic = write_share_group_state_request::WriteStateData::default();
            topic.topic_id = matrix_id;
            topic.partitions = vec![partition];
            let mut request = WriteShareGroupStateRequest::default();
            request.group_id = StrBytes::from_static_str("matrix-state");
            request.topics = vec![topic];
            RequestKind::WriteShareGroupState(request)
        }
        ApiKey::DeleteShareGroupState => {
            let mut topic = delete_share_group_state_request::DeleteStateData::default();
            topic.topic_id = matrix_id;
            topic.partitions = vec![delete_share_group_state_request::PartitionData::default()];
            let mut request = DeleteShareGroupStateRequest::default();
            request.group_id = StrBytes::from_static_str("matrix-state");
            request.topics = vec![topic];
            RequestKind::DeleteShareGroupState(request)
        }
        ApiKey::DescribeShareGroupOffsets => {
            let mut topic =
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default();
            topic.topic_name = name("matrix");
            topic.partitions = vec![0];
            let mut group =
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default();
            group.group_id = GroupId(StrBytes::from_static_str("matrix-sg"));
            group.topics = Some(vec![topic]);
            let mut request = DescribeShareGroupOffsetsRequest::default();
            request.groups = vec![group];
            RequestKind::DescribeShareGroupOffsets(request)
        }
        ApiKey::AlterShareGroupOffsets => {
            let mut partition =
                alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default(
                );
            partition.start_offset = 0;
            let mut topic =
                alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default();
            topic.topic_name = name("matrix");
            topic.partitions = vec![partition];
            let mut request = AlterShareGroupOffsetsRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-sg-empty"));
            request.topics = vec![topic];
            RequestKind::AlterShareGroupOffsets(request)
        }
        ApiKey::DeleteShareGroupOffsets => {
            let mut topic =
                delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default();
            topic.topic_name = name("matrix");
            let mut request = DeleteShareGroupOffsetsRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("matrix-sg-empty"));
            request.topics = vec![topic];
            RequestKind::DeleteShareGroupOffsets(request)
        }
        ApiKey::ConsumerGroupDescribe => {
            let mut request = ConsumerGroupDescribeRequest::default();
            request.group_ids = vec![GroupId(StrBytes::from_static_str("matrix-cg-1"))];
            RequestKind::ConsumerGroupDescribe(request)
        }
        ApiKey::DescribeGroups => {
            let mut request = DescribeGroupsRequest::default();
            request.groups = vec![GroupId(StrBytes::from_static_str("matrix-group"))];
            RequestKind::DescribeGroups(request)
        }
        ApiKey::DescribeProducers => {
            let mut topic = describe_producers_request::TopicRequest::default();
            topic.name = name("matrix");
            topic.partition_indexes = vec![0];
            let mut request = DescribeProducersRequest::default();
            request.topics = vec![topic];
            RequestKind::DescribeProducers(request)
        }
        ApiKey::DescribeQuorum => {
            let mut partition = describe_quorum_request::PartitionData::default();
            partition.partition_index = 0;
            let mut topic = describe_quorum_request::TopicData::default();
            topic.topic_name = name("__cluster_metadata");
            topic.partitions = vec![partition];
            let mut request = DescribeQuorumRequest::default();
            request.topics = vec![topic];
            RequestKind::DescribeQuorum(request)
        }
        ApiKey::OffsetForLeaderEpoch => {
            let mut partition =
                offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
            partition.partition = 0;
            partition.current_leader_epoch = -1;
            partition.leader_epoch = 0;
            let mut topic = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
            topic.topic = name("matrix");
            topic.partitions = vec![partition];
            let mut request = OffsetForLeaderEpochRequest::default();
            request.replica_id = BrokerId(-1);
            request.topics = vec![topic];
            RequestKind::OffsetForLeaderEpoch(request)
        }
        ApiKey::ElectLeaders => {
            // Every partition (null): none needs an election on a single node, so the answer
            // lists none and has no error.
            let mut request = ElectLeadersRequest::default();
            request.election_type = 0;
            request.topic_partitions = None;
            request.timeout_ms = 10_000;
            RequestKind::ElectLeaders(request)
        }
        ApiKey::AlterPartitionReassignments => {
            // To the replicas it has (this node alone): nothing to move, no error.
            let mut partition =
                alter_partition_reassignments_request::ReassignablePartition::default();
            partition.partition_index = 0;
            partition.replicas = Some(vec![BrokerId(0)]);
            let mut topic = alter_partition_reassignments_request::ReassignableTopic::default();
            topic.name = name("matrix");
            topic.partitions = vec![partition];
            let mut request = AlterPartitionReassignmentsRequest::default();
            request.timeout_ms = 10_000;
            request.allow_replication_factor_change = true;
            request.topics = vec![topic];
            RequestKind::AlterPartitionReassignments(request)
        }
        ApiKey::ListPartitionReassignments => {
            let mut request = ListPartitionReassignmentsRequest::default();
            request.timeout_ms = 10_000;
            request.topics = None;
            RequestKind::ListPartitionReassignments(request)
        }
        ApiKey::DescribeLogDirs => {
            let mut topic = describe_log_dirs_request::DescribableLogDirTopic::default();
            topic.topic = name("matrix");
            topic.partitions = vec![0];
            let mut request = DescribeLogDirsRequest::default();
            request.topics = Some(vec![topic]);
            RequestKind::DescribeLogDirs(request)
        }
        ApiKey::InitProducerId => {
            let mut request = InitProducerIdRequest::default();
            request.transactional_id = None;
            request.transaction_timeout_ms = 60_000;
            request.producer_id = ProducerId(-1);
            request.producer_epoch = -1;
            RequestKind::InitProducerId(request)
        }
        // On the matrix's PLAINTEXT listener both are out of place: ILLEGAL_SASL_STATE
        // (tests/interop/test_sasl.py drives them on SASL listeners).
        ApiKey::SaslHandshake => {
            let mut request = SaslHandshakeRequest::default();
            request.mechanism = StrBytes::from_static_str("PLAIN");
            RequestKind::SaslHandshake(request)
        }
        ApiKey::SaslAuthenticate => {
            let mut request = SaslAuthenticateRequest::default();
            request.auth_bytes = Bytes::from_static(b"\0user\0password");
            RequestKind::SaslAuthenticate(request)
        }
        // A user per version: created, then described (the describe runs after: `order`).
        ApiKey::AlterUserScramCredentials => {
            let mut upsertion =
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
            upsertion.name = StrBytes::from_static_str("matrix-user");
            upsertion.mechanism = 1;
            upsertion.iterations = 4096;
            upsertion.salt = Bytes::from_static(b"salt");
            upsertion.salted_password = Bytes::from(vec![7u8; 32]);
            let mut request = AlterUserScramCredentialsRequest::default();
            request.upsertions.push(upsertion);
            RequestKind::AlterUserScramCredentials(request)
        }
        ApiKey::DescribeUserScramCredentials => {
            let mut user = describe_user_scram_credentials_request::UserName::default();
            user.name = StrBytes::from_static_str("matrix-user");
            let mut request = DescribeUserScramCredentialsRequest::default();
            request.users = Some(vec![user]);
            RequestKind::DescribeUserScramCredentials(request)
        }
        // A quota for a client id nobody uses, then read back (the describe runs after).
        ApiKey::AlterClientQuotas => {
            let mut entity = alter_client_quotas_request::EntityData::default();
            entity.entity_type = StrBytes::from_static_str("client-id");
            entity.entity_name = Some(StrBytes::from_static_str("matrix-quota"));
            let mut op = alter_client_quotas_request::OpData::default();
            op.key = StrBytes::from_static_str("producer_byte_rate");
            op.value = 1e9;
            let mut entry = alter_client_quotas_request::EntryData::default();
            entry.entity = vec![entity];
            entry.ops = vec![op];
            let mut request = AlterClientQuotasRequest::default();
            request.entries = vec![entry];
            RequestKind::AlterClientQuotas(request)
        }
        ApiKey::DescribeClientQuotas => {
            let mut component = describe_client_quotas_request::ComponentData::default();
            component.entity_type = StrBytes::from_static_str("client-id");
            component.match_type = 0;
            component._match = Some(StrBytes::from_static_str("matrix-quota"));
            let mut request = DescribeClientQuotasRequest::default();
            request.components = vec![component];
            RequestKind::DescribeClientQuotas(request)
        }
        ApiKey::CreateAcls => {
            let mut creation = create_acls_request::AclCreation::default();
            creation.resource_type = 2;
            creation.resource_name = StrBytes::from_static_str("matrix-acl");
            creation.resource_pattern_type = 3;
            creation.principal = StrBytes::from_static_str("User:matrix");
            creation.host = StrBytes::from_static_str("*");
            creation.operation = 3;
            creation.permission_type = 3;
            let mut request = CreateAclsRequest::default();
            request.creations = vec![creation];
            RequestKind::CreateAcls(request)
        }
        ApiKey::DescribeAcls => {
            let mut request = DescribeAclsRequest::default();
            request.resource_type_filter = 1;
            request.pattern_type_filter = 1;
            request.operation = 1;
            request.permission_type = 1;
            RequestKind::DescribeAcls(request)
        }
        ApiKey::DeleteAcls => {
            let mut filter = delete_acls_request::DeleteAclsFilter::default();
            filter.resource_type_filter = 2;
            filter.resource_name_filter = Some(StrBytes::from_static_str("matrix-acl"));
            filter.pattern_type_filter = 3;
            filter.operation = 1;
            filter.permission_type = 1;
            let mut request = DeleteAclsRequest::default();
            request.filters = vec![filter];
            RequestKind::DeleteAcls(request)
        }
        other => panic!("no request written for {other:?}"),
    }
}

/// Error codes in a response that must all be NONE.
fn error_codes(response: &ResponseKind) -> Vec<i16> {
    match response {
        ResponseKind::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::Fetch(r) => {
            r.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::ListOffsets(r) => {
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::Metadata(r) => r.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::ApiVersions(r) => vec![r.error_code],
        ResponseKind::CreateTopics(r) => r.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteTopics(r) => r.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteRecords(r) => {
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::DescribeConfigs(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::AlterConfigs(r) => r.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::CreatePartitions(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::IncrementalAlterConfigs(r) => {
            r.responses.iter().map(|t| t.error_code).collect()
        }
        ResponseKind::DescribeCluster(r) => vec![r.error_code],
        ResponseKind::ElectLeaders(r) => std::iter::once(r.error_code)
            .chain(
                r.replica_election_results
                    .iter()
                    .flat_map(|t| t.partition_result.iter().map(|p| p.error_code)),
            )
            .collect(),
        ResponseKind::AlterPartitionReassignments(r) => std::iter::once(r.error_code)
            .chain(r.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::ListPartitionReassignments(r) => vec![r.error_code],
        ResponseKind::OffsetForLeaderEpoch(r) => {
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::DescribeQuorum(r) => std::iter::once(r.error_code)
            .chain(r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::FindCoordinator(r) if r.coordinators.is_empty() => vec![r.error_code],
        ResponseKind::FindCoordinator(r) => r.coordinators.iter().map(|c| c.error_code).collect(),
        ResponseKind::OffsetCommit(r) => {
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::OffsetFetch(r) if !r.groups.is_empty() => r
            .groups
            .iter()
            .flat_map(|g| {
                std::iter::once(g.error_code)
                    .chain(g.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            })
            .collect(),
        ResponseKind::OffsetFetch(r) => std::iter::once(r.error_code)
            .chain(r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::ListGroups(r) => vec![r.error_code],
        ResponseKind::ConsumerGroupHeartbeat(r) => vec![r.error_code],
        ResponseKind::ConsumerGroupDescribe(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::ShareGroupHeartbeat(r) => vec![r.error_code],
        ResponseKind::DescribeShareGroupOffsets(r) => r
            .groups
            .iter()
            .flat_map(|g| {
                std::iter::once(g.error_code)
                    .chain(g.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            })
            .collect(),
        ResponseKind::ShareGroupDescribe(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::AlterShareGroupOffsets(r) => std::iter::once(r.error_code)
            .chain(r.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::DeleteShareGroupOffsets(r) => {
            std::iter::once(r.error_code).chain(r.responses.iter().map(|t| t.error_code)).collect()
        }
        ResponseKind::ShareFetch(r) => std::iter::once(r.error_code)
            .chain(r.responses.iter().flat_map(|t| {
                t.partitions.iter().flat_map(|p| [p.error_code, p.acknowledge_error_code])
            }))
            .collect(),
        ResponseKind::ShareAcknowledge(r) => std::iter::once(r.error_code)
            .chain(r.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::InitializeShareGroupState(r) => {
            r.results.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::ReadShareGroupState(r) => {
            r.results.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::ReadShareGroupStateSummary(r) => {
            r.results.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::WriteShareGroupState(r) => {
            r.results.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::DeleteShareGroupState(r) => {
            r.results.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::JoinGroup(r) => vec![r.error_code],
        ResponseKind::SyncGroup(r) => vec![r.error_code],
        ResponseKind::Heartbeat(r) => vec![r.error_code],
        ResponseKind::LeaveGroup(r) if !r.members.is_empty() => {
            r.members.iter().map(|m| m.error_code).collect()
        }
        ResponseKind::LeaveGroup(r) => vec![r.error_code],
        ResponseKind::DescribeGroups(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::DeleteGroups(r) => r.results.iter().map(|g| g.error_code).collect(),
        ResponseKind::OffsetDelete(r) => std::iter::once(r.error_code)
            .chain(r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::InitProducerId(r) => vec![r.error_code],
        ResponseKind::AddPartitionsToTxn(r) => std::iter::once(r.error_code)
            .chain(
                r.results_by_topic_v3_and_below
                    .iter()
                    .chain(r.results_by_transaction.iter().flat_map(|t| t.topic_results.iter()))
                    .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code)),
            )
            .collect(),
        ResponseKind::AddOffsetsToTxn(r) => vec![r.error_code],
        ResponseKind::DescribeTransactions(r) => {
            assert!(r
                .transaction_states
                .iter()
                .all(|s| s.transactional_id.0.as_str() == MATRIX_TXN));
            r.transaction_states.iter().map(|s| s.error_code).collect()
        }
        ResponseKind::ListTransactions(r) => {
            assert!(r
                .transaction_states
                .iter()
                .any(|s| s.transactional_id.0.as_str() == MATRIX_TXN));
            vec![r.error_code]
        }
        ResponseKind::TxnOffsetCommit(r) => {
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::EndTxn(r) => vec![r.error_code],
        ResponseKind::SaslHandshake(r) => vec![r.error_code],
        ResponseKind::SaslAuthenticate(r) => vec![r.error_code],
        ResponseKind::AlterClientQuotas(r) => r.entries.iter().map(|e| e.error_code).collect(),
        ResponseKind::CreateAcls(r) => r.results.iter().map(|result| result.error_code).collect(),
        ResponseKind::DescribeAcls(r) => vec![r.error_code],
        ResponseKind::DeleteAcls(r) => r.filter_results.iter().map(|f| f.error_code).collect(),
        ResponseKind::DescribeClientQuotas(r) => {
            assert_eq!(r.entries.as_ref().map(Vec::len), Some(1), "{r:?}");
            vec![r.error_code]
        }
        ResponseKind::AlterUserScramCredentials(r) => {
            r.results.iter().map(|result| result.error_code).collect()
        }
        ResponseKind::DescribeUserScramCredentials(r) => {
            assert!(r.results.iter().all(|result| result.credential_infos.len() == 1), "{r:?}");
            r.results.iter().map(|result| result.error_code).chain([r.error_code]).collect()
        }
        ResponseKind::WriteTxnMarkers(r) => r
            .markers
            .iter()
            .flat_map(|m| m.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::DescribeProducers(r) => {
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::DescribeLogDirs(r) => {
            std::iter::once(r.error_code).chain(r.results.iter().map(|d| d.error_code)).collect()
        }
        _ => vec![],
    }
}

/// The topic id Metadata v12 gives `topic`.
fn topic_id(client: &mut Client, topic: &str) -> Uuid {
    let mut wanted = metadata_request::MetadataRequestTopic::default();
    wanted.name = Some(name(topic));
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![wanted]);
    match client.call(ApiKey::Metadata, 12, RequestKind::Metadata(request)) {
        Ok(ResponseKind::Metadata(r)) => {
            let found = r.topics.iter().find(|t| t.name.as_ref().map(|n| &n.0[..]) == Some(topic));
            let id = found.map(|t| t.topic_id).unwrap_or_default();
            assert!(!id.is_nil(), "Metadata v12 gave {topic} no topic id");
            id
        }
        other => panic!("Metadata v12: {other:?}"),
    }
}

#[test]
fn every_advertised_api_version_is_answered_without_error() {
    let broker = Broker::start("api-matrix", &["--group-initial-rebalance-delay-ms", "0"]);
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    for topic in ["matrix", "matrix-partitions"] {
        broker::cli::topic::create(&broker.bootstrap, topic, 1, -1, &[], None).expect("create");
    }
    let matrix_id = topic_id(&mut client, "matrix");
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(StrBytes::from_static_str(MATRIX_TXN)));
    init.transaction_timeout_ms = 60_000;
    init.producer_id = ProducerId(-1);
    init.producer_epoch = -1;
    let txn = match client.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(init)) {
        Ok(ResponseKind::InitProducerId(r)) if r.error_code == 0 => {
            (r.producer_id.0, r.producer_epoch)
        }
        other => panic!("InitProducerId for {MATRIX_TXN}: {other:?}\n{}", broker.log()),
    };
    let mut checked = 0;
    // Create before delete: DeleteTopics v(n) removes the topic CreateTopics v(n+1) made. The
    // transaction's offsets before its end: TxnOffsetCommit after EndTxn is refused by
    // partition verification (KIP-890), as Kafka 3.6+ does.
    let mut order: Vec<_> = broker::api::advertised();
    order.sort_by_key(|(api, _, _)| match *api {
        ApiKey::DeleteTopics => 2,
        ApiKey::EndTxn
        | ApiKey::WriteTxnMarkers
        | ApiKey::DescribeTransactions
        | ApiKey::ListTransactions
        | ApiKey::DescribeUserScramCredentials
        | ApiKey::DescribeClientQuotas => 1,
        _ => 0,
    });
    for (api, min, max) in order {
        for version in min..=max {
            if api == ApiKey::DeleteTopics && version + 1 > 7 {
                continue; // CreateTopics stops at v7, so there is no matrix-8 to delete.
            }
            let response = client
                .call(api, version, request(api, version, matrix_id, txn))
                .unwrap_or_else(|error| panic!("{api:?} v{version}: {error}\n{}", broker.log()));
            let codes = error_codes(&response);
            assert!(!codes.is_empty(), "{api:?} v{version}: no result in the answer");
            // The correct answers to a stranger: a new member is asked for its id (KIP-394),
            // an unknown member is told so.
            let allowed: &[i16] = match api {
                ApiKey::JoinGroup => &[0, 79],
                ApiKey::SyncGroup | ApiKey::Heartbeat | ApiKey::LeaveGroup => &[25],
                ApiKey::DeleteGroups => &[69],
                // Unknown: ConsumerGroupDescribe's first group never heartbeat yet.
                ApiKey::ConsumerGroupDescribe if version == 0 => &[0, 69],
                ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => &[34],
                _ => &[0],
            };
            assert!(
                codes.iter().all(|code| allowed.contains(code)),
                "{api:?} v{version}: error codes {codes:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "checked {checked} (api, version) pairs");
}

#[test]
fn commits_with_generations_the_broker_does_not_know_are_refused() {
    let broker = Broker::start("commit-errors", &[]);
    broker::cli::topic::create(&broker.bootstrap, "t", 1, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let commit = |member: &'static str, generation: i32| {
        let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
        partition.partition_index = 0;
        partition.committed_offset = 3;
        let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
        topic.name = name("t");
        topic.partitions = vec![partition];
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(StrBytes::from_static_str("g"));
        request.member_id = StrBytes::from_static_str(member);
        request.generation_id_or_member_epoch = generation;
        request.topics = vec![topic];
        RequestKind::OffsetCommit(request)
    };
    let code = |response: ResponseKind| error_codes(&response)[0];
    // A negative generation is a commit outside group management (an assign() consumer; a
    // KIP-848 one sends its member id with it): taken, as Kafka takes it.
    assert_eq!(
        code(client.call(ApiKey::OffsetCommit, 8, commit("ghost", -1)).expect("call")),
        0,
        "a simple group's commit"
    );
    assert_eq!(
        code(client.call(ApiKey::OffsetCommit, 8, commit("", 3)).expect("call")),
        22,
        "ILLEGAL_GENERATION"
    );
    assert_eq!(
        code(client.call(ApiKey::OffsetCommit, 9, commit("", 3)).expect("call")),
        69,
        "v9 (KIP-848): GROUP_ID_NOT_FOUND"
    );
    assert_eq!(
        code(client.call(ApiKey::OffsetCommit, 8, commit("", -1)).expect("call")),
        0,
        "standalone commit"
    );
    let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
    partition.partition_index = 0;
    partition.committed_offset = 3;
    partition.committed_metadata = Some(StrBytes::from_string("m".repeat(5000)));
    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
    topic.name = name("t");
    topic.partitions = vec![partition];
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("g"));
    request.generation_id_or_member_epoch = -1;
    request.topics = vec![topic];
    let answer =
        client.call(ApiKey::OffsetCommit, 8, RequestKind::OffsetCommit(request)).expect("call");
    assert_eq!(error_codes(&answer), vec![12], "OFFSET_METADATA_TOO_LARGE over 4096 bytes");
}

#[test]
fn an_old_incarnation_of_a_static_member_is_fenced() {
    let broker = Broker::start("fencing", &["--group-initial-rebalance-delay-ms", "0"]);
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let join = |member: &str| {
        let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
        protocol.name = StrBytes::from_static_str("range");
        protocol.metadata = Bytes::from_static(b"\0\0");
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_static_str("static"));
        request.session_timeout_ms = 10_000;
        request.rebalance_timeout_ms = 10_000;
        request.member_id = StrBytes::from_string(member.to_string());
        request.group_instance_id = Some(StrBytes::from_static_str("instance-1"));
        request.protocol_type = StrBytes::from_static_str("consumer");
        request.protocols = vec![protocol];
        RequestKind::JoinGroup(request)
    };
    let first = match client.call(ApiKey::JoinGroup, 5, join("")).expect("join") {
        ResponseKind::JoinGroup(response) => response,
        _ => panic!("unexpected answer"),
    };
    assert_eq!(first.error_code, 0, "a static member joins without MEMBER_ID_REQUIRED");
    let second = match client.call(ApiKey::JoinGroup, 5, join("")).expect("join") {
        ResponseKind::JoinGroup(response) => response,
        _ => panic!("unexpected answer"),
    };
    assert_eq!(second.error_code, 0);
    assert_ne!(second.member_id, first.member_id, "the restarted instance gets a new member id");
    let mut heartbeat = HeartbeatRequest::default();
    heartbeat.group_id = GroupId(StrBytes::from_static_str("static"));
    heartbeat.member_id = first.member_id.clone();
    heartbeat.group_instance_id = Some(StrBytes::from_static_str("instance-1"));
    heartbeat.generation_id = first.generation_id;
    let answer =
        client.call(ApiKey::Heartbeat, 3, RequestKind::Heartbeat(heartbeat)).expect("heartbeat");
    assert_eq!(error_codes(&answer), vec![82], "FENCED_INSTANCE_ID for the old incarnation");
}

#[test]
fn join_group_with_oversized_protocol_metadata_is_refused() {
    let broker = Broker::start("oversized-join", &["--group-initial-rebalance-delay-ms", "0"]);
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = Bytes::from(vec![0u8; (1 << 20) + 1]);
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("big"));
    request.session_timeout_ms = 10_000;
    request.rebalance_timeout_ms = 10_000;
    request.protocol_type = StrBytes::from_static_str("consumer");
    request.protocols = vec![protocol];
    let answer = client.call(ApiKey::JoinGroup, 5, RequestKind::JoinGroup(request)).expect("join");
    assert_eq!(
        error_codes(&answer),
        vec![23],
        "INCONSISTENT_GROUP_PROTOCOL for > 1 MiB of metadata"
    );
}

#[test]
fn describe_log_dirs_reports_partition_sizes_and_disk_space() {
    let broker = Broker::start("log-dirs", &[]);
    broker::cli::topic::create(&broker.bootstrap, "sized", 2, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let mut partition = produce_request::PartitionProduceData::default();
    partition.index = 1;
    partition.records = Some(batch());
    let mut topic = produce_request::TopicProduceData::default();
    topic.name = name("sized");
    topic.partition_data = vec![partition];
    let mut produce = ProduceRequest::default();
    produce.acks = -1;
    produce.timeout_ms = 10_000;
    produce.topic_data = vec![topic];
    client.call(ApiKey::Produce, 9, RequestKind::Produce(produce)).expect("produce");
    for version in 1..=4 {
        let mut request = DescribeLogDirsRequest::default();
        request.topics = None; // every partition
        let Ok(ResponseKind::DescribeLogDirs(response)) =
            client.call(ApiKey::DescribeLogDirs, version, RequestKind::DescribeLogDirs(request))
        else {
            panic!("DescribeLogDirs v{version}");
        };
        let dir = &response.results[0];
        assert_eq!(dir.error_code, 0);
        assert!(dir.log_dir.contains("broker-log-dirs"), "{}", dir.log_dir.as_str());
        let sized = dir.topics.iter().find(|t| t.name.0.as_str() == "sized").expect("topic listed");
        let sizes: Vec<(i32, i64)> =
            sized.partitions.iter().map(|p| (p.partition_index, p.partition_size)).collect();
        assert_eq!(sizes.len(), 2);
        assert_eq!(sizes[0], (0, 0), "the empty partition");
        assert_eq!(sizes[1].1 as usize, batch().len(), "the partition holds the one batch");
        assert!(dir.topics.iter().any(|t| t.name.0.as_str() == "__consumer_offsets"));
        if version >= 4 {
            assert!(
                dir.total_bytes > 0 && dir.usable_bytes > 0 && dir.usable_bytes <= dir.total_bytes
            );
        }
    }
}

/// A group id with a NUL byte could not be stored in `__consumer_offsets` keys (NUL separates
/// their fields), so it is refused with INVALID_GROUP_ID instead of being lost at a restart.
#[test]
fn group_ids_with_a_nul_byte_are_refused() {
    let broker = Broker::start("nul-group", &[]);
    broker::cli::topic::create(&broker.bootstrap, "t", 1, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
    partition.partition_index = 0;
    partition.committed_offset = 1;
    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
    topic.name = name("t");
    topic.partitions = vec![partition];
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(StrBytes::from_static_str("a\0b"));
    commit.generation_id_or_member_epoch = -1;
    commit.topics = vec![topic];
    let answer =
        client.call(ApiKey::OffsetCommit, 8, RequestKind::OffsetCommit(commit)).expect("call");
    assert_eq!(error_codes(&answer), vec![24], "INVALID_GROUP_ID");
    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = Bytes::from_static(b"\0\0");
    let mut join = JoinGroupRequest::default();
    join.group_id = GroupId(StrBytes::from_static_str("a\0b"));
    join.session_timeout_ms = 10_000;
    join.rebalance_timeout_ms = 10_000;
    join.protocol_type = StrBytes::from_static_str("consumer");
    join.protocols = vec![protocol];
    let answer = client.call(ApiKey::JoinGroup, 7, RequestKind::JoinGroup(join)).expect("call");
    assert_eq!(error_codes(&answer), vec![24], "INVALID_GROUP_ID");
}

#[test]
fn list_offsets_special_timestamps_answer_as_kafka_without_tiered_storage() {
    let broker = Broker::start("list-offsets-special", &[]);
    broker::cli::topic::create(&broker.bootstrap, "t", 1, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    // Three batches: timestamps 5,000, 9,000 (the largest) and 7,000.
    for timestamp in [5_000i64, 9_000, 7_000] {
        let mut builder = wire::RecordBatchBuilder::new(timestamp);
        builder.push(wire::BatchRecord { key: Some(b"k"), value: Some(b"v"), timestamp_delta: 0 });
        let mut partition = produce_request::PartitionProduceData::default();
        partition.index = 0;
        partition.records = Some(Bytes::from(builder.build()));
        let mut topic = produce_request::TopicProduceData::default();
        topic.name = name("t");
        topic.partition_data = vec![partition];
        let mut request = ProduceRequest::default();
        request.acks = 1;
        request.timeout_ms = 10_000;
        request.topic_data = vec![topic];
        let answer = client.call(ApiKey::Produce, 9, RequestKind::Produce(request)).expect("call");
        assert_eq!(error_codes(&answer), vec![0]);
    }
    let mut list = |version: i16, timestamp: i64| {
        let mut partition = list_offsets_request::ListOffsetsPartition::default();
        partition.partition_index = 0;
        partition.timestamp = timestamp;
        let mut topic = list_offsets_request::ListOffsetsTopic::default();
        topic.name = name("t");
        topic.partitions = vec![partition];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.topics = vec![topic];
        match client.call(ApiKey::ListOffsets, version, RequestKind::ListOffsets(request)) {
            Ok(ResponseKind::ListOffsets(answer)) => {
                let entry = &answer.topics[0].partitions[0];
                (entry.error_code, entry.offset, entry.timestamp)
            }
            other => panic!("ListOffsets v{version}: {other:?}"),
        }
    };
    assert_eq!(list(7, -3), (0, 1, 9_000), "MAX_TIMESTAMP: the record with the largest timestamp");
    assert_eq!(list(8, -4), (0, 0, -1), "EARLIEST_LOCAL: the log start");
    assert_eq!(list(9, -5), (0, -1, -1), "LATEST_TIERED: nothing is tiered");
    assert_eq!(list(9, -1), (0, 3, -1), "LATEST");
    assert_eq!(list(6, -3).0, 35, "MAX_TIMESTAMP before v7: UNSUPPORTED_VERSION");
    assert_eq!(list(7, -4).0, 35, "EARLIEST_LOCAL before v8: UNSUPPORTED_VERSION");
    assert_eq!(list(8, -5).0, 35, "LATEST_TIERED before v9: UNSUPPORTED_VERSION");
}

#[test]
fn describe_configs_documents_which_topic_configs_are_applied() {
    let broker = Broker::start("describe-docs", &[]);
    broker::cli::topic::create(&broker.bootstrap, "t", 1, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_static_str("t");
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    request.include_documentation = true;
    request.include_synonyms = true;
    let answer = client
        .call(ApiKey::DescribeConfigs, 4, RequestKind::DescribeConfigs(request))
        .expect("call");
    let ResponseKind::DescribeConfigs(answer) = answer else { panic!("{answer:?}") };
    let configs = &answer.results[0].configs;
    let find = |name: &str| {
        configs.iter().find(|c| c.name.as_str() == name).unwrap_or_else(|| panic!("{name} missing"))
    };
    assert_eq!(
        configs.len(),
        35,
        "Kafka 4.0's 33 topic configs, flush.policy and KIP-1191's opt-in"
    );
    let doc =
        |name: &str| find(name).documentation.as_ref().map(|d| d.to_string()).unwrap_or_default();
    assert!(doc("compression.type").starts_with("Applied"), "{}", doc("compression.type"));
    assert!(doc("preallocate").starts_with("Applied"), "{}", doc("preallocate"));
    let remote = doc("remote.log.copy.disable");
    assert!(remote.starts_with("Stored and described only"), "{remote}");
    assert_eq!(find("segment.bytes").config_type, 3, "INT");
    assert_eq!(find("retention.ms").config_type, 5, "LONG");
    assert_eq!(find("cleanup.policy").config_type, 7, "LIST");
    assert_eq!(find("min.cleanable.dirty.ratio").config_type, 6, "DOUBLE");
    let synonyms = &find("retention.ms").synonyms;
    assert_eq!(synonyms.len(), 1, "a default only: {synonyms:?}");
    assert_eq!(synonyms[0].source, 5, "DEFAULT_CONFIG");
}
