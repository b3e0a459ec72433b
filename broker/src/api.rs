//! The API registry: one table lists every Kafka API strata serves with its handler module;
//! each handler module declares its version range (`VERSIONS`) and its `handle`. Both
//! ApiVersions (`SUPPORTED`) and dispatch (`dispatch`) are generated from that one table, so an
//! API cannot be advertised without a handler or handled without being advertised.
//! Every handler has the same shape: `handle(node, context, request) -> response` (Produce
//! returns `Option`, `None` for acks=0; ApiVersions also receives the registry's table).
//! References: Redpanda `kafka/server/handlers/handlers.h`; Kafka protocol guide, "ApiVersions".

use crate::handlers;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use shard::io::Storage;

macro_rules! api_registry {
    (@answer optional $module:ident $node:ident $context:ident $request:ident) => {
        handlers::$module::handle($node, $context, $request).await.map(ResponseKind::from)
    };
    // ApiVersions answers with the registry itself (what is advertised), which its module
    // cannot import.
    (@answer registry $module:ident $node:ident $context:ident $request:ident) => {
        Some(ResponseKind::from(
            handlers::$module::handle($node, $context, $request, &advertised()).await,
        ))
    };
    // An envelope's request runs through this dispatch again, as the envelope's user.
    (@answer envelope $module:ident $node:ident $context:ident $request:ident) => {
        Some(ResponseKind::from(match handlers::$module::open($node, $context, $request) {
            Err(refused) => refused,
            Ok(opened) => {
                let answer = Box::pin(dispatch($node, &opened.context, opened.request.clone())).await;
                handlers::$module::seal(&opened, answer)
            }
        }))
    };
    (@answer $module:ident $node:ident $context:ident $request:ident) => {
        Some(ResponseKind::from(handlers::$module::handle($node, $context, $request).await))
    };
    // A response with `throttle_time_ms` (a row marked `throttled`; the mark on a response
    // without the field does not compile).
    (@throttle throttled $response:ident $ms:ident) => {
        $response.throttle_time_ms = $response.throttle_time_ms.max($ms)
    };
    (@throttle $response:ident $ms:ident) => {{
        let _ = ($response, $ms);
    }};
    ($( $key:ident => $module:ident $( ($answer:ident) )? $( $throttled:ident )? ),* $(,)?) => {
        /// (API, min version, max version) for every API strata serves (and accepts; see
        /// `advertised` for what ApiVersions lists).
        pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
            $( (ApiKey::$key, handlers::$module::VERSIONS.0, handlers::$module::VERSIONS.1), )*
        ];

        /// Runs the handler for a decoded request. `None`: no response is sent (acks=0), or
        /// the API is not one strata serves (the connection refuses those before decoding).
        pub async fn dispatch<S: Storage>(
            node: &Node<S>,
            context: &RequestContext,
            request: RequestKind,
        ) -> Option<ResponseKind> {
            match request {
                $( RequestKind::$key(request) => {
                    api_registry!(@answer $($answer)? $module node context request)
                } )*
                _ => None,
            }
        }

        /// The API key of a decoded request, `None` for an API strata does not serve.
        pub fn key_of(request: &RequestKind) -> Option<ApiKey> {
            match request {
                $( RequestKind::$key(_) => Some(ApiKey::$key), )*
                _ => None,
            }
        }

        /// The API's name (as in metrics and logs), `None` for a key strata does not serve.
        pub fn name(key: i16) -> Option<&'static str> {
            $( if key == ApiKey::$key as i16 {
                return Some(stringify!($key));
            } )*
            None
        }

        /// Raises a response's `throttle_time_ms` to at least `ms` (a request-time quota's
        /// throttle, reported as Kafka reports the larger of its byte-rate and request-time
        /// throttles). Responses without the field (SASL, DescribeQuorum, WriteTxnMarkers)
        /// are left as they are, as Kafka leaves them.
        pub fn raise_throttle(response: &mut ResponseKind, ms: i32) {
            match response {
                $( ResponseKind::$key(response) => {
                    api_registry!(@throttle $($throttled)? response ms)
                } )*
                // Answers to APIs strata does not serve are never made.
                _ => {}
            }
        }
    };
}

api_registry! {
    Produce => produce (optional) throttled,
    Fetch => fetch throttled,
    ListOffsets => list_offsets throttled,
    Metadata => metadata throttled,
    OffsetCommit => offset_commit throttled,
    OffsetFetch => offset_fetch throttled,
    FindCoordinator => find_coordinator throttled,
    JoinGroup => join_group throttled,
    Heartbeat => heartbeat throttled,
    ConsumerGroupHeartbeat => consumer_group_heartbeat throttled,
    ConsumerGroupDescribe => consumer_group_describe throttled,
    ShareGroupHeartbeat => share_group_heartbeat throttled,
    ShareGroupDescribe => share_group_describe throttled,
    ShareFetch => share_fetch throttled,
    ShareAcknowledge => share_acknowledge throttled,
    InitializeShareGroupState => initialize_share_group_state,
    ReadShareGroupState => read_share_group_state,
    ReadShareGroupStateSummary => read_share_group_state_summary,
    WriteShareGroupState => write_share_group_state,
    DeleteShareGroupState => delete_share_group_state,
    DescribeShareGroupOffsets => describe_share_group_offsets throttled,
    AlterShareGroupOffsets => alter_share_group_offsets throttled,
    DeleteShareGroupOffsets => delete_share_group_offsets throttled,
    LeaveGroup => leave_group throttled,
    SyncGroup => sync_group throttled,
    DescribeGroups => describe_groups throttled,
    ListGroups => list_groups throttled,
    SaslHandshake => sasl_handshake,
    ApiVersions => api_versions (registry),
    CreateTopics => create_topics throttled,
    DeleteTopics => delete_topics throttled,
    DeleteRecords => delete_records throttled,
    InitProducerId => init_producer_id throttled,
    AddPartitionsToTxn => add_partitions_to_txn throttled,
    AddOffsetsToTxn => add_offsets_to_txn throttled,
    EndTxn => end_txn throttled,
    WriteTxnMarkers => write_txn_markers,
    TxnOffsetCommit => txn_offset_commit throttled,
    DescribeConfigs => describe_configs throttled,
    AlterConfigs => alter_configs throttled,
    DescribeLogDirs => describe_log_dirs throttled,
    SaslAuthenticate => sasl_authenticate,
    CreatePartitions => create_partitions throttled,
    DeleteGroups => delete_groups throttled,
    IncrementalAlterConfigs => incremental_alter_configs throttled,
    OffsetDelete => offset_delete throttled,
    DescribeCluster => describe_cluster throttled,
    DescribeProducers => describe_producers throttled,
    DescribeTransactions => describe_transactions throttled,
    ListTransactions => list_transactions throttled,
    DescribeQuorum => describe_quorum,
    OffsetForLeaderEpoch => offset_for_leader_epoch throttled,
    ElectLeaders => elect_leaders throttled,
    AlterPartitionReassignments => alter_partition_reassignments throttled,
    ListPartitionReassignments => list_partition_reassignments throttled,
    DescribeUserScramCredentials => describe_user_scram_credentials throttled,
    AlterUserScramCredentials => alter_user_scram_credentials throttled,
    DescribeClientQuotas => describe_client_quotas throttled,
    AlterClientQuotas => alter_client_quotas throttled,
    DescribeAcls => describe_acls throttled,
    CreateAcls => create_acls throttled,
    DeleteAcls => delete_acls throttled,
    Envelope => envelope (envelope),
}

/// APIs served but not advertised in ApiVersions: Envelope is the console's, between brokers
/// (Kafka lists it only on controller listeners).
pub const UNADVERTISED: &[ApiKey] = &[ApiKey::Envelope];

/// The APIs ApiVersions lists: every served one but `UNADVERTISED`.
pub fn advertised() -> Vec<(ApiKey, i16, i16)> {
    SUPPORTED.iter().copied().filter(|(key, _, _)| !UNADVERTISED.contains(key)).collect()
}

/// Whether `version` of `api_key` is served.
pub fn supports(api_key: ApiKey, version: i16) -> bool {
    SUPPORTED.iter().any(|&(key, min, max)| key == api_key && (min..=max).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_and_keys_every_api_it_serves() {
        for &(key, min, max) in SUPPORTED {
            assert_eq!(name(key as i16), Some(format!("{key:?}").as_str()));
            assert!(min <= max && supports(key, min) && supports(key, max));
        }
        assert_eq!(name(ApiKey::DescribeAcls as i16), Some("DescribeAcls"));
        // Kafka APIs strata does not serve have no name and no key here.
        assert_eq!(name(ApiKey::BrokerHeartbeat as i16), None);
        let request = RequestKind::SaslHandshake(Default::default());
        assert_eq!(key_of(&request), Some(ApiKey::SaslHandshake));
        let unserved = RequestKind::BrokerHeartbeat(Default::default());
        assert_eq!(key_of(&unserved), None);
    }

    #[test]
    fn throttles_are_raised_only_where_the_response_has_the_field() {
        let mut fetch = ResponseKind::Fetch(Default::default());
        raise_throttle(&mut fetch, 250);
        assert!(matches!(fetch, ResponseKind::Fetch(response) if response.throttle_time_ms == 250));
        let mut handshake = ResponseKind::SaslHandshake(Default::default());
        raise_throttle(&mut handshake, 250);
    }
}
