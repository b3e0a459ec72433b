//! DescribeLogDirs (key 35): the broker's one log directory with the size of each partition
//! (asked of every shard) and, from v4, the file system's total and usable bytes. Tools that
//! show topic sizes (kafka-log-dirs.sh, admin UIs) use it. There is no replica movement, so
//! `offset_lag` is 0 and nothing is a future replica.

use crate::error::code;
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (1, 4);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // None: every partition; otherwise only those asked for (unknown ones are left out, as
    // Kafka does).
    let wanted: Option<BTreeSet<(String, i32)>> = request.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.to_string(), *p)))
            .collect()
    });
    let mut sizes: BTreeMap<String, Vec<(i32, u64)>> = BTreeMap::new();
    let mut error_code = code::NONE;
    for target in 0..shard.count {
        match call(shard, target, ShardRequest::LogSizes).await {
            ShardResponse::LogSizes(list) => {
                for (topic, partition, size) in list {
                    if wanted.as_ref().is_none_or(|w| w.contains(&(topic.clone(), partition))) {
                        sizes.entry(topic).or_default().push((partition, size));
                    }
                }
            }
            _ => error_code = code::KAFKA_STORAGE_ERROR,
        }
    }
    let mut result = DescribeLogDirsResult::default();
    result.error_code = error_code;
    let dir =
        shard.config.data_dir.canonicalize().unwrap_or_else(|_| shard.config.data_dir.clone());
    result.log_dir = super::str_bytes(&dir.display().to_string());
    if version >= 4 {
        let (usable, total) = crate::cli::doctor::free_bytes(&shard.config.data_dir)
            .map(|(free, total)| (free as i64, total as i64))
            .unwrap_or((-1, -1));
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
        response.error_code = error_code;
    }
    response.results = vec![result];
    response
}
