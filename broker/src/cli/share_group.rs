//! `strata group describe` of a KIP-932 share group: its members with their assignments, and
//! per partition the share-partition start offset (DescribeShareGroupOffsets), the log end
//! and the lag (records from the start offset to the end: not yet acknowledged or archived,
//! in flight included).

use super::{check, Client};
use kafka_protocol::messages::share_group_describe_response::DescribedGroup;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};

/// (topic, partition) → start offset (-1: no state) of the group's partitions on `topics`,
/// or (None) on every partition the group has state on.
fn start_offsets(
    client: &mut Client,
    group: &str,
    topics: Option<&BTreeMap<String, i32>>,
) -> Result<BTreeMap<(String, i32), i64>, String> {
    let mut asked =
        describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default();
    asked.group_id = GroupId(StrBytes::from_string(group.to_string()));
    asked.topics = topics.map(|topics| {
        topics
            .iter()
            .map(|(topic, count)| {
                let mut entry =
                    describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default();
                entry.topic_name = TopicName(StrBytes::from_string(topic.clone()));
                entry.partitions = (0..*count).collect();
                entry
            })
            .collect()
    });
    let mut request = DescribeShareGroupOffsetsRequest::default();
    request.groups = vec![asked];
    let kind = RequestKind::DescribeShareGroupOffsets(request);
    let response = match client.call(ApiKey::DescribeShareGroupOffsets, 0, kind)? {
        ResponseKind::DescribeShareGroupOffsets(response) => response,
        _ => return Err("unexpected response".into()),
    };
    let mut out = BTreeMap::new();
    for described in response.groups {
        check(described.error_code, described.error_message.as_ref(), "describing offsets")?;
        for topic in described.topics {
            for partition in topic.partitions {
                let key = (topic.topic_name.0.to_string(), partition.partition_index);
                out.insert(key, partition.start_offset);
            }
        }
    }
    Ok(out)
}

/// (topic, partition, start offset, log end, lag, members assigned) of `describe`.
type Row = (String, i32, i64, i64, Option<i64>, Vec<String>);

/// The table of `describe`: every partition of the topics the members subscribe to, and every
/// other partition the group has state on (an Empty group's).
fn rows(client: &mut Client, group: &str, described: &DescribedGroup) -> Result<Vec<Row>, String> {
    let mut subscribed: BTreeSet<String> = BTreeSet::new();
    let mut owners: BTreeMap<(String, i32), Vec<String>> = BTreeMap::new();
    for member in &described.members {
        subscribed.extend(member.subscribed_topic_names.iter().map(|t| t.0.to_string()));
        for topic in &member.assignment.topic_partitions {
            for partition in &topic.partitions {
                let key = (topic.topic_name.0.to_string(), *partition);
                owners.entry(key).or_default().push(member.member_id.to_string());
            }
        }
    }
    let mut counts: BTreeMap<String, i32> = BTreeMap::new();
    let mut ends: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for topic in &subscribed {
        let count = super::topic::partition_count(client, topic).unwrap_or(0);
        counts.insert(topic.clone(), count);
        ends.insert(topic.clone(), super::topic::offsets(client, topic, count)?);
    }
    let mut starts = start_offsets(client, group, Some(&counts))?;
    for (key, start) in start_offsets(client, group, None)? {
        if !ends.contains_key(&key.0) {
            let count = super::topic::partition_count(client, &key.0).unwrap_or(0);
            ends.insert(key.0.clone(), super::topic::offsets(client, &key.0, count)?);
        }
        starts.entry(key).or_insert(start);
    }
    let mut rows = Vec::new();
    for ((topic, partition), start) in &starts {
        let end = ends.get(topic).and_then(|e| e.get(*partition as usize)).map_or(-1, |e| e.1);
        let lag = (*start >= 0 && end >= 0).then(|| (end - start).max(0));
        let members = owners.get(&(topic.clone(), *partition)).cloned().unwrap_or_default();
        rows.push((topic.clone(), *partition, *start, end, lag, members));
    }
    Ok(rows)
}

fn print_json(group: &str, described: &DescribedGroup, rows: &[Row]) {
    let members: Vec<serde_json::Value> = described
        .members
        .iter()
        .map(|m| {
            let assigned: Vec<serde_json::Value> = m
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(move |p| {
                        serde_json::json!({"topic": t.topic_name.0.to_string(), "partition": p})
                    })
                })
                .collect();
            serde_json::json!({"member_id": m.member_id.to_string(),
                               "client_id": m.client_id.to_string(),
                               "member_epoch": m.member_epoch, "assignment": assigned})
        })
        .collect();
    let offsets: Vec<serde_json::Value> = rows
        .iter()
        .map(|(topic, partition, start, end, lag, members)| {
            serde_json::json!({"topic": topic, "partition": partition,
                               "start_offset": start, "log_end_offset": end, "lag": lag,
                               "members": members})
        })
        .collect();
    let out = serde_json::json!({"group": group, "protocol": "share",
                                 "state": described.group_state.to_string(),
                                 "group_epoch": described.group_epoch,
                                 "assignor": described.assignor_name.to_string(),
                                 "members": members, "offsets": offsets});
    println!("{out}");
}

pub fn describe(
    client: &mut Client,
    group: &str,
    described: DescribedGroup,
    json_output: bool,
) -> Result<(), String> {
    let rows = rows(client, group, &described)?;
    if json_output {
        print_json(group, &described, &rows);
        return Ok(());
    }
    println!(
        "group {group}  protocol share  state {}  group-epoch {}  assignor {}  members {}",
        described.group_state,
        described.group_epoch,
        described.assignor_name,
        described.members.len()
    );
    println!(
        "{:<30} {:>9} {:>12} {:>14} {:>8}  MEMBERS",
        "TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG"
    );
    for (topic, partition, start, end, lag, members) in rows {
        let shown_start = if start < 0 { "-".to_string() } else { start.to_string() };
        let shown_lag = lag.map_or_else(|| "-".to_string(), |l| l.to_string());
        let members = if members.is_empty() { "-".to_string() } else { members.join(",") };
        println!(
            "{topic:<30} {partition:>9} {shown_start:>12} {end:>14} {shown_lag:>8}  {members}"
        );
    }
    Ok(())
}

/// Sets a share group's start offsets on `topic` (AlterShareGroupOffsets): `targets` are
/// (partition, start offset). The broker refuses it while the group has members.
pub fn alter_start_offsets(
    client: &mut Client,
    group: &str,
    topic: &str,
    targets: &[(i32, i64)],
) -> Result<(), String> {
    let mut entry =
        alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default();
    entry.topic_name = TopicName(StrBytes::from_string(topic.to_string()));
    entry.partitions = targets
        .iter()
        .map(|(partition, offset)| {
            let mut p =
                alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default(
                );
            p.partition_index = *partition;
            p.start_offset = *offset;
            p
        })
        .collect();
    let mut request = AlterShareGroupOffsetsRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.topics = vec![entry];
    let kind = RequestKind::AlterShareGroupOffsets(request);
    let response = match client.call(ApiKey::AlterShareGroupOffsets, 0, kind)? {
        ResponseKind::AlterShareGroupOffsets(response) => response,
        _ => return Err("unexpected response".into()),
    };
    check(response.error_code, response.error_message.as_ref(), "resetting the share group")?;
    for answered in response.responses {
        for partition in answered.partitions {
            let what = format!("resetting {topic}-{}", partition.partition_index);
            check(partition.error_code, partition.error_message.as_ref(), &what)?;
        }
    }
    Ok(())
}

/// Deletes a share group's state on `topic` (DeleteShareGroupOffsets): its members start from
/// `share.auto.offset.reset` again. The broker refuses it while the group has members.
pub fn delete_start_offsets(client: &mut Client, group: &str, topic: &str) -> Result<(), String> {
    let mut entry =
        delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default();
    entry.topic_name = TopicName(StrBytes::from_string(topic.to_string()));
    let mut request = DeleteShareGroupOffsetsRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.topics = vec![entry];
    let kind = RequestKind::DeleteShareGroupOffsets(request);
    let response = match client.call(ApiKey::DeleteShareGroupOffsets, 0, kind)? {
        ResponseKind::DeleteShareGroupOffsets(response) => response,
        _ => return Err("unexpected response".into()),
    };
    check(
        response.error_code,
        response.error_message.as_ref(),
        "deleting the share group's offsets",
    )?;
    for answered in response.responses {
        check(
            answered.error_code,
            answered.error_message.as_ref(),
            &format!("deleting on {topic}"),
        )?;
    }
    Ok(())
}
