//! `strata produce TOPIC`: one record per stdin line, optionally `KEY<sep>VALUE`, in
//! uncompressed batches; partition by flag, else Kafka's murmur2 of the key, else round-robin.

use super::{check, Client};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::io::BufRead;
use wire::{BatchRecord, RecordBatchBuilder};

/// One input line: optional key, value.
type Line = (Option<Vec<u8>>, Vec<u8>);

/// Records per produced batch.
pub const BATCH_RECORDS_MAX: usize = 1000;

/// Kafka's murmur2 (the Java client's default partitioner for keyed records).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

pub struct ProduceOptions {
    pub topic: String,
    pub partition: Option<i32>,
    pub key_separator: Option<String>,
    pub acks: i16,
}

pub fn run(bootstrap: &str, options: ProduceOptions) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let partitions = partition_count(&mut client, &options.topic)?;
    let stdin = std::io::stdin();
    let mut pending: BTreeMap<i32, Vec<Line>> = BTreeMap::new();
    let mut round_robin = 0i32;
    let mut produced = 0usize;
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        let (key, value) = match &options.key_separator {
            Some(separator) => match line.split_once(separator.as_str()) {
                Some((key, value)) => (Some(key.as_bytes().to_vec()), value.as_bytes().to_vec()),
                None => (None, line.into_bytes()),
            },
            None => (None, line.into_bytes()),
        };
        let partition = match (options.partition, &key) {
            (Some(partition), _) => partition,
            (None, Some(key)) => (murmur2(key) & 0x7fff_ffff) % partitions,
            (None, None) => {
                round_robin = (round_robin + 1) % partitions;
                round_robin
            }
        };
        let queue = pending.entry(partition).or_default();
        queue.push((key, value));
        if queue.len() >= BATCH_RECORDS_MAX {
            let records = std::mem::take(queue);
            produced += send(&mut client, &options, partition, records)?;
        }
    }
    for (partition, records) in std::mem::take(&mut pending) {
        if !records.is_empty() {
            produced += send(&mut client, &options, partition, records)?;
        }
    }
    eprintln!("produced {produced} records to {}", options.topic);
    Ok(())
}

fn partition_count(client: &mut Client, topic: &str) -> Result<i32, String> {
    let mut request = MetadataRequest::default();
    let mut entry = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
    entry.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    request.topics = Some(vec![entry]);
    request.allow_auto_topic_creation = true;
    match client.call(ApiKey::Metadata, 9, RequestKind::Metadata(request))? {
        ResponseKind::Metadata(response) => {
            let meta = response.topics.into_iter().next().ok_or("no topic in the answer")?;
            check(meta.error_code, None, &format!("topic {topic}"))?;
            Ok((meta.partitions.len() as i32).max(1))
        }
        _ => Err("unexpected response".into()),
    }
}

fn send(
    client: &mut Client,
    options: &ProduceOptions,
    partition: i32,
    records: Vec<Line>,
) -> Result<usize, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let mut builder = RecordBatchBuilder::new(now);
    for (key, value) in &records {
        builder.push(BatchRecord { key: key.as_deref(), value: Some(value), timestamp_delta: 0 });
    }
    let mut data = PartitionProduceData::default();
    data.index = partition;
    data.records = Some(bytes::Bytes::from(builder.build()));
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_string(options.topic.clone()));
    topic.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = options.acks;
    request.timeout_ms = 30_000;
    request.topic_data = vec![topic];
    if options.acks == 0 {
        return Err("acks=0 is not offered by the CLI (it could not report failures)".into());
    }
    match client.call(ApiKey::Produce, 7, RequestKind::Produce(request))? {
        ResponseKind::Produce(response) => {
            for topic in response.responses {
                for result in topic.partition_responses {
                    check(
                        result.error_code,
                        result.error_message.as_ref(),
                        &format!("producing to partition {partition}"),
                    )?;
                }
            }
            Ok(records.len())
        }
        _ => Err("unexpected response".into()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn murmur2_matches_kafkas_java_partitioner() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(super::murmur2(b"21"), -973932308);
        assert_eq!(super::murmur2(b"foobar"), -790332482);
        assert_eq!(super::murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(super::murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(super::murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971);
        assert_eq!(super::murmur2(b"abc"), 479470107);
    }
}
