//! Incremental fetch sessions (KIP-227) of this shard's connections.
//!
//! A fetcher (a consumer or a follower broker) that sends session epoch 0 gets a session id
//! back; from then on it sends only the partitions whose fetch state changed (new fetch
//! offset, new leader epoch...) and the ones it forgets, with the next epoch, and gets back
//! only the partitions with something new: records, another high watermark or log start, an
//! error, a diverging epoch. The session remembers every other partition's fetch state and
//! what was last answered for it.
//!
//! Owns: the sessions created on this shard, at most `SESSION_SLOTS`, each with its partitions
//! in answer order (a partition that was answered goes to the end, so that under `max_bytes`
//! every partition gets its turn).
//! Invariants: a session id is positive and `id % shard_count == shard`, so ids made on two
//! shards never collide and a request that reaches another shard (a new connection) gets
//! FETCH_SESSION_ID_NOT_FOUND rather than someone else's session. An epoch is used once: it
//! advances when a request is accepted, before the read.
//! Eviction (Kafka's `max.incremental.fetch.session.cache.slots`,
//! `min.incremental.fetch.session.eviction.ms`): when every slot is taken, a new session
//! evicts the least recently used one if that one has been idle for `SESSION_EVICTION_MS`, or
//! if the new one is a follower's and the old one a consumer's; otherwise it gets no session
//! (id 0), and its fetcher sends full fetches. The partitions all sessions hold are bounded
//! too (`SESSION_PARTITIONS_MAX`).
//! Runs on: one shard (the handler's `RefCell` borrow never crosses an await).

use indexmap::IndexMap;
use wire::ids::TopicPartition;

/// Kafka's `max.incremental.fetch.session.cache.slots` default.
pub const SESSION_SLOTS: usize = 1000;
/// Kafka's `min.incremental.fetch.session.eviction.ms` default.
pub const SESSION_EVICTION_MS: u64 = 120_000;
/// The partitions all of a shard's sessions may hold together. Kafka bounds only the slots,
/// but one request may name millions of partitions (a 100 MB frame), so the slots alone do
/// not bound memory. A new session that would pass it is not made (its fetcher sends full
/// fetches); an incremental fetch that would pass it closes its session
/// (FETCH_SESSION_ID_NOT_FOUND, and the fetcher starts again with a full fetch).
pub const SESSION_PARTITIONS_MAX: usize = 200_000;
/// Session epochs: 0 asks for a new session, -1 closes one (or asks for none).
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// One partition's fetch state as a request gives it (Fetch's per-partition fields), which a
/// session keeps for the partitions a later request leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFetch {
    pub offset: i64,
    pub partition_max_bytes: usize,
    /// The leader epoch the fetcher knows (v9+; -1: none, not checked).
    pub current_leader_epoch: i32,
    /// A follower's: the epoch of the last batch it has (v12+; -1: none).
    pub last_fetched_epoch: i32,
    /// A strata follower's durable end (`wire::strata_tags::DURABLE_END_TAG`); `None`: the
    /// fetch offset is durable.
    pub durable_end: Option<i64>,
    /// The topic's id (v13+ name topics by it; nil before), and whether no topic has it.
    pub topic_id: uuid::Uuid,
    pub unknown_id: bool,
}

/// Why a request's session metadata was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    /// FETCH_SESSION_ID_NOT_FOUND (70): no session has the id here (evicted, or made on
    /// another shard or broker).
    IdNotFound,
    /// INVALID_FETCH_SESSION_EPOCH (71): not the epoch the session expects next.
    InvalidEpoch,
    /// FETCH_SESSION_TOPIC_ID_ERROR (106): the session names topics by id and the request by
    /// name, or the other way round.
    TopicIdError,
}

/// What a request is, once its session metadata is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A full fetch with no session (epoch -1, or no slot for a new one: `id` 0), or the
    /// first fetch of a new session (`id` > 0). Every partition is answered.
    Full { id: i32 },
    /// An incremental fetch of session `id`: only the changed partitions are answered.
    Incremental { id: i32 },
}

impl Context {
    /// The session id the response carries.
    pub fn id(self) -> i32 {
        match self {
            Context::Full { id } | Context::Incremental { id } => id,
        }
    }
}

/// A request's session metadata and partitions.
pub struct Opening<P> {
    pub session_id: i32,
    pub epoch: i32,
    /// A follower broker's fetch (its sessions are kept over consumers').
    pub follower: bool,
    /// Topics named by id (Fetch v13+).
    pub uses_topic_ids: bool,
    /// The partitions the request lists, with their fetch state, each once.
    pub partitions: Vec<(TopicPartition, P)>,
    pub forgotten: Vec<TopicPartition>,
    pub now_ms: u64,
}

/// What a partition's answer held, for deciding whether an incremental answer lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// Not read this time (left out for the fetch's byte budget): listed in a full answer
    /// only, and its last answer kept.
    pub skipped: bool,
    pub has_records: bool,
    pub error: bool,
    pub diverging: bool,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

struct Cached<P> {
    fetch: P,
    /// What the last answer listing this partition said (-1: never answered, or an error).
    high_watermark: i64,
    log_start_offset: i64,
}

struct Session<P> {
    next_epoch: i32,
    follower: bool,
    uses_topic_ids: bool,
    last_used_ms: u64,
    partitions: IndexMap<TopicPartition, Cached<P>>,
}

/// A shard's sessions, shared by its fetch handler and its stats service.
pub type SharedFetchSessions = std::rc::Rc<std::cell::RefCell<FetchSessions<PartitionFetch>>>;

pub struct FetchSessions<P> {
    shard: u32,
    shard_count: u32,
    slots: usize,
    /// At most this many partitions held by all sessions together.
    partitions_max: usize,
    /// The partitions all sessions hold now.
    partitions_held: usize,
    sessions: std::collections::HashMap<i32, Session<P>>,
    /// Sessions evicted to make room, since start.
    pub evictions: u64,
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl<P: Clone> FetchSessions<P> {
    pub fn new(shard: u32, shard_count: u32, slots: usize, partitions_max: usize) -> Self {
        FetchSessions {
            shard,
            shard_count: shard_count.max(1),
            slots,
            partitions_max,
            partitions_held: 0,
            sessions: Default::default(),
            evictions: 0,
        }
    }

    /// Sessions open now, and the partitions they hold.
    pub fn sizes(&self) -> (usize, usize) {
        (self.sessions.len(), self.partitions_held)
    }

    /// Closes a session (its fetcher's next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND).
    fn remove(&mut self, id: i32) {
        if let Some(session) = self.sessions.remove(&id) {
            self.partitions_held -= session.partitions.len();
        }
    }

    /// Resolves a request: the session context and the partitions to read, in order (for an
    /// incremental fetch, every partition of the session, updated from the request).
    pub fn open(
        &mut self,
        request: Opening<P>,
    ) -> Result<(Context, Vec<(TopicPartition, P)>), SessionError> {
        let Opening { session_id, epoch, follower, uses_topic_ids, partitions, forgotten, now_ms } =
            request;
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != 0 {
                // A full fetch closes the session it names.
                self.remove(session_id);
            }
            let id = if epoch == INITIAL_EPOCH {
                self.create(follower, uses_topic_ids, &partitions, now_ms)
            } else {
                0
            };
            return Ok((Context::Full { id }, partitions));
        }
        let session = self.sessions.get_mut(&session_id).ok_or(SessionError::IdNotFound)?;
        if session.follower != follower {
            return Err(SessionError::IdNotFound);
        }
        if session.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return Err(SessionError::TopicIdError);
        }
        // What the session will hold: forgotten ones out, then the request's in.
        let dropped: std::collections::HashSet<&TopicPartition> =
            forgotten.iter().filter(|key| session.partitions.contains_key(*key)).collect();
        let kept =
            |key: &TopicPartition| session.partitions.contains_key(key) && !dropped.contains(key);
        let added = partitions.iter().filter(|(key, _)| !kept(key)).count();
        let after = session.partitions.len() - dropped.len() + added;
        if self.partitions_held - session.partitions.len() + after > self.partitions_max {
            self.remove(session_id);
            return Err(SessionError::IdNotFound);
        }
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return Err(SessionError::IdNotFound);
        };
        session.next_epoch = next_epoch(epoch);
        session.last_used_ms = now_ms;
        let before = session.partitions.len();
        for key in &forgotten {
            session.partitions.shift_remove(key);
        }
        for (key, fetch) in partitions {
            match session.partitions.get_mut(&key) {
                Some(cached) => cached.fetch = fetch,
                None => {
                    session
                        .partitions
                        .insert(key, Cached { fetch, high_watermark: -1, log_start_offset: -1 });
                }
            }
        }
        self.partitions_held = self.partitions_held - before + session.partitions.len();
        let all =
            session.partitions.iter().map(|(key, c)| (key.clone(), c.fetch.clone())).collect();
        Ok((Context::Incremental { id: session_id }, all))
    }

    /// Records what each partition's answer held (`answers` in the order `open` gave) and
    /// says which ones the response lists: all of a full fetch's; of an incremental one's,
    /// those with records, an error, a diverging epoch, or a high watermark or log start
    /// other than the last one listed. Listed partitions go to the end of the session.
    pub fn close(
        &mut self,
        context: Context,
        partitions: &[TopicPartition],
        answers: &[Answered],
    ) -> Vec<bool> {
        let id = context.id();
        let Some(session) = (id != 0).then(|| self.sessions.get_mut(&id)).flatten() else {
            return vec![true; answers.len()];
        };
        let mut listed = Vec::with_capacity(answers.len());
        let mut moved = Vec::new();
        for (key, answer) in partitions.iter().zip(answers) {
            let full = matches!(context, Context::Full { .. });
            let Some(cached) = session.partitions.get_mut(key) else {
                listed.push(full);
                continue;
            };
            if answer.skipped {
                listed.push(full);
                continue;
            }
            let changed = answer.has_records
                || answer.error
                || answer.diverging
                || cached.high_watermark != answer.high_watermark
                || cached.log_start_offset != answer.log_start_offset;
            let list = changed || full;
            if answer.error {
                // Listed again once it answers without the error.
                cached.high_watermark = -1;
                cached.log_start_offset = -1;
            } else if list {
                cached.high_watermark = answer.high_watermark;
                cached.log_start_offset = answer.log_start_offset;
            }
            if list && matches!(context, Context::Incremental { .. }) {
                moved.push(key.clone());
            }
            listed.push(list);
        }
        for key in moved {
            if let Some(cached) = session.partitions.shift_remove(&key) {
                session.partitions.insert(key, cached);
            }
        }
        listed
    }

    fn create(
        &mut self,
        follower: bool,
        uses_topic_ids: bool,
        partitions: &[(TopicPartition, P)],
        now_ms: u64,
    ) -> i32 {
        if self.slots == 0 || partitions.len() > self.partitions_max {
            return 0;
        }
        if self.sessions.len() >= self.slots {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|(_, session)| session.last_used_ms)
                .map(|(id, session)| (*id, session.last_used_ms, session.follower));
            match oldest {
                Some((id, last_used, old_follower))
                    if now_ms.saturating_sub(last_used) >= SESSION_EVICTION_MS
                        || (follower && !old_follower) =>
                {
                    self.remove(id);
                    self.evictions += 1;
                }
                _ => return 0,
            }
        }
        if self.partitions_held + partitions.len() > self.partitions_max {
            return 0;
        }
        let id = loop {
            let candidate = rand::random::<u32>() >> 1; // 0..=i32::MAX
            let id = (candidate - candidate % self.shard_count + self.shard) as i32;
            if id > 0 && !self.sessions.contains_key(&id) {
                break id;
            }
        };
        self.partitions_held += partitions.len();
        let partitions = partitions
            .iter()
            .map(|(key, fetch)| {
                (
                    key.clone(),
                    Cached { fetch: fetch.clone(), high_watermark: -1, log_start_offset: -1 },
                )
            })
            .collect();
        self.sessions.insert(
            id,
            Session { next_epoch: 1, follower, uses_topic_ids, last_used_ms: now_ms, partitions },
        );
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t".to_string(), partition)
    }

    fn opening(id: i32, epoch: i32, partitions: &[(i32, i64)], forgotten: &[i32]) -> Opening<i64> {
        Opening {
            session_id: id,
            epoch,
            follower: false,
            uses_topic_ids: false,
            partitions: partitions.iter().map(|(p, offset)| (tp(*p), *offset)).collect(),
            forgotten: forgotten.iter().map(|p| tp(*p)).collect(),
            now_ms: 0,
        }
    }

    fn quiet(high_watermark: i64) -> Answered {
        Answered {
            skipped: false,
            has_records: false,
            error: false,
            diverging: false,
            high_watermark,
            log_start_offset: 0,
        }
    }

    #[test]
    fn a_session_answers_only_what_changed_and_keeps_the_rest() {
        let mut sessions = FetchSessions::new(1, 2, 10, 100);
        let (context, wanted) = sessions.open(opening(0, 0, &[(0, 5), (1, 7)], &[])).unwrap();
        let Context::Full { id } = context else { panic!("{context:?}") };
        assert!(id > 0 && id % 2 == 1, "{id}");
        assert_eq!(wanted, vec![(tp(0), 5), (tp(1), 7)]);
        assert_eq!(sessions.close(context, &[tp(0), tp(1)], &[quiet(10), quiet(10)]), [true, true]);
        // Epoch 1 sends nothing: both partitions are read at their kept offsets, and neither
        // is listed, as nothing changed.
        let (context, wanted) = sessions.open(opening(id, 1, &[], &[])).unwrap();
        assert_eq!(context, Context::Incremental { id });
        assert_eq!(wanted, vec![(tp(0), 5), (tp(1), 7)]);
        assert_eq!(
            sessions.close(context, &[tp(0), tp(1)], &[quiet(10), quiet(10)]),
            [false, false]
        );
        // Partition 1 moves on and gets records; partition 0's high watermark moves.
        let (context, wanted) = sessions.open(opening(id, 2, &[(1, 9)], &[])).unwrap();
        assert_eq!(wanted, vec![(tp(0), 5), (tp(1), 9)]);
        let records = Answered { has_records: true, ..quiet(10) };
        assert_eq!(sessions.close(context, &[tp(0), tp(1)], &[quiet(11), records]), [true, true]);
        // An error is always listed, and so is the next good answer after it.
        let (context, wanted) = sessions.open(opening(id, 3, &[], &[])).unwrap();
        // Both were listed and moved to the end, in that order.
        assert_eq!(wanted, vec![(tp(0), 5), (tp(1), 9)]);
        let error = Answered { error: true, ..quiet(-1) };
        assert_eq!(sessions.close(context, &[tp(0), tp(1)], &[error, quiet(10)]), [true, false]);
        let (context, _) = sessions.open(opening(id, 4, &[], &[])).unwrap();
        assert_eq!(
            sessions.close(context, &[tp(1), tp(0)], &[quiet(10), quiet(11)]),
            [false, true]
        );
        // Forgetting a partition drops it; adding one reads it too.
        let (_, wanted) = sessions.open(opening(id, 5, &[(2, 0)], &[0])).unwrap();
        assert_eq!(wanted, vec![(tp(1), 9), (tp(2), 0)]);
        assert_eq!(sessions.sizes(), (1, 2));
    }

    #[test]
    fn wrong_epochs_unknown_ids_and_closed_sessions_are_refused() {
        let mut sessions = FetchSessions::new(0, 1, 10, 100);
        let (context, _) = sessions.open(opening(0, 0, &[(0, 0)], &[])).unwrap();
        let id = context.id();
        assert_eq!(sessions.open(opening(id, 2, &[], &[])).err(), Some(SessionError::InvalidEpoch));
        assert!(sessions.open(opening(id, 1, &[], &[])).is_ok());
        // An epoch is used once.
        assert_eq!(sessions.open(opening(id, 1, &[], &[])).err(), Some(SessionError::InvalidEpoch));
        assert_eq!(
            sessions.open(opening(id + 1, 1, &[], &[])).err(),
            Some(SessionError::IdNotFound)
        );
        // Names where the session used ids.
        let mut by_id = opening(id, 2, &[], &[]);
        by_id.uses_topic_ids = true;
        assert_eq!(sessions.open(by_id).err(), Some(SessionError::TopicIdError));
        // A follower cannot use a consumer's session.
        let mut follower = opening(id, 2, &[], &[]);
        follower.follower = true;
        assert_eq!(sessions.open(follower).err(), Some(SessionError::IdNotFound));
        // Epoch -1 closes it and makes none.
        let (context, wanted) = sessions.open(opening(id, FINAL_EPOCH, &[(3, 1)], &[])).unwrap();
        assert_eq!((context, wanted), (Context::Full { id: 0 }, vec![(tp(3), 1)]));
        assert_eq!(sessions.open(opening(id, 2, &[], &[])).err(), Some(SessionError::IdNotFound));
        assert_eq!(sessions.sizes(), (0, 0));
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    #[test]
    fn a_full_cache_evicts_only_idle_sessions_or_consumers_for_followers() {
        let mut sessions = FetchSessions::new(0, 1, 1, 100);
        let (first, _) = sessions.open(opening(0, 0, &[(0, 0)], &[])).unwrap();
        assert!(first.id() > 0);
        // Full, and the only session is in use: none for the next consumer.
        let mut later = opening(0, 0, &[(0, 0)], &[]);
        later.now_ms = SESSION_EVICTION_MS - 1;
        assert_eq!(sessions.open(later).unwrap().0, Context::Full { id: 0 });
        // A follower's takes a consumer's slot.
        let mut follower = opening(0, 0, &[(0, 0)], &[]);
        follower.follower = true;
        follower.now_ms = 1;
        let (taken, _) = sessions.open(follower).unwrap();
        assert!(taken.id() > 0);
        assert_eq!(sessions.evictions, 1);
        assert_eq!(
            sessions.open(opening(first.id(), 1, &[], &[])).err(),
            Some(SessionError::IdNotFound)
        );
        // Once idle long enough, anyone's new session evicts it.
        let mut idle = opening(0, 0, &[(0, 0)], &[]);
        idle.now_ms = 1 + SESSION_EVICTION_MS;
        assert!(sessions.open(idle).unwrap().0.id() > 0);
        assert_eq!((sessions.evictions, sessions.sizes().0), (2, 1));
    }

    #[test]
    fn the_partitions_all_sessions_hold_are_bounded() {
        let mut sessions = FetchSessions::new(0, 1, 10, 3);
        // Too many for one session: none is made.
        let (context, wanted) =
            sessions.open(opening(0, 0, &[(0, 0), (1, 0), (2, 0), (3, 0)], &[])).unwrap();
        assert_eq!((context, wanted.len()), (Context::Full { id: 0 }, 4));
        let (first, _) = sessions.open(opening(0, 0, &[(0, 0), (1, 0)], &[])).unwrap();
        // Two held: a second session of two would pass the bound.
        assert_eq!(sessions.open(opening(0, 0, &[(2, 0), (3, 0)], &[])).unwrap().0.id(), 0);
        // Adding one is fine; adding a second closes the session.
        assert!(sessions.open(opening(first.id(), 1, &[(2, 0)], &[])).is_ok());
        assert_eq!(sessions.sizes(), (1, 3));
        // Forgetting one and adding another keeps the count.
        assert!(sessions.open(opening(first.id(), 2, &[(3, 0)], &[0])).is_ok());
        assert_eq!(sessions.sizes(), (1, 3));
        assert_eq!(
            sessions.open(opening(first.id(), 3, &[(4, 0)], &[])).err(),
            Some(SessionError::IdNotFound)
        );
        assert_eq!(sessions.sizes(), (0, 0));
        assert!(sessions.open(opening(0, 0, &[(0, 0), (1, 0), (2, 0)], &[])).unwrap().0.id() > 0);
    }
}
