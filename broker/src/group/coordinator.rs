//! Group requests on the coordinating shard: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! DescribeGroups, commit validation, and the timer that expires sessions and completes joins.

use super::membership::{
    compatible, GroupCell, JoinOutcome, Member, State, GROUP_MEMBERS_MAX,
    MEMBER_METADATA_BYTES_MAX, SESSION_TIMEOUT_MS_MAX, SESSION_TIMEOUT_MS_MIN,
};
use crate::error::code;
use crate::state::Shard;
use bytes::Bytes;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
pub const FENCED_INSTANCE_ID: i16 = 82;
/// How often the coordinator checks sessions and rebalance deadlines.
pub const GROUP_TICK_MS: u64 = 100;

pub struct JoinRequest {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub version: i16,
}

fn failed_join(error_code: i16, member_id: String) -> JoinOutcome {
    JoinOutcome {
        error_code,
        generation: -1,
        protocol_type: String::new(),
        protocol: String::new(),
        leader: String::new(),
        member_id,
        members: Vec::new(),
    }
}

fn cell(shard: &Shard, group: &str) -> Rc<GroupCell> {
    shard.groups.borrow_mut().entry(group.to_string()).or_insert_with(GroupCell::new).clone()
}

pub async fn join(shard: &Shard, request: JoinRequest) -> JoinOutcome {
    if !super::valid_group_id(&request.group) {
        return failed_join(code::INVALID_GROUP_ID, request.member_id);
    }
    if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&request.session_timeout_ms) {
        return failed_join(INVALID_SESSION_TIMEOUT, request.member_id);
    }
    if request.protocols.is_empty()
        || request.protocols.iter().any(|(_, md)| md.len() > MEMBER_METADATA_BYTES_MAX)
    {
        return failed_join(INCONSISTENT_GROUP_PROTOCOL, request.member_id);
    }
    let cell = cell(shard, &request.group);
    let member_id = {
        let mut group = cell.group.borrow_mut();
        let mut member_id = request.member_id.clone();
        // Static membership (KIP-345): a known instance id takes its old place under a new
        // member id; in a stable group with unchanged protocols nobody else rebalances.
        if let (Some(instance), true) = (&request.instance_id, member_id.is_empty()) {
            let previous = group
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(instance.as_str()))
                .map(|m| m.id.clone());
            if let Some(previous) = previous {
                let fresh = group.new_member_id(&request.client_id);
                if let Some(mut member) = group.members.remove(&previous) {
                    let unchanged = member.protocols == request.protocols;
                    member.id = fresh.clone();
                    member.last_seen = Instant::now();
                    member.protocols = request.protocols.clone();
                    group.members.insert(fresh.clone(), member);
                    if group.leader == previous {
                        group.leader = fresh.clone();
                    }
                    group.dirty = true;
                    if unchanged
                        && matches!(group.state, State::Stable | State::CompletingRebalance)
                    {
                        return JoinOutcome {
                            error_code: code::NONE,
                            generation: group.generation,
                            protocol_type: group.protocol_type.clone(),
                            protocol: group.protocol.clone(),
                            leader: group.leader.clone(),
                            member_id: fresh,
                            members: Vec::new(),
                        };
                    }
                    member_id = fresh;
                }
            } else {
                // A new static member joins at once (no MEMBER_ID_REQUIRED round trip).
                member_id = group.new_member_id(&request.client_id);
                group.pending_ids.push(member_id.clone());
            }
        }
        if member_id.is_empty() {
            if group.members.len() + group.pending_ids.len() >= GROUP_MEMBERS_MAX {
                return failed_join(GROUP_MAX_SIZE_REACHED, member_id);
            }
            member_id = group.new_member_id(&request.client_id);
            if request.version >= 4 {
                group.pending_ids.push(member_id.clone());
                return failed_join(MEMBER_ID_REQUIRED, member_id);
            }
        } else if !group.members.contains_key(&member_id) && !group.pending_ids.contains(&member_id)
        {
            return failed_join(code::UNKNOWN_MEMBER_ID, member_id);
        }
        if !compatible(&group, &request.protocol_type, &request.protocols) {
            return failed_join(INCONSISTENT_GROUP_PROTOCOL, member_id);
        }
        group.pending_ids.retain(|id| *id != member_id);
        if group.members.is_empty() {
            group.protocol_type = request.protocol_type.clone();
        }
        group.members.insert(
            member_id.clone(),
            Member {
                id: member_id.clone(),
                instance_id: request.instance_id.clone(),
                client_id: request.client_id.clone(),
                client_host: request.client_host.clone(),
                session_timeout_ms: request.session_timeout_ms,
                rebalance_timeout_ms: request.rebalance_timeout_ms.max(request.session_timeout_ms),
                protocol_type: request.protocol_type.clone(),
                protocols: request.protocols.clone(),
                assignment: Bytes::new(),
                last_seen: Instant::now(),
                joined: true,
            },
        );
        group.prepare_rebalance(shard.config.initial_rebalance_delay_ms);
        if let Some(member) = group.members.get_mut(&member_id) {
            member.joined = true;
        }
        group.try_complete_join(Instant::now(), false);
        member_id
    };
    cell.changed.notify(usize::MAX);
    let patience = Duration::from_millis(
        request.rebalance_timeout_ms.max(request.session_timeout_ms) as u64 + 5000,
    );
    let give_up = Instant::now() + patience;
    loop {
        let listener = cell.changed.listen();
        {
            let group = cell.group.borrow();
            if group.state != State::PreparingRebalance {
                if let Some(outcome) = group.join_outcomes.get(&member_id) {
                    return outcome.clone();
                }
            }
            if !group.members.contains_key(&member_id) {
                return failed_join(code::UNKNOWN_MEMBER_ID, member_id);
            }
        }
        let now = Instant::now();
        if now >= give_up {
            return failed_join(REBALANCE_IN_PROGRESS, member_id);
        }
        futures_lite::future::or(
            async {
                listener.await;
            },
            shard::runtime::sleep((give_up - now).min(Duration::from_millis(GROUP_TICK_MS * 2))),
        )
        .await;
    }
}

/// (error code, assignment, protocol type, protocol).
pub async fn sync(
    shard: &Shard,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
) -> (i16, Bytes, String, String) {
    let Some(cell) = shard.groups.borrow().get(group_id).cloned() else {
        return (code::UNKNOWN_MEMBER_ID, Bytes::new(), String::new(), String::new());
    };
    let leader_assigned = {
        let mut group = cell.group.borrow_mut();
        if fenced(&group, member_id, instance) {
            return (FENCED_INSTANCE_ID, Bytes::new(), String::new(), String::new());
        }
        if !group.members.contains_key(member_id) {
            return (code::UNKNOWN_MEMBER_ID, Bytes::new(), String::new(), String::new());
        }
        if generation != group.generation {
            return (code::ILLEGAL_GENERATION, Bytes::new(), String::new(), String::new());
        }
        if group.state == State::PreparingRebalance {
            return (REBALANCE_IN_PROGRESS, Bytes::new(), String::new(), String::new());
        }
        if let Some(member) = group.members.get_mut(member_id) {
            member.last_seen = Instant::now();
        }
        let leader_assigned =
            group.state == State::CompletingRebalance && group.leader == member_id;
        if leader_assigned {
            for (id, assignment) in assignments {
                if assignment.len() > MEMBER_METADATA_BYTES_MAX {
                    continue;
                }
                if let Some(member) = group.members.get_mut(&id) {
                    member.assignment = assignment;
                }
            }
        }
        leader_assigned
    };
    if leader_assigned {
        // The generation is durable before anyone gets its assignment (Kafka stores the group
        // before answering SyncGroup), so a restarted coordinator keeps it Stable.
        let stored = super::store_group(shard, group_id).await;
        let mut group = cell.group.borrow_mut();
        if let Err(error) = stored {
            tracing::warn!(group = group_id, %error, "storing the group failed; rebalancing");
            group.prepare_rebalance(0);
            drop(group);
            cell.changed.notify(usize::MAX);
            return (crate::error::error_code(&error), Bytes::new(), String::new(), String::new());
        }
        if group.state == State::CompletingRebalance && group.generation == generation {
            group.state = State::Stable;
        }
    }
    cell.changed.notify(usize::MAX);
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let listener = cell.changed.listen();
        {
            let group = cell.group.borrow();
            let Some(member) = group.members.get(member_id) else {
                return (code::UNKNOWN_MEMBER_ID, Bytes::new(), String::new(), String::new());
            };
            if group.generation != generation || group.state == State::PreparingRebalance {
                return (REBALANCE_IN_PROGRESS, Bytes::new(), String::new(), String::new());
            }
            if group.state == State::Stable {
                return (
                    code::NONE,
                    member.assignment.clone(),
                    group.protocol_type.clone(),
                    group.protocol.clone(),
                );
            }
        }
        let now = Instant::now();
        if now >= give_up {
            return (REBALANCE_IN_PROGRESS, Bytes::new(), String::new(), String::new());
        }
        futures_lite::future::or(
            async {
                listener.await;
            },
            shard::runtime::sleep(Duration::from_millis(GROUP_TICK_MS * 2)),
        )
        .await;
    }
}

/// FENCED_INSTANCE_ID when `instance` now belongs to another member id (an old incarnation of
/// a static member still talking).
fn fenced(group: &super::membership::Group, member_id: &str, instance: Option<&str>) -> bool {
    instance.is_some_and(|instance| {
        group
            .members
            .values()
            .any(|m| m.instance_id.as_deref() == Some(instance) && m.id != member_id)
    })
}

pub fn heartbeat(
    shard: &Shard,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> i16 {
    let Some(cell) = shard.groups.borrow().get(group_id).cloned() else {
        return code::UNKNOWN_MEMBER_ID;
    };
    let mut group = cell.group.borrow_mut();
    if fenced(&group, member_id, instance) {
        return FENCED_INSTANCE_ID;
    }
    let current_generation = group.generation;
    let state = group.state;
    let Some(member) = group.members.get_mut(member_id) else {
        return code::UNKNOWN_MEMBER_ID;
    };
    if generation != current_generation {
        return code::ILLEGAL_GENERATION;
    }
    member.last_seen = Instant::now();
    if state == State::PreparingRebalance {
        REBALANCE_IN_PROGRESS
    } else {
        code::NONE
    }
}

/// Removes members; returns a code per member id.
pub fn leave(shard: &Shard, group_id: &str, member_ids: &[String]) -> Vec<i16> {
    let Some(cell) = shard.groups.borrow().get(group_id).cloned() else {
        return member_ids.iter().map(|_| code::UNKNOWN_MEMBER_ID).collect();
    };
    let codes = {
        let mut group = cell.group.borrow_mut();
        let codes: Vec<i16> = member_ids
            .iter()
            .map(|id| {
                if group.members.remove(id).is_some() {
                    code::NONE
                } else {
                    code::UNKNOWN_MEMBER_ID
                }
            })
            .collect();
        if codes.contains(&code::NONE) {
            group.prepare_rebalance(0);
            group.try_complete_join(Instant::now(), false);
        }
        codes
    };
    cell.changed.notify(usize::MAX);
    codes
}

/// Checks a commit's member and generation against the group (Kafka's rules for the classic
/// protocol); `None` when it may proceed.
pub fn check_commit(
    shard: &Shard,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> Option<i16> {
    let cell = shard.groups.borrow().get(group_id).cloned();
    let Some(cell) = cell else {
        return match (member_id.is_empty(), generation) {
            (true, -1) => None,
            (false, _) => Some(code::UNKNOWN_MEMBER_ID),
            (true, _) => Some(code::ILLEGAL_GENERATION),
        };
    };
    let group = cell.group.borrow();
    if fenced(&group, member_id, instance) {
        return Some(FENCED_INSTANCE_ID);
    }
    if member_id.is_empty() && generation == -1 {
        // A standalone commit: allowed while the group has no members.
        return if group.members.is_empty() { None } else { Some(code::UNKNOWN_MEMBER_ID) };
    }
    if !group.members.contains_key(member_id) {
        return Some(code::UNKNOWN_MEMBER_ID);
    }
    if generation != group.generation {
        return Some(code::ILLEGAL_GENERATION);
    }
    if group.state == State::PreparingRebalance {
        return Some(REBALANCE_IN_PROGRESS);
    }
    None
}

/// A described group: (state, protocol type, protocol, members (id, instance, client, host,
/// metadata, assignment)).
pub type Described =
    (String, String, String, Vec<(String, Option<String>, String, String, Bytes, Bytes)>);

pub fn describe(shard: &Shard, group_id: &str) -> Option<Described> {
    let cell = shard.groups.borrow().get(group_id).cloned()?;
    let group = cell.group.borrow();
    let members = group
        .members
        .values()
        .map(|m| {
            let metadata = m.metadata_for(&group.protocol);
            (
                m.id.clone(),
                m.instance_id.clone(),
                m.client_id.clone(),
                m.client_host.clone(),
                metadata,
                m.assignment.clone(),
            )
        })
        .collect();
    Some((
        group.state.name().to_string(),
        group.protocol_type.clone(),
        group.protocol.clone(),
        members,
    ))
}

/// (group, state) of the groups with members on this shard.
pub fn states(shard: &Shard) -> Vec<(String, String)> {
    shard
        .groups
        .borrow()
        .iter()
        .map(|(name, cell)| (name.clone(), cell.group.borrow().state.name().to_string()))
        .collect()
}

/// Expires committed offsets of groups without members whose last commit is older than
/// `offsets_retention_ms` (Kafka's offsets.retention.minutes), with durable tombstones.
async fn expire_offsets(shard: &Shard) {
    let horizon = shard::runtime::now_ms() - shard.config.offsets_retention_ms as i64;
    let expired: Vec<(String, Vec<(String, i32)>)> = {
        let table = shard.offsets.borrow();
        let groups = shard.groups.borrow();
        table
            .iter()
            .filter(|(group, _)| {
                groups.get(*group).is_none_or(|cell| cell.group.borrow().members.is_empty())
            })
            .map(|(group, map)| {
                let old = map
                    .iter()
                    .filter(|(_, c)| c.commit_ms < horizon)
                    .map(|(k, _)| k.clone())
                    .collect();
                (group.clone(), old)
            })
            .filter(|(_, old): &(String, Vec<(String, i32)>)| !old.is_empty())
            .collect()
    };
    for (group, partitions) in expired {
        match super::delete(shard, &group, Some(partitions)).await {
            Ok(deleted) => {
                tracing::info!(%group, partitions = deleted.len(), "expired committed offsets")
            }
            Err(error) => tracing::warn!(%group, %error, "expiring committed offsets failed"),
        }
    }
}

/// Writes the metadata record of groups that changed since their last one and are now Stable
/// or Empty (a static member's new id, the last member gone); a generation still forming is
/// written when its SyncGroup completes.
async fn store_dirty_groups(shard: &Shard) {
    let dirty: Vec<String> = shard
        .groups
        .borrow()
        .iter()
        .filter(|(_, cell)| {
            let group = cell.group.borrow();
            group.dirty && matches!(group.state, State::Stable | State::Empty)
        })
        .map(|(name, _)| name.clone())
        .collect();
    for group in dirty {
        if let Err(error) = super::store_group(shard, &group).await {
            tracing::warn!(%group, %error, "storing group metadata failed; will retry");
        }
    }
}

/// Ticks between offset-expiry checks (once a second).
const OFFSET_EXPIRY_TICKS: u64 = 1000 / GROUP_TICK_MS;

/// Expires sessions and completes joins whose deadline passed, forever.
pub async fn tick(shard: Rc<Shard>) {
    let mut ticks: u64 = 0;
    loop {
        shard::runtime::sleep(Duration::from_millis(GROUP_TICK_MS)).await;
        ticks += 1;
        if ticks.is_multiple_of(OFFSET_EXPIRY_TICKS) {
            expire_offsets(&shard).await;
            let owned: Vec<i32> = shard
                .partitions
                .borrow()
                .keys()
                .filter(|(topic, _)| topic == super::OFFSETS_TOPIC)
                .map(|(_, partition)| *partition)
                .collect();
            for partition in owned {
                if let Err(error) =
                    super::compact(&shard, partition, shard.config.offsets_compact_bytes).await
                {
                    tracing::warn!(partition, %error, "compacting committed offsets failed");
                }
            }
        }
        store_dirty_groups(&shard).await;
        let now = Instant::now();
        let cells: Vec<Rc<GroupCell>> = shard.groups.borrow().values().cloned().collect();
        for cell in cells {
            let changed = {
                let mut group = cell.group.borrow_mut();
                let mut changed = false;
                if group.expire_members(now) {
                    changed = true;
                    if group.state != State::PreparingRebalance {
                        group.prepare_rebalance(0);
                    }
                }
                changed |= group.try_complete_join(now, false);
                changed
            };
            if changed {
                cell.changed.notify(usize::MAX);
            }
        }
    }
}
