//! `strata consume TOPIC`: fetches each partition from its leader and prints one record per
//! `--format` (rpk's letters). Where to start and stop, per partition (`-o`, rpk's forms):
//! `start` (the log start; `beginning`, `oldest`), `end` (`newest`), an offset `N`, `+N` (N
//! after the start), `-N` (N before the end), `@MS` (the first record at or after that time),
//! and a range `FROM:TO` whose end (exclusive) is any of those, `end` meaning the end when the
//! command started. `-n` stops after that many records, `-e` at the end of every partition.
//! With `--group` it starts where the group's committed offsets are (else at `-o`) and commits
//! what it printed, as a consumer outside the group (Kafka's `assign()` with commits): refused
//! while the group has members. Reading never creates a topic or a group's membership.

use super::client::{Client, Leaders, RETRIABLE};
use super::format::{Format, Printed};
use super::{check, group};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

pub struct ConsumeOptions {
    pub topic: String,
    pub partition: Option<i32>,
    /// `FROM[:TO]` (see the module header).
    pub offset: String,
    pub count: Option<usize>,
    pub exit_at_end: bool,
    pub format: Format,
    pub group: Option<String>,
}

/// Where to start or stop in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    Start,
    End,
    Offset(i64),
    AfterStart(i64),
    BeforeEnd(i64),
    Timestamp(i64),
}

fn parse_position(text: &str) -> Result<Position, String> {
    let wrong = || {
        format!(
            "-o {text:?}: use start, end, an offset, +N, -N or @TIMESTAMP_MS (FROM:TO for a range)"
        )
    };
    Ok(match text {
        "start" | "beginning" | "oldest" | "earliest" => Position::Start,
        "end" | "newest" | "latest" => Position::End,
        _ => {
            if let Some(n) = text.strip_prefix('+') {
                Position::AfterStart(n.parse().map_err(|_| wrong())?)
            } else if let Some(n) = text.strip_prefix('-') {
                Position::BeforeEnd(n.parse().map_err(|_| wrong())?)
            } else if let Some(ms) = text.strip_prefix('@') {
                Position::Timestamp(ms.parse().map_err(|_| wrong())?)
            } else {
                Position::Offset(text.parse().map_err(|_| wrong())?)
            }
        }
    })
}

/// `FROM[:TO]`.
fn parse_range(text: &str) -> Result<(Position, Option<Position>), String> {
    match text.split_once(':') {
        Some((from, to)) => Ok((parse_position(from)?, Some(parse_position(to)?))),
        None => Ok((parse_position(text)?, None)),
    }
}

/// The offset a position names in a partition with this start and end (and the offset found
/// for its timestamp, -1 for none: the end).
fn resolve(position: Position, start: i64, end: i64, at_time: i64) -> i64 {
    match position {
        Position::Start => start,
        Position::End => end,
        Position::Offset(offset) => offset.clamp(start, end),
        Position::AfterStart(n) => start.saturating_add(n).min(end),
        Position::BeforeEnd(n) => end.saturating_sub(n).max(start),
        Position::Timestamp(_) => {
            if at_time >= 0 {
                at_time
            } else {
                end
            }
        }
    }
}

/// One partition being read: next offset, where to stop (exclusive), the end last seen.
struct Reading {
    next: i64,
    stop: Option<i64>,
    end: i64,
}

pub fn run(bootstrap: &str, options: ConsumeOptions) -> Result<(), String> {
    let (from, to) = parse_range(&options.offset)?;
    let mut leaders = Leaders::discover(bootstrap, &options.topic, false)?;
    let count = leaders.partition_count();
    let wanted: Vec<i32> = match options.partition {
        Some(partition) if (0..count).contains(&partition) => vec![partition],
        Some(partition) => return Err(format!("{} has no partition {partition}", options.topic)),
        None => (0..count).collect(),
    };
    let mut any = Client::connect(bootstrap)?;
    let bounds = super::topic::offsets(&mut any, &options.topic, count)?;
    let at_time = |position: Option<Position>, any: &mut Client| match position {
        Some(Position::Timestamp(ms)) => super::topic::offsets_at(any, &options.topic, count, ms),
        _ => Ok(vec![-1; count as usize]),
    };
    let (from_times, to_times) = (at_time(Some(from), &mut any)?, at_time(to, &mut any)?);
    // With a group: its committed offsets first, and a connection to commit through.
    let mut committing = match &options.group {
        Some(name) => Some((name.clone(), group_start(bootstrap, name, &options.topic)?)),
        None => None,
    };
    let mut reading: BTreeMap<i32, Reading> = BTreeMap::new();
    for partition in wanted {
        let index = partition as usize;
        let (start, end) = bounds.get(index).copied().ok_or(format!("no partition {partition}"))?;
        let mut next = resolve(from, start, end, from_times.get(index).copied().unwrap_or(-1));
        if let Some((_, (_, committed))) = &committing {
            if let Some(offset) = committed.get(&partition).filter(|o| **o >= 0) {
                next = *offset;
            }
        }
        let stop = to.map(|to| resolve(to, start, end, to_times.get(index).copied().unwrap_or(-1)));
        reading.insert(partition, Reading { next, stop, end });
    }
    let mut printed = 0usize;
    let mut last_commit = Instant::now();
    let outcome = fetch_loop(&mut leaders, &options, &mut reading, &mut printed, |reading| {
        if let Some((name, (coordinator, _))) = committing.as_mut() {
            if last_commit.elapsed() >= Duration::from_secs(1) {
                commit_positions(coordinator, name, &options.topic, reading)?;
                last_commit = Instant::now();
            }
        }
        Ok(())
    });
    if let Some((name, (coordinator, _))) = committing.as_mut() {
        commit_positions(coordinator, name, &options.topic, &reading)?;
    }
    outcome
}

/// The group's coordinator and its committed offsets of `topic`; refused while the group
/// has members (its commits would fight theirs).
fn group_start(
    bootstrap: &str,
    name: &str,
    topic: &str,
) -> Result<(Client, BTreeMap<i32, i64>), String> {
    let mut coordinator = group::coordinator(bootstrap, name)?;
    let (state, members) = group::describe_group(&mut coordinator, name)?;
    if !members.is_empty() {
        return Err(format!(
            "group {name} is {state} with {} members: strata consume --group reads and commits \
             from outside the group, so stop them first",
            members.len()
        ));
    }
    let committed = group::committed(&mut coordinator, name)?
        .into_iter()
        .filter(|((committed_topic, _), _)| committed_topic == topic)
        .map(|((_, partition), offset)| (partition, offset))
        .collect();
    Ok((coordinator, committed))
}

fn commit_positions(
    coordinator: &mut Client,
    name: &str,
    topic: &str,
    reading: &BTreeMap<i32, Reading>,
) -> Result<(), String> {
    let targets: Vec<(i32, i64)> = reading.iter().map(|(p, r)| (*p, r.next)).collect();
    group::commit(coordinator, name, topic, &targets, "committing")
}

/// Fetches from each leader in turn until a stop condition; `after_round` runs after every
/// round that printed something.
fn fetch_loop(
    leaders: &mut Leaders,
    options: &ConsumeOptions,
    reading: &mut BTreeMap<i32, Reading>,
    printed: &mut usize,
    mut after_round: impl FnMut(&BTreeMap<i32, Reading>) -> Result<(), String>,
) -> Result<(), String> {
    let stdout = std::io::stdout();
    let mut failing_since: Option<Instant> = None;
    loop {
        if options.count.is_some_and(|count| *printed >= count) {
            return Ok(());
        }
        let active: Vec<i32> = reading
            .iter()
            .filter(|(_, r)| r.stop.is_none_or(|stop| r.next < stop))
            .map(|(p, _)| *p)
            .collect();
        if active.is_empty() {
            return Ok(());
        }
        if options.exit_at_end && reading.values().all(|r| r.next >= r.end) {
            return Ok(());
        }
        let by_leader = leaders.by_leader(&active);
        let max_wait_ms = if by_leader.len() > 1 { 100 } else { 500 };
        let mut stale = by_leader.is_empty();
        let before = *printed;
        for (leader, partitions) in by_leader {
            let request = fetch_request(&options.topic, &partitions, reading, max_wait_ms);
            let answer = leaders
                .connection(leader)
                .and_then(|client| client.call(ApiKey::Fetch, 11, RequestKind::Fetch(request)));
            let Ok(ResponseKind::Fetch(response)) = answer else {
                leaders.drop_connection(leader);
                stale = true;
                continue;
            };
            let mut out = Vec::new();
            for data in response.responses.into_iter().flat_map(|t| t.partitions) {
                let partition = data.partition_index;
                if RETRIABLE.contains(&data.error_code) {
                    stale = true;
                    continue;
                }
                check(data.error_code, None, &format!("fetching partition {partition}"))?;
                let Some(state) = reading.get_mut(&partition) else { continue };
                state.end = state.end.max(data.high_watermark);
                let records = data.records.unwrap_or_default();
                print_records(options, partition, &records, state, printed, &mut out)?;
            }
            stdout.lock().write_all(&out).map_err(|e| format!("writing stdout: {e}"))?;
        }
        if *printed > before {
            after_round(reading)?;
        }
        if stale {
            let since = *failing_since.get_or_insert_with(Instant::now);
            if since.elapsed() > super::client::LEADER_WAIT {
                return Err(format!(
                    "{}: partitions without a reachable leader for {} s",
                    options.topic,
                    super::client::LEADER_WAIT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
            leaders.refresh(false)?;
        } else {
            failing_since = None;
        }
    }
}

fn fetch_request(
    topic: &str,
    partitions: &[i32],
    reading: &BTreeMap<i32, Reading>,
    max_wait_ms: i32,
) -> FetchRequest {
    let mut entry = FetchTopic::default();
    entry.topic = TopicName(StrBytes::from_string(topic.to_string()));
    entry.partitions = partitions
        .iter()
        .filter_map(|partition| {
            let state = reading.get(partition)?;
            let mut wanted = FetchPartition::default();
            wanted.partition = *partition;
            wanted.fetch_offset = state.next;
            wanted.partition_max_bytes = 1 << 20;
            Some(wanted)
        })
        .collect();
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = max_wait_ms;
    request.min_bytes = 1;
    request.max_bytes = 8 << 20;
    request.topics = vec![entry];
    request
}

/// Renders the records of `records` from `state.next` on (up to its stop and the count),
/// moving `state.next` past every batch read.
fn print_records(
    options: &ConsumeOptions,
    partition: i32,
    records: &[u8],
    state: &mut Reading,
    printed: &mut usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let mut rest = records;
    while !rest.is_empty() {
        let Ok(header) = wire::RecordBatchHeader::parse(rest, shard::config::BATCH_BYTES_MAX)
        else {
            break;
        };
        rest = &rest[header.size_bytes()..];
        if header.is_control() {
            state.next = state.next.max(header.last_offset() + 1);
            continue;
        }
        let decoded = wire::compression::records_of(&header).map_err(|e| e.to_string())?;
        for record in decoded {
            let offset = header.base_offset() + i64::from(record.offset_delta);
            if offset < state.next {
                continue;
            }
            if state.stop.is_some_and(|stop| offset >= stop)
                || options.count.is_some_and(|count| *printed >= count)
            {
                return Ok(());
            }
            state.next = offset + 1;
            let headers: Vec<(String, Option<Vec<u8>>)> = record
                .headers
                .iter()
                .map(|(key, value)| (String::from_utf8_lossy(key).into_owned(), value.clone()))
                .collect();
            let timestamp = header.base_timestamp() + record.timestamp_delta;
            let shown = Printed {
                topic: &options.topic,
                partition,
                offset,
                timestamp,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers: &headers,
            };
            options.format.render(&shown, out);
            *printed += 1;
        }
        state.next = state.next.max(header.last_offset() + 1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_take_rpks_forms_and_stay_within_the_log() {
        assert_eq!(parse_range("start").unwrap(), (Position::Start, None));
        assert_eq!(parse_range("+5:end").unwrap(), (Position::AfterStart(5), Some(Position::End)));
        assert_eq!(parse_range("-3").unwrap(), (Position::BeforeEnd(3), None));
        assert_eq!(
            parse_range("@1700000000000:42").unwrap(),
            (Position::Timestamp(1_700_000_000_000), Some(Position::Offset(42)))
        );
        assert!(parse_range("soon").is_err());
        assert!(parse_range("5:later").is_err());
        // Log [10, 20).
        assert_eq!(resolve(Position::Start, 10, 20, -1), 10);
        assert_eq!(resolve(Position::End, 10, 20, -1), 20);
        assert_eq!(resolve(Position::Offset(3), 10, 20, -1), 10);
        assert_eq!(resolve(Position::Offset(30), 10, 20, -1), 20);
        assert_eq!(resolve(Position::AfterStart(4), 10, 20, -1), 14);
        assert_eq!(resolve(Position::BeforeEnd(4), 10, 20, -1), 16);
        assert_eq!(resolve(Position::BeforeEnd(40), 10, 20, -1), 10);
        assert_eq!(resolve(Position::Timestamp(5), 10, 20, 12), 12);
        assert_eq!(resolve(Position::Timestamp(5), 10, 20, -1), 20);
    }
}
