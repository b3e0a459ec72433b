//! One shard's counters and latency histograms, read by `/metrics` through the stats service.
//! Each shard counts only what happens on it, so nothing is shared between cores to count.
//!
//! Runs on: one shard (`RefCell`, not `Send`); `Counters` snapshots cross cores by value.

use std::cell::RefCell;
use std::collections::BTreeMap;

/// What a topic's traffic counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    MessagesIn = 0,
    BytesIn = 1,
    MessagesOut = 2,
    BytesOut = 3,
}

/// Why a connection was not served (Kafka's `max.connections`, `max.connections.per.ip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// Closed at once: its address has `max.connections.per.ip` open already.
    PerIp,
    /// Waited to be accepted: the broker had `max.connections` open.
    BrokerLimit,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::PerIp => "per_ip",
            Refusal::BrokerLimit => "max_connections",
        }
    }
}

/// Why the broker closed a connection itself (not bad input, not the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Closed {
    /// No request for `connections.max.idle.ms`.
    Idle,
    /// A request frame did not finish arriving within the frame deadline.
    FrameDeadline,
    /// An acks=0 produce failed (a partition not led here, say): Kafka closes the connection,
    /// the producer's only sign to refresh its metadata.
    AcksZeroFailed,
}

impl Closed {
    pub fn label(self) -> &'static str {
        match self {
            Closed::Idle => "idle",
            Closed::FrameDeadline => "frame_deadline",
            Closed::AcksZeroFailed => "acks0_failed",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Requests served on this shard's connections, by API key.
    pub requests_by_api: BTreeMap<i16, u64>,
    /// Requests that ended in a closed connection (bad input).
    pub connections_closed_on_error: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Request latency (decode to response written), microseconds, by API key.
    pub request_latency_us: BTreeMap<i16, hdrhistogram::Histogram<u64>>,
    /// Partition-level errors returned, by Kafka error code.
    pub errors_by_code: BTreeMap<i16, u64>,
    /// Per topic on the owning shard: (messages in, bytes in, messages out, bytes out).
    pub topic_traffic: BTreeMap<String, [u64; 4]>,
    pub connections_open: u64,
    pub connections_refused: BTreeMap<Refusal, u64>,
    pub connections_closed: BTreeMap<Closed, u64>,
    /// Idempotent producers' retries answered with the original offsets (not written again).
    pub duplicate_batches: u64,
    /// ISR changes this shard's leaders made (shrinks and expands).
    pub isr_changes: u64,
    /// Transactions this shard's coordinator completed, committed and aborted.
    pub txn_commits: u64,
    pub txn_aborts: u64,
    /// Partition verifications (KIP-890) of first transactional batches: passed, refused.
    pub txn_verifications: u64,
    pub txn_verifications_refused: u64,
    /// SASL authentications that failed (a wrong password, an unknown user or mechanism).
    pub authentication_failures: u64,
    /// SASL re-authentications (KIP-368) that succeeded.
    pub reauthentications: u64,
    /// Operations the authorizer refused (issue #18).
    pub authorization_denials: u64,
    /// Records removed by log compaction, and compaction runs that rewrote something.
    pub compacted_records: u64,
    pub compaction_runs: u64,
    /// `__consumer_offsets` batches (or whole partitions' rest) replay could not read.
    pub offsets_replay_skipped: u64,
    /// Generations of classic groups stored (each a rebalance), and the summed duration of
    /// those (first join to Stable).
    pub classic_rebalances: u64,
    pub classic_rebalance_us_total: u64,
    /// Group epoch bumps of KIP-848 consumer groups (each starts a rebalance).
    pub consumer_rebalances: u64,
    /// Consumer group rebalances that reached Stable, and their summed duration (bump to
    /// Stable at that epoch or later).
    pub consumer_rebalances_completed: u64,
    pub consumer_rebalance_us_total: u64,
    /// Heartbeat steps that computed a target assignment, their summed and largest time.
    pub consumer_assignments: u64,
    pub consumer_assignment_us_total: u64,
    pub consumer_assignment_us_max: u64,
    /// Group epoch bumps of KIP-932 share groups (a member joined or left, a subscription or
    /// a subscribed topic changed).
    pub share_rebalances: u64,
    /// Share partitions' records: acquired by a consumer (each delivery, redeliveries too),
    /// acquired again after a release or a lock timeout, accepted, released, rejected,
    /// archived at the delivery limit, and locks that timed out.
    pub share_acquired: u64,
    pub share_redelivered: u64,
    pub share_accepted: u64,
    pub share_released: u64,
    pub share_rejected: u64,
    pub share_archived_at_limit: u64,
    pub share_lock_timeouts: u64,
    /// Dead letters (KIP-1191) written to share groups' dead-letter topics, and not written.
    pub share_dead_letters: u64,
    pub share_dead_letters_failed: u64,
    /// Share partitions held in memory on this shard (a gauge, set by the share tick).
    pub share_partitions: u64,
    /// Damaged batches readers met on disk (each counted once).
    pub damaged_batches: u64,
    /// Offline partitions reopened by the repair loop.
    pub partition_recoveries: u64,
    /// Bytes of requests read and not yet answered on this shard, now and at most.
    pub queued_request_bytes: u64,
    pub queued_request_bytes_peak: u64,
}

/// A change to the share-partition counters (`ShardStats::share_records`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShareCounts {
    pub acquired: u64,
    pub redelivered: u64,
    pub accepted: u64,
    pub released: u64,
    pub rejected: u64,
    pub archived_at_limit: u64,
    pub lock_timeouts: u64,
}

/// The counters of the shard they live on.
#[derive(Default)]
pub struct ShardStats {
    counters: RefCell<Counters>,
}

impl ShardStats {
    pub fn snapshot(&self) -> Counters {
        self.counters.borrow().clone()
    }

    pub fn count_request(&self, api_key: i16, bytes: usize) {
        let mut counters = self.counters.borrow_mut();
        *counters.requests_by_api.entry(api_key).or_default() += 1;
        counters.bytes_in += bytes as u64;
    }

    pub fn count_bytes_out(&self, bytes: usize) {
        self.counters.borrow_mut().bytes_out += bytes as u64;
    }

    pub fn record_latency(&self, api_key: i16, micros: u64) {
        self.counters
            .borrow_mut()
            .request_latency_us
            .entry(api_key)
            .or_insert_with(shard::partition_log::latency_histogram)
            .saturating_record(micros.max(1));
    }

    pub fn count_error(&self, code: i16) {
        if code != crate::error::NONE {
            *self.counters.borrow_mut().errors_by_code.entry(code).or_default() += 1;
        }
    }

    pub fn add_traffic(&self, topic: &str, kind: Traffic, amount: u64) {
        let mut counters = self.counters.borrow_mut();
        if let Some(slot) =
            counters.topic_traffic.entry(topic.to_string()).or_default().get_mut(kind as usize)
        {
            *slot += amount;
        }
    }

    pub fn connection_opened(&self) {
        self.counters.borrow_mut().connections_open += 1;
    }

    pub fn connection_closed(&self) {
        let mut counters = self.counters.borrow_mut();
        counters.connections_open = counters.connections_open.saturating_sub(1);
    }

    pub fn closed_on_error(&self) {
        self.counters.borrow_mut().connections_closed_on_error += 1;
    }

    pub fn closed_by_broker(&self, reason: Closed) {
        *self.counters.borrow_mut().connections_closed.entry(reason).or_default() += 1;
    }

    pub fn refused(&self, reason: Refusal) {
        *self.counters.borrow_mut().connections_refused.entry(reason).or_default() += 1;
    }

    pub fn isr_changed(&self) {
        self.counters.borrow_mut().isr_changes += 1;
    }

    pub fn transaction_completed(&self, committed: bool) {
        let mut counters = self.counters.borrow_mut();
        if committed {
            counters.txn_commits += 1;
        } else {
            counters.txn_aborts += 1;
        }
    }

    pub fn authentication_failed(&self) {
        self.counters.borrow_mut().authentication_failures += 1;
    }

    pub fn authorization_denied(&self) {
        self.counters.borrow_mut().authorization_denials += 1;
    }

    pub fn reauthenticated(&self) {
        self.counters.borrow_mut().reauthentications += 1;
    }

    pub fn txn_verification(&self, passed: bool) {
        let mut counters = self.counters.borrow_mut();
        counters.txn_verifications += 1;
        if !passed {
            counters.txn_verifications_refused += 1;
        }
    }

    pub fn duplicate_batch(&self) {
        self.counters.borrow_mut().duplicate_batches += 1;
    }

    pub fn compacted(&self, records_removed: u64) {
        let mut counters = self.counters.borrow_mut();
        counters.compaction_runs += 1;
        counters.compacted_records += records_removed;
    }

    pub fn classic_rebalance(&self, took_us: Option<u64>) {
        let mut counters = self.counters.borrow_mut();
        counters.classic_rebalances += 1;
        counters.classic_rebalance_us_total += took_us.unwrap_or(0);
    }

    /// A share group's epoch bump.
    pub fn share_group_rebalance(&self) {
        self.counters.borrow_mut().share_rebalances += 1;
    }

    /// What share partitions did with records (see the fields).
    pub fn share_records(&self, change: ShareCounts) {
        let mut counters = self.counters.borrow_mut();
        counters.share_acquired += change.acquired;
        counters.share_redelivered += change.redelivered;
        counters.share_accepted += change.accepted;
        counters.share_released += change.released;
        counters.share_rejected += change.rejected;
        counters.share_archived_at_limit += change.archived_at_limit;
        counters.share_lock_timeouts += change.lock_timeouts;
    }

    /// How many share partitions this shard holds in memory now.
    pub fn share_partitions_held(&self, count: u64) {
        self.counters.borrow_mut().share_partitions = count;
    }

    /// Dead letters written (or not) to a share group's dead-letter topic.
    pub fn share_dead_letters(&self, records: u64, written: bool) {
        let mut counters = self.counters.borrow_mut();
        if written {
            counters.share_dead_letters += records;
        } else {
            counters.share_dead_letters_failed += records;
        }
    }

    /// A consumer group's epoch bumps (`started`) and rebalances that completed.
    pub fn consumer_rebalance(&self, started: u64, completed_us: Option<u64>) {
        let mut counters = self.counters.borrow_mut();
        counters.consumer_rebalances += started;
        if let Some(us) = completed_us {
            counters.consumer_rebalances_completed += 1;
            counters.consumer_rebalance_us_total += us;
        }
    }

    /// A heartbeat step that computed a target assignment, and how long the step took.
    pub fn consumer_assignment(&self, micros: u64) {
        let mut counters = self.counters.borrow_mut();
        counters.consumer_assignments += 1;
        counters.consumer_assignment_us_total += micros;
        counters.consumer_assignment_us_max = counters.consumer_assignment_us_max.max(micros);
    }

    pub fn offsets_replay_skipped(&self, count: u64) {
        self.counters.borrow_mut().offsets_replay_skipped += count;
    }

    pub fn partition_recovered(&self) {
        self.counters.borrow_mut().partition_recoveries += 1;
    }

    pub fn damaged_batch(&self) {
        self.counters.borrow_mut().damaged_batches += 1;
    }

    pub fn set_queued_request_bytes(&self, bytes: u64) {
        let mut counters = self.counters.borrow_mut();
        counters.queued_request_bytes = bytes;
        counters.queued_request_bytes_peak = counters.queued_request_bytes_peak.max(bytes);
    }
}
