//! `strata produce TOPIC`: one record per stdin line, optionally `KEY<sep>VALUE`, in
//! uncompressed batches; partition by flag, else Kafka's murmur2 of the key, else round-robin.

use super::check;
use super::client::{Leaders, LEADER_WAIT, RETRIABLE};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
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
    /// Printed per record once acknowledged (`%p %o` and the other `format` letters).
    pub format: Option<super::format::Format>,
}

/// Records read from stdin, batched per partition and sent to each partition's leader (a
/// cluster's partitions are led by several brokers); a batch answered with a retriable error
/// is sent again to the leader Metadata then names, for up to `LEADER_WAIT`.
pub fn run(bootstrap: &str, options: ProduceOptions) -> Result<(), String> {
    if options.acks == 0 {
        return Err("acks=0 is not offered by the CLI (it could not report failures)".into());
    }
    // Writing may create the topic where the cluster auto-creates topics, as any producer.
    let mut leaders = Leaders::discover(bootstrap, &options.topic, true)?;
    let partitions = leaders.partition_count().max(1);
    if let Some(partition) = options.partition {
        if !(0..partitions).contains(&partition) {
            return Err(format!("{} has no partition {partition}", options.topic));
        }
    }
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
            produced += send(&mut leaders, &options, partition, records)?;
        }
    }
    for (partition, records) in std::mem::take(&mut pending) {
        if !records.is_empty() {
            produced += send(&mut leaders, &options, partition, records)?;
        }
    }
    eprintln!("produced {produced} records to {}", options.topic);
    Ok(())
}

/// Sends one batch to `partition`'s leader, again after a retriable error; prints each record
/// with `options.format` once acknowledged.
fn send(
    leaders: &mut Leaders,
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
    let batch = bytes::Bytes::from(builder.build());
    let deadline = std::time::Instant::now() + LEADER_WAIT;
    let base_offset = loop {
        let leader = leaders.leader_of(partition);
        let outcome = if leader < 0 {
            Err(None)
        } else {
            produce_once(leaders, leader, options, partition, batch.clone())
        };
        match outcome {
            Ok(base_offset) => break base_offset,
            Err(Some(fatal)) => return Err(fatal),
            Err(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(200));
                leaders.refresh(false)?;
            }
            Err(None) => {
                return Err(format!(
                    "producing to partition {partition}: no leader took it in {} s",
                    LEADER_WAIT.as_secs()
                ))
            }
        }
    };
    if let Some(format) = &options.format {
        let mut out = Vec::new();
        for (index, (key, value)) in records.iter().enumerate() {
            let printed = super::format::Printed {
                topic: &options.topic,
                partition,
                offset: base_offset + index as i64,
                timestamp: now,
                key: key.as_deref(),
                value: Some(value),
                headers: &[],
            };
            format.render(&printed, &mut out);
        }
        std::io::stdout().write_all(&out).map_err(|e| format!("writing stdout: {e}"))?;
    }
    Ok(records.len())
}

/// One Produce to `leader`: the batch's base offset; `Err(None)` to try again after a
/// Metadata refresh (a retriable error, or the connection failed), `Err(Some)` to stop.
fn produce_once(
    leaders: &mut Leaders,
    leader: i32,
    options: &ProduceOptions,
    partition: i32,
    batch: bytes::Bytes,
) -> Result<i64, Option<String>> {
    let mut data = PartitionProduceData::default();
    data.index = partition;
    data.records = Some(batch);
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_string(options.topic.clone()));
    topic.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = options.acks;
    request.timeout_ms = 30_000;
    request.topic_data = vec![topic];
    let client = leaders.connection(leader).map_err(|_| None)?;
    let answer = client.call(ApiKey::Produce, 7, RequestKind::Produce(request));
    let Ok(ResponseKind::Produce(response)) = answer else {
        leaders.drop_connection(leader);
        return Err(None);
    };
    let result = response
        .responses
        .into_iter()
        .flat_map(|t| t.partition_responses)
        .find(|p| p.index == partition)
        .ok_or(Some(format!("no answer for partition {partition}")))?;
    if RETRIABLE.contains(&result.error_code) {
        return Err(None);
    }
    check(
        result.error_code,
        result.error_message.as_ref(),
        &format!("producing to partition {partition}"),
    )
    .map_err(Some)?;
    Ok(result.base_offset)
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
