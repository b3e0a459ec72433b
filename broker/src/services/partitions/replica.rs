//! Replication on the owner shard: a partition's role (leader, replicas, ISR, min.insync) from
//! the adopted image, the leader's view of its followers (the offsets they fetch from, when
//! each last caught up), the high watermark, follower fetches (Kafka's replica Fetch, with
//! `last_fetched_epoch` and `diverging_epoch`) and the wait of an acks=all append.
//!
//! Durability rule (ARCHITECTURE.md, "Replication"): each follower fetch tells its durable end
//! (the strata tag; without it, the fetch offset); the leader's high watermark is the minimum
//! over the ISR of those and of its own durable end, and it does not move while the ISR is
//! smaller than `min.insync.replicas`. acks=all is answered once it passes the batch.
//! A partition with one replica keeps the single-node rule (its high watermark follows the log
//! end; acks=all waits for the fsync only).
//! Runs on: the shard that owns the partition's replica.

use super::{Partition, PartitionService, ReadResult};
use crate::error::{BrokerError, Result};
use shard::io::Storage;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};
use wire::ids::{NodeId, Offset, TopicPartition};

/// A partition's replicas as the adopted image has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub leader: NodeId,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    /// The topic's `min.insync.replicas`.
    pub min_insync: usize,
}

impl Role {
    /// A single-node partition: this node leads it alone.
    pub fn alone(node: NodeId) -> Self {
        Role { leader: node, replicas: vec![node], isr: vec![node], min_insync: 1 }
    }

    /// More than one replica: the leader waits for followers.
    pub fn replicated(&self) -> bool {
        self.replicas.len() > 1
    }
}

/// How many of a follower's fetches the caught-up rule looks back over.
pub const FETCHES_REMEMBERED: usize = 8;

/// What the leader knows of one follower (Kafka's `Replica` state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Follower {
    /// Its durable end as its last fetch told it (never past the leader's log end then);
    /// `None` until it fetched at this leader epoch.
    pub log_end: Option<i64>,
    /// The last time it had everything the leader had (Kafka's `lastCaughtUpTimeMs`).
    pub last_caught_up_ms: i64,
    /// Its latest fetches, newest first: (when, the leader's log end then); `i64::MIN` when
    /// unused.
    pub recent_fetches: [(i64, i64); FETCHES_REMEMBERED],
}

impl Follower {
    pub fn fresh(now_ms: i64) -> Self {
        Follower {
            log_end: None,
            last_caught_up_ms: now_ms,
            recent_fetches: [(i64::MIN, i64::MAX); FETCHES_REMEMBERED],
        }
    }

    /// A fetch, durable up to `durable_end`, reached a leader whose log ends at `leader_end`.
    /// Kafka's caught-up rule on the durable end: caught up now if it has the leader's whole
    /// log, else as of the latest remembered fetch whose leader end it has reached (Kafka
    /// remembers only the previous one; a follower that fetches on while it syncs reaches it
    /// a fetch or two later).
    pub fn record(&mut self, durable_end: i64, leader_end: i64, now_ms: i64) {
        if durable_end >= leader_end {
            self.last_caught_up_ms = now_ms;
        } else if let Some((when, _)) =
            self.recent_fetches.iter().find(|(when, end)| *when != i64::MIN && durable_end >= *end)
        {
            self.last_caught_up_ms = self.last_caught_up_ms.max(*when);
        }
        self.log_end = Some(durable_end.min(leader_end));
        self.recent_fetches.rotate_right(1);
        self.recent_fetches[0] = (now_ms, leader_end);
    }
}

/// A follower's fetch of one partition, as the leader reads it.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaFetch {
    pub replica: NodeId,
    /// Its log end: where the answer starts.
    pub offset: Offset,
    pub last_fetched_epoch: i32,
    /// What it has synced (at most `offset`).
    pub durable_end: Offset,
}

/// Whether two replica lists hold the same nodes, in any order.
fn same_members(a: &[NodeId], b: &[NodeId]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// An ISR change a leader wants the controller to make: (partition, its leader epoch, the new
/// ISR).
pub type IsrChange = (TopicPartition, i32, Vec<NodeId>);

impl<S: Storage> Partition<S> {
    pub fn role(&self) -> Role {
        self.role.borrow().clone()
    }

    /// Takes the role the newest image gives this replica. Becoming the leader (or a new
    /// leader epoch of it) starts the followers' progress afresh: none counts for the high
    /// watermark until it fetched at this epoch, and each has `replica.lag.time.max.ms` from
    /// now to catch up.
    /// A replica set that changes under the same leader and epoch (a reassignment) keeps the
    /// progress of the followers that stay, starts the added ones afresh and forgets the
    /// removed ones.
    /// Returns whether this replica leads under the new role with an ISR the previous role
    /// did not have: a committed ISR change this node is to report, once.
    pub(super) fn take_role(&self, role: Role, epoch: i32, me: NodeId, now_ms: i64) -> bool {
        let previous = self.role.replace(role.clone());
        let isr_changed = role.leader == me && !same_members(&previous.isr, &role.isr);
        let previous_epoch = self.leader_epoch.replace(epoch);
        let fresh = || Follower::fresh(now_ms);
        let others = || role.replicas.iter().copied().filter(|replica| *replica != me);
        if role.leader == me && (previous.leader != me || previous_epoch != epoch) {
            *self.followers.borrow_mut() = others().map(|replica| (replica, fresh())).collect();
            self.isr_change_pending.set(false);
        } else if role.leader == me && previous.replicas != role.replicas {
            let mut followers = self.followers.borrow_mut();
            followers.retain(|replica, _| role.replicas.contains(replica));
            for replica in others() {
                followers.entry(replica).or_insert_with(fresh);
            }
        }
        if role.replicated() {
            // From now on the high watermark is decided, never the log end by default.
            self.log.set_high_watermark(self.log.log_start_offset());
        }
        // Waiters (acks=all, long polls) look again: leadership or the ISR may have moved.
        self.notify_appended();
        isr_changed
    }

    /// This replica's durable end as the high watermark counts it: what is synced under
    /// `flush.policy=always`, else what is appended (the policy accepts that window).
    fn own_end(&self) -> i64 {
        if self.log.config().flush == shard::FlushPolicy::Always {
            self.log.durable_end_offset()
        } else {
            self.log.log_end_offset()
        }
    }

    /// The leader's high watermark: the minimum durable end over the ISR; it stays where it is
    /// while a member's end is unknown or the ISR is smaller than `min.insync.replicas`.
    /// Appends a batch the broker writes itself (group and transaction records, transaction
    /// markers) as acks=all: synced, and on a replicated partition committed by the in-sync
    /// replicas within `timeout` (`wait_committed`'s errors otherwise).
    pub async fn append_committed(
        self: &Rc<Self>,
        partition: &TopicPartition,
        me: NodeId,
        batch: bytes::BytesMut,
        now_ms: i64,
        timeout: Duration,
    ) -> Result<shard::AppendInfo> {
        // As Kafka's acks=-1 append from a coordinator: refused before anything is written
        // while the ISR is below min.insync.replicas (the caller retries).
        {
            let role = self.role.borrow();
            if role.replicated() && role.isr.len() < role.min_insync {
                return Err(BrokerError::NotEnoughReplicas(format!(
                    "{partition}: {} in sync, min.insync.replicas is {}",
                    role.isr.len(),
                    role.min_insync
                )));
            }
        }
        // In the partition's append order, as produce requests: a transaction marker never
        // comes between a batch's partition verification and its append (`txn_verify`).
        let ticket = self.order.ticket();
        ticket.turn().await;
        // With one replica, held from readers until synced (as an acks=all produce).
        let hold = (!self.role().replicated())
            .then(|| self.log.hold_until_durable(self.log.log_end_offset()));
        let info = self.log.append_with(batch, self.leader_epoch(), now_ms, false).await?;
        // In the log: the next append may go on while this one waits for its sync, which then
        // covers both (group commit, as produce requests have it).
        drop(ticket);
        self.log.sync_to(info.last_offset + 1).await?;
        drop(hold);
        self.notify_appended();
        if self.role().replicated() {
            self.advance_high_watermark(me);
            self.wait_committed(partition, me, info.last_offset + 1, timeout).await?;
        }
        Ok(info)
    }

    /// Starts a sync when the followers are ahead of the leader's own durable end.
    pub fn advance_high_watermark(self: &Rc<Self>, me: NodeId) {
        let role = self.role.borrow().clone();
        if role.leader != me || !role.replicated() {
            return;
        }
        let own = self.own_end();
        let mut lowest_follower = i64::MAX;
        {
            let followers = self.followers.borrow();
            for member in role.isr.iter().filter(|member| **member != me) {
                match followers.get(member).and_then(|follower| follower.log_end) {
                    Some(end) => lowest_follower = lowest_follower.min(end),
                    None => return,
                }
            }
        }
        if own < lowest_follower.min(self.log.log_end_offset()) {
            self.sync_behind();
        }
        if role.isr.len() < role.min_insync {
            return;
        }
        let candidate = own.min(lowest_follower).min(self.log.log_end_offset());
        let before = self.log.high_watermark();
        if candidate > before {
            self.log.set_high_watermark(candidate);
            self.notify_appended();
        }
        // Invariants: the high watermark never moves back under a leader, and is at most
        // every in-sync replica's durable end (this one's as `own_end` counts it).
        let after = self.log.high_watermark();
        assert!(after >= before, "high watermark moved back from {before} to {after}");
        assert!(
            after <= own.max(before) && after <= lowest_follower.max(before),
            "high watermark {after} past an in-sync replica's durable end (own {own}, \
             followers {lowest_follower})"
        );
    }

    /// Syncs the log in the background (one such sync at a time), then advances the high
    /// watermark: what followers already have becomes committed once the leader has it too.
    pub fn sync_behind(self: &Rc<Self>) {
        if self.sync_running.replace(true) {
            return;
        }
        let partition = self.clone();
        shard::runtime::spawn(async move {
            let synced = partition.log.sync().await;
            partition.sync_running.set(false);
            match synced {
                Ok(()) => {
                    let me = partition.role.borrow().leader;
                    partition.advance_high_watermark(me);
                }
                Err(error) => {
                    tracing::warn!(dir = %partition.log.dir().display(), %error, "leader sync failed")
                }
            }
        })
        .detach();
    }

    /// A follower fetched, durable up to `durable_end` (`Follower::record`).
    /// Invariant: a follower's recorded end is at most the leader's log end (`replica_read`
    /// answers a fetch from past it OFFSET_OUT_OF_RANGE before recording it).
    fn record_fetch(&self, follower: NodeId, durable_end: i64, now_ms: i64) {
        let leader_end = self.log.log_end_offset();
        assert!(
            durable_end <= leader_end,
            "follower {} recorded at {durable_end}, past the leader's log end {leader_end}",
            follower.0
        );
        if let Some(state) = self.followers.borrow_mut().get_mut(&follower) {
            state.record(durable_end, leader_end, now_ms);
        }
    }

    /// The ISR change this leader wants now, if any: followers that have not caught up for
    /// `lag_max_ms` leave; replicas outside it that reached the high watermark (and this
    /// epoch's data) come back. One change at a time per partition.
    pub fn wanted_isr(
        &self,
        me: NodeId,
        lag_max_ms: i64,
        now_ms: i64,
        eligible: &dyn Fn(NodeId) -> bool,
    ) -> Option<Vec<NodeId>> {
        let role = self.role.borrow().clone();
        if role.leader != me || !role.replicated() || self.isr_change_pending.get() {
            return None;
        }
        let followers = self.followers.borrow();
        let high_watermark = self.log.high_watermark();
        let epoch_start = self.epoch_start_offset();
        let mut isr: Vec<NodeId> = role
            .isr
            .iter()
            .copied()
            .filter(|member| {
                *member == me
                    || followers
                        .get(member)
                        .is_some_and(|f| now_ms - f.last_caught_up_ms <= lag_max_ms)
            })
            .collect();
        for replica in &role.replicas {
            // A fenced broker is not asked back in (KIP-841): the controller would refuse it,
            // and a follower's last fetch can look caught up for `lag_max_ms` after it died.
            if isr.contains(replica) || !eligible(*replica) {
                continue;
            }
            let caught_up = followers.get(replica).is_some_and(|f| {
                f.log_end.is_some_and(|end| end >= high_watermark && end >= epoch_start)
                    && now_ms - f.last_caught_up_ms <= lag_max_ms
            });
            if caught_up {
                isr.push(*replica);
            }
        }
        (!same_members(&isr, &role.isr)).then_some(isr)
    }

    /// Where this leader's epoch starts (its log end until a batch of it is written).
    pub(super) fn epoch_start_offset(&self) -> i64 {
        let epoch = self.leader_epoch.get();
        let (found, end) = self.log.end_offset_for_epoch(epoch.saturating_sub(1), Some(epoch));
        if found < 0 {
            self.log.log_start_offset()
        } else {
            end
        }
    }

    /// Waits until the high watermark passes `target` (acks=all on a replicated partition):
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrinks below `min.insync.replicas`
    /// meanwhile, NOT_LEADER_OR_FOLLOWER when leadership moves, REQUEST_TIMED_OUT at the
    /// produce request's timeout.
    pub async fn wait_committed(
        &self,
        partition: &TopicPartition,
        me: NodeId,
        target: i64,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let listener = self.appended.listen();
            if self.log.high_watermark() >= target {
                return Ok(());
            }
            let role = self.role.borrow().clone();
            if role.leader != me || self.log.is_offline() {
                return Err(BrokerError::NotLeader(partition.to_string()));
            }
            if role.isr.len() < role.min_insync {
                return Err(BrokerError::NotEnoughReplicasAfterAppend(partition.to_string()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BrokerError::RequestTimedOut(format!(
                    "{partition}: not replicated to the in-sync replicas within {} ms",
                    timeout.as_millis()
                )));
            }
            futures_lite::future::or(
                async {
                    listener.await;
                },
                shard::runtime::sleep(left),
            )
            .await;
        }
    }
}

impl<S: Storage> PartitionService<S> {
    /// A follower's fetch from `offset` (Kafka's replica Fetch): answers where its log
    /// diverges (`diverging`: epoch, end offset, which it truncates to before fetching again)
    /// when its last fetched epoch ends earlier here, else the batches from `offset`
    /// to the log end (not only below the high watermark), after counting `offset` as the
    /// follower's durable end.
    pub(super) async fn replica_read(
        &self,
        partition: &TopicPartition,
        fetch: ReplicaFetch,
        max_bytes: usize,
    ) -> Result<ReadResult> {
        let ReplicaFetch { replica, offset, last_fetched_epoch, durable_end } = fetch;
        let owned = self.owned(partition)?;
        let role = owned.role();
        if role.leader != self.node {
            return Err(BrokerError::NotLeader(partition.to_string()));
        }
        if !role.replicas.contains(&replica) {
            return Err(BrokerError::NotLeader(format!(
                "{partition}: broker {} holds no replica of it",
                replica.0
            )));
        }
        if last_fetched_epoch >= 0 {
            let current = owned.leader_epoch();
            let (epoch, end) = owned.log.end_offset_for_epoch(last_fetched_epoch, Some(current));
            if epoch >= 0 && (epoch != last_fetched_epoch || end < offset.0) {
                return Ok(ReadResult {
                    batches: Vec::new(),
                    high_watermark: Offset(owned.log.high_watermark()),
                    last_stable_offset: Offset(owned.log.last_stable_offset()),
                    aborted: None,
                    log_start_offset: Offset(owned.log.log_start_offset()),
                    diverging: Some((epoch, end)),
                });
            }
        }
        let log_end = owned.log.log_end_offset();
        if offset.0 > log_end {
            // Kafka answers a follower ahead of the leader OFFSET_OUT_OF_RANGE; it is not
            // counted as caught up.
            return Err(shard::StorageError::OffsetOutOfRange {
                offset: offset.0,
                log_start_offset: owned.log.log_start_offset(),
                log_end_offset: log_end,
            }
            .into());
        }
        owned.record_fetch(replica, durable_end.0.min(offset.0), self.clock.now_ms());
        owned.advance_high_watermark(self.node);
        let read = owned.log.read(offset.0, max_bytes).await?;
        Ok(ReadResult {
            batches: read.batches,
            high_watermark: Offset(owned.log.high_watermark()),
            last_stable_offset: Offset(owned.log.last_stable_offset()),
            aborted: None,
            log_start_offset: Offset(owned.log.log_start_offset()),
            diverging: None,
        })
    }

    /// The ISR changes this shard's leaders want (see `Partition::wanted_isr`), adding only
    /// replicas `eligible` accepts (unfenced brokers); each is marked pending until
    /// `isr_change_done`.
    pub fn wanted_isr_changes(
        &self,
        lag_max_ms: i64,
        eligible: &dyn Fn(NodeId) -> bool,
    ) -> Vec<IsrChange> {
        let now = self.clock.now_ms();
        let mut changes = Vec::new();
        for (key, partition) in self.partitions.borrow().iter() {
            if let Some(isr) = partition.wanted_isr(self.node, lag_max_ms, now, eligible) {
                partition.isr_change_pending.set(true);
                changes.push((key.clone(), partition.leader_epoch(), isr));
            }
        }
        changes
    }

    /// The controller answered an ISR change (applied or not): the next may be asked for.
    pub fn isr_change_done(&self, partition: &TopicPartition) {
        if let Some(owned) = self.local(partition) {
            owned.isr_change_pending.set(false);
        }
    }

    /// (under-replicated, under min.insync) counts of the partitions this shard leads: an ISR
    /// smaller than the replicas, and one smaller than `min.insync.replicas`.
    pub fn replication_counts(&self) -> (u64, u64) {
        let (mut under, mut below_min) = (0, 0);
        for partition in self.partitions.borrow().values() {
            let role = partition.role.borrow();
            if role.leader != self.node {
                continue;
            }
            under += u64::from(role.isr.len() < role.replicas.len());
            below_min += u64::from(role.isr.len() < role.min_insync);
        }
        (under, below_min)
    }

    /// (partition, offsets behind the leader's log end, follower, ms since it last caught up)
    /// for every follower of every partition this shard leads: `/metrics`.
    pub fn follower_lags(&self) -> Vec<(TopicPartition, i64, NodeId, i64)> {
        let now = self.clock.now_ms();
        let mut lags = Vec::new();
        for (key, partition) in self.partitions.borrow().iter() {
            let leader_end = partition.log.log_end_offset();
            let followers: BTreeMap<NodeId, Follower> = partition.followers.borrow().clone();
            if partition.role.borrow().leader != self.node {
                continue;
            }
            for (node, follower) in followers {
                let behind = follower.log_end.map_or(leader_end, |end| leader_end - end);
                lags.push((key.clone(), behind, node, now - follower.last_caught_up_ms));
            }
        }
        lags
    }
}

#[cfg(test)]
mod tests {
    use super::Follower;

    #[test]
    fn a_follower_is_caught_up_as_of_the_latest_fetch_whose_leader_end_it_has_durably() {
        let mut follower = Follower::fresh(0);
        // Behind at 100 and 200 ms, with the leader at 10 then 20.
        follower.record(0, 10, 100);
        follower.record(5, 20, 200);
        assert_eq!((follower.last_caught_up_ms, follower.log_end), (0, Some(5)));
        // Durable to 10 at 300 ms: it had what the leader had at 100 ms (Kafka's rule would
        // look only at 200 ms, and say nothing).
        follower.record(10, 30, 300);
        assert_eq!(follower.last_caught_up_ms, 100);
        // Durable to 30: as of 300 ms.
        follower.record(30, 40, 400);
        assert_eq!(follower.last_caught_up_ms, 300);
        // The whole log: now.
        follower.record(40, 40, 500);
        assert_eq!(follower.last_caught_up_ms, 500);
        // Time never goes back, and a durable end past the leader's end counts as its end.
        follower.record(0, 50, 600);
        assert_eq!(follower.last_caught_up_ms, 500);
        follower.record(70, 60, 700);
        assert_eq!((follower.last_caught_up_ms, follower.log_end), (700, Some(60)));
    }

    #[test]
    fn a_follower_that_stalls_is_remembered_only_so_far_back() {
        let mut follower = Follower::fresh(0);
        follower.record(0, 1, 10);
        for i in 0..super::FETCHES_REMEMBERED as i64 {
            follower.record(0, 100 + i, 20 + i);
        }
        // The fetch at 10 ms (leader end 1) is forgotten: reaching 1 now says nothing.
        follower.record(1, 200, 1000);
        assert_eq!(follower.last_caught_up_ms, 0);
    }
}
