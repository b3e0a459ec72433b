//! DescribeLogDirs (key 35): the broker's one log directory with the size of each partition
//! (asked of every shard) and, from v4, the file system's total and usable bytes. Tools that
//! show topic sizes (kafka-log-dirs.sh, admin UIs) use it. There is no replica movement, so
//! `offset_lag` is 0 and nothing is a future replica.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::partitions::requests::Sizes;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use shard::io::Storage;
use std::collections::{BTreeMap, BTreeSet};
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (1, 4);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    if !node.allowed(context, AclOperation::Describe, Resource::Cluster) {
        let mut response = DescribeLogDirsResponse::default();
        response.error_code =
            crate::error::error_code(&crate::error::BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let version = context.api_version;
    // None: every partition; otherwise only those asked for (unknown ones are left out, as
    // Kafka does).
    let wanted: Option<BTreeSet<TopicPartition>> = request.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| TopicPartition::new(t.topic.0.to_string(), *p))
            })
            .collect()
    });
    let mut sizes: BTreeMap<String, Vec<(i32, u64)>> = BTreeMap::new();
    let mut result_code = NONE;
    for answer in node.partitions.call_all(|| Sizes).await {
        match answer {
            Ok(list) => {
                for (partition, size) in list {
                    if wanted.as_ref().is_none_or(|w| w.contains(&partition)) {
                        sizes
                            .entry(partition.topic)
                            .or_default()
                            .push((partition.partition.0, size));
                    }
                }
            }
            Err(error) => result_code = error_code(&error),
        }
    }
    if result_code != NONE {
        // A shard that did not answer: its partitions are missing, and the directory is
        // reported as failing (Kafka's KAFKA_STORAGE_ERROR for an offline directory).
        result_code = error_code(&BrokerError::Storage(shard::StorageError::Offline(
            node.config.data_dir.clone(),
        )));
    }
    let mut result = DescribeLogDirsResult::default();
    result.error_code = result_code;
    let dir = node.config.data_dir.canonicalize().unwrap_or_else(|_| node.config.data_dir.clone());
    result.log_dir = super::str_bytes(&dir.display().to_string());
    if version >= 4 {
        let (usable, total) =
            node.disk_space().map(|(free, total)| (free as i64, total as i64)).unwrap_or((-1, -1));
        result.total_bytes = total;
        result.usable_bytes = usable;
    }
    for (topic, mut partitions) in sizes {
        partitions.sort_unstable();
        let mut entry = DescribeLogDirsTopic::default();
        entry.name = TopicName(super::str_bytes(&topic));
        entry.partitions = partitions
            .into_iter()
            .map(|(index, size)| {
                let mut partition = DescribeLogDirsPartition::default();
                partition.partition_index = index;
                partition.partition_size = size as i64;
                partition.offset_lag = 0;
                partition.is_future_key = false;
                partition
            })
            .collect();
        result.topics.push(entry);
    }
    let mut response = DescribeLogDirsResponse::default();
    if version >= 3 {
        response.error_code = result_code;
    }
    response.results = vec![result];
    response
}
