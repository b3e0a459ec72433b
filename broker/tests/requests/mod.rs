//! Kafka request builders shared by the in-process test suites (`handlers_in_process`,
//! `fault_injection`).
#![allow(dead_code)]

use kafka_protocol::messages::{fetch_request, BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// A Fetch (v4+) of one partition from `fetch_offset`, 1 MiB at most, without waiting.
pub fn fetch_request(name: &str, partition: i32, fetch_offset: i64) -> FetchRequest {
    let mut wanted = fetch_request::FetchPartition::default();
    wanted.partition = partition;
    wanted.fetch_offset = fetch_offset;
    wanted.partition_max_bytes = 1 << 20;
    let mut fetch_topic = fetch_request::FetchTopic::default();
    fetch_topic.topic = TopicName(StrBytes::from_string(name.to_string()));
    fetch_topic.partitions = vec![wanted];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = 0;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![fetch_topic];
    request
}
