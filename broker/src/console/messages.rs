//! `GET /api/topics/<t>/partitions/<p>/messages`: records of a partition from an offset
//! (`offset=N`), a time (`timestamp=MS`, ListOffsets at the leader) or an end (`from=start`,
//! `from=end`: the last `limit`), read with Fetch at the leader as the user (READ on the
//! topic), up to `limit` records. Keys, values and header values go out base64 (the page
//! shows them as text, JSON or hex), cut at `RECORD_BYTES_SHOWN_MAX`; control batches
//! (transaction markers) are skipped. Compressed batches are decompressed off the shard.

use super::client::Caller;
use super::http::Request;
use super::topics::{EARLIEST, LATEST};
use super::{ConsoleError, ConsoleResult};
use base64::Engine;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};
use shard::io::Storage;

/// Most records one page shows, and the default.
pub const RECORDS_PER_PAGE_MAX: usize = 100;
const RECORDS_PER_PAGE: usize = 20;
/// Bytes asked for in one Fetch, and most Fetches for one page.
pub const FETCH_BYTES_MAX: i32 = 1 << 20;
const FETCHES_PER_PAGE_MAX: usize = 4;
/// Most bytes of one key, value or header value shown.
pub const RECORD_BYTES_SHOWN_MAX: usize = 16 * 1024;
/// Most headers shown per record.
pub const HEADERS_SHOWN_MAX: usize = 32;

struct Where<'a> {
    topic: &'a str,
    partition: i32,
    leader: i32,
}

async fn offset_at<S: Storage>(
    caller: &Caller<'_, S>,
    at: &Where<'_>,
    timestamp: i64,
) -> Result<i64, ConsoleError> {
    let mut partition = ListOffsetsPartition::default();
    partition.partition_index = at.partition;
    partition.current_leader_epoch = -1;
    partition.timestamp = timestamp;
    let mut topic = ListOffsetsTopic::default();
    topic.name = TopicName(StrBytes::from_string(at.topic.to_string()));
    topic.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![topic];
    let answer = caller.call(at.leader, request).await?;
    let found = answer
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| ConsoleError::Unavailable("ListOffsets answered nothing".into()))?;
    ConsoleError::check(found.error_code, || format!("{}-{}", at.topic, at.partition))?;
    Ok(found.offset)
}

fn shown(bytes: Option<&[u8]>) -> Value {
    match bytes {
        None => Value::Null,
        Some(bytes) => {
            let cut = bytes.get(..RECORD_BYTES_SHOWN_MAX).unwrap_or(bytes);
            json!({
                "size": bytes.len(),
                "base64": base64::engine::general_purpose::STANDARD.encode(cut),
                "truncated": cut.len() < bytes.len(),
            })
        }
    }
}

/// The records of a Fetch answer's record set from `from` on, at most `limit` - `out.len()`.
async fn decode(
    records: bytes::Bytes,
    from: i64,
    limit: usize,
    out: &mut Vec<Value>,
) -> Result<i64, ConsoleError> {
    let mut next = from;
    let mut rest: &[u8] = &records;
    while !rest.is_empty() && out.len() < limit {
        let Ok(header) = wire::RecordBatchHeader::parse(rest, shard::config::BATCH_BYTES_MAX)
        else {
            break;
        };
        let batch = rest.get(..header.size_bytes()).unwrap_or_default().to_vec();
        rest = rest.get(header.size_bytes()..).unwrap_or_default();
        if header.is_control() {
            next = next.max(header.last_offset() + 1);
            continue;
        }
        let (base, producer, transactional) =
            (header.base_offset(), header.producer_id(), header.is_transactional());
        let log_append =
            matches!(header.timestamp_type(), wire::record_batch::TimestampType::LogAppendTime);
        let (base_timestamp, max_timestamp) = (header.base_timestamp(), header.max_timestamp());
        let decoded = shard::runtime::offload(move || {
            let header = wire::RecordBatchHeader::parse(&batch, shard::config::BATCH_BYTES_MAX)
                .map_err(|e| e.to_string())?;
            wire::compression::records_of(&header).map_err(|e| e.to_string())
        })
        .await
        .ok_or_else(|| ConsoleError::Unavailable("no thread to decompress a batch".into()))?
        .map_err(|e| ConsoleError::Unavailable(format!("a batch could not be read: {e}")))?;
        for record in decoded {
            let offset = base + i64::from(record.offset_delta);
            if offset < from || out.len() >= limit {
                continue;
            }
            next = offset + 1;
            let headers: Vec<Value> = record.headers.iter().take(HEADERS_SHOWN_MAX)
                .map(|(key, value)| json!({"key": String::from_utf8_lossy(key), "value": shown(value.as_deref())}))
                .collect();
            out.push(json!({
                "offset": offset,
                "timestamp": if log_append { max_timestamp } else { base_timestamp + record.timestamp_delta },
                "timestamp_type": if log_append { "append" } else { "create" },
                "key": shown(record.key.as_deref()),
                "value": shown(record.value.as_deref()),
                "headers": headers,
                "producer_id": producer,
                "transactional": transactional,
            }));
        }
        if out.len() < limit {
            next = next.max(header.last_offset() + 1);
        }
    }
    Ok(next)
}

fn fetch_request(at: &Where<'_>, offset: i64, committed: bool) -> FetchRequest {
    let mut partition = FetchPartition::default();
    partition.partition = at.partition;
    partition.current_leader_epoch = -1;
    partition.fetch_offset = offset;
    partition.last_fetched_epoch = -1;
    partition.log_start_offset = -1;
    partition.partition_max_bytes = FETCH_BYTES_MAX;
    let mut topic = FetchTopic::default();
    topic.topic = TopicName(StrBytes::from_string(at.topic.to_string()));
    topic.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = 0;
    request.min_bytes = 1;
    request.max_bytes = FETCH_BYTES_MAX;
    request.isolation_level = i8::from(committed);
    request.session_epoch = -1;
    request.topics = vec![topic];
    request
}

/// The page's options from the query.
fn options(request: &Request) -> Result<(usize, bool), ConsoleError> {
    let limit = match request.query("limit") {
        None | Some("") => RECORDS_PER_PAGE,
        Some(value) => value
            .parse::<usize>()
            .map_err(|_| ConsoleError::BadRequest(format!("limit = {value:?}")))?,
    };
    if limit == 0 || limit > RECORDS_PER_PAGE_MAX {
        return Err(ConsoleError::BadRequest(format!("limit must be 1..={RECORDS_PER_PAGE_MAX}")));
    }
    Ok((limit, request.query("isolation") == Some("committed")))
}

pub async fn read<S: Storage>(
    caller: &Caller<'_, S>,
    topic: &str,
    partition: i32,
    request: &Request,
) -> ConsoleResult {
    let (limit, committed) = options(request)?;
    let metadata = super::topics::metadata(caller, Some(&[topic.to_string()])).await?;
    let found =
        metadata.topics.first().ok_or_else(|| ConsoleError::NotFound(format!("topic {topic}")))?;
    ConsoleError::check(found.error_code, || format!("topic {topic}"))?;
    let placement = found
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| ConsoleError::NotFound(format!("partition {topic}-{partition}")))?;
    let at = Where { topic, partition, leader: placement.leader_id.0 };
    let log_start = offset_at(caller, &at, EARLIEST).await?;
    let high_watermark = offset_at(caller, &at, LATEST).await?;
    let parse = |name: &str, value: &str| {
        value.parse::<i64>().map_err(|_| ConsoleError::BadRequest(format!("{name} = {value:?}")))
    };
    let (mut start, mut note) = (log_start, Value::Null);
    if let Some(offset) = request.query("offset").filter(|v| !v.is_empty()) {
        start = parse("offset", offset)?;
    } else if let Some(timestamp) = request.query("timestamp").filter(|v| !v.is_empty()) {
        start = offset_at(caller, &at, parse("timestamp", timestamp)?).await?;
        if start < 0 {
            start = high_watermark;
            note = json!("no record at or after that time");
        }
    } else if request.query("from") == Some("end") {
        start = high_watermark - limit as i64;
    }
    let start = start.clamp(log_start, high_watermark.max(log_start));
    let mut records = Vec::new();
    let mut next = start;
    for _ in 0..FETCHES_PER_PAGE_MAX {
        if records.len() >= limit || next >= high_watermark {
            break;
        }
        let answer = caller.call(at.leader, fetch_request(&at, next, committed)).await?;
        ConsoleError::check(answer.error_code, || "Fetch".into())?;
        let data = answer
            .responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .ok_or_else(|| ConsoleError::Unavailable("Fetch answered nothing".into()))?;
        ConsoleError::check(data.error_code, || format!("{topic}-{partition}"))?;
        let Some(bytes) = data.records.filter(|r| !r.is_empty()) else { break };
        let after = decode(bytes, next, limit, &mut records).await?;
        if after <= next {
            break;
        }
        next = after;
    }
    Ok(json!({
        "topic": topic, "partition": partition, "log_start": log_start, "high_watermark": high_watermark,
        "start_offset": start, "next_offset": next, "records": records, "note": note,
    }))
}
