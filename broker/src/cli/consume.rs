//! `strata consume TOPIC`: fetches from an offset and prints one record per line.

use super::{check, Client};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

pub struct ConsumeOptions {
    pub topic: String,
    pub partition: Option<i32>,
    /// `beginning`, `end`, or an offset.
    pub offset: String,
    pub count: Option<usize>,
    pub exit_at_end: bool,
    pub print_keys: bool,
    pub print_offsets: bool,
    pub key_separator: String,
}

pub fn run(bootstrap: &str, options: ConsumeOptions) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let partitions = {
        let mut request = MetadataRequest::default();
        let mut entry = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
        entry.name = Some(TopicName(StrBytes::from_string(options.topic.clone())));
        request.topics = Some(vec![entry]);
        // Reading never creates a topic (Metadata v9 would, by default).
        request.allow_auto_topic_creation = false;
        match client.call(ApiKey::Metadata, 9, RequestKind::Metadata(request))? {
            ResponseKind::Metadata(response) => {
                let meta = response.topics.into_iter().next().ok_or("no topic in the answer")?;
                if super::is_error(meta.error_code, ResponseError::UnknownTopicOrPartition) {
                    return Err(format!("topic {} does not exist", options.topic));
                }
                check(meta.error_code, None, &format!("topic {}", options.topic))?;
                meta.partitions.len() as i32
            }
            _ => return Err("unexpected response".into()),
        }
    };
    let wanted: Vec<i32> = match options.partition {
        Some(partition) => vec![partition],
        None => (0..partitions).collect(),
    };
    let bounds = super::topic::offsets(&mut client, &options.topic, partitions)?;
    let mut positions: Vec<(i32, i64, i64)> = Vec::new();
    for partition in wanted {
        let (start, end) =
            *bounds.get(partition as usize).ok_or(format!("no partition {partition}"))?;
        let offset = match options.offset.as_str() {
            "beginning" | "earliest" => start,
            "end" | "latest" => end,
            number => number
                .parse::<i64>()
                .map_err(|_| format!("--offset {number:?}: use beginning, end or a number"))?,
        };
        positions.push((partition, offset, end));
    }
    let mut printed = 0usize;
    let stdout = std::io::stdout();
    loop {
        if options.count.is_some_and(|count| printed >= count) {
            return Ok(());
        }
        if options.exit_at_end && positions.iter().all(|(_, offset, end)| offset >= end) {
            return Ok(());
        }
        let mut topic = FetchTopic::default();
        topic.topic = TopicName(StrBytes::from_string(options.topic.clone()));
        topic.partitions = positions
            .iter()
            .map(|(partition, offset, _)| {
                let mut entry = FetchPartition::default();
                entry.partition = *partition;
                entry.fetch_offset = *offset;
                entry.partition_max_bytes = 1 << 20;
                entry
            })
            .collect();
        let mut request = FetchRequest::default();
        request.replica_id = BrokerId(-1);
        request.max_wait_ms = 500;
        request.min_bytes = 1;
        request.max_bytes = 8 << 20;
        request.topics = vec![topic];
        let response = match client.call(ApiKey::Fetch, 11, RequestKind::Fetch(request))? {
            ResponseKind::Fetch(response) => response,
            _ => return Err("unexpected response".into()),
        };
        for topic in response.responses {
            for data in topic.partitions {
                check(
                    data.error_code,
                    None,
                    &format!("fetching partition {}", data.partition_index),
                )?;
                let Some(position) =
                    positions.iter_mut().find(|(p, _, _)| *p == data.partition_index)
                else {
                    continue;
                };
                position.2 = position.2.max(data.high_watermark);
                let records = data.records.unwrap_or_default();
                let mut rest = &records[..];
                while !rest.is_empty() {
                    let Ok(header) =
                        wire::RecordBatchHeader::parse(rest, shard::config::BATCH_BYTES_MAX)
                    else {
                        break;
                    };
                    rest = &rest[header.size_bytes()..];
                    let decoded =
                        wire::compression::records_of(&header).map_err(|e| e.to_string())?;
                    for record in decoded {
                        let offset = header.base_offset() + i64::from(record.offset_delta);
                        if offset < position.1 {
                            continue;
                        }
                        position.1 = offset + 1;
                        if options.count.is_some_and(|count| printed >= count) {
                            continue;
                        }
                        use std::io::Write;
                        let mut out = stdout.lock();
                        if options.print_offsets {
                            let _ = write!(
                                out,
                                "{}:{offset}{}",
                                data.partition_index, options.key_separator
                            );
                        }
                        if options.print_keys {
                            let _ = out.write_all(record.key.as_deref().unwrap_or_default());
                            let _ = out.write_all(options.key_separator.as_bytes());
                        }
                        let _ = out.write_all(record.value.as_deref().unwrap_or_default());
                        let _ = out.write_all(b"\n");
                        printed += 1;
                    }
                    position.1 = position.1.max(header.last_offset() + 1);
                }
            }
        }
    }
}
